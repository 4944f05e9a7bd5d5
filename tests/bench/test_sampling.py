import argparse
import threading

from pyg_fastload.bench import sampling


def test_bench_sampling_times_every_side(tmp_path, capsys):
    parser = argparse.ArgumentParser()
    sampling.add_arguments(parser)
    out = sampling.run(parser.parse_args([
        '--preset', 'tiny', '--batches', '3', '--warmup', '2', '--rounds',
        '1', '--batch-size', '16', '--fanout', '3', '2', '--model-ms', '1',
        '--cache-dir', str(tmp_path)]))
    text = capsys.readouterr().out
    assert '(target >= 1.6x)' in text and 'target <= +5%)' in text
    rates = out['batches_per_s']
    assert {'sequential (pipeline=False)', 'one sampling thread',
            'pool of 2, launch score'} <= set(rates)
    assert out['pool_ratio'] == (rates['pool of 2, launch score']
                                 / rates['one sampling thread'])
    assert set(out['trainer']) == {
        'alone', 'sequential (pipeline=False)'} | {
        f'{side}, {run_ahead}' for side in ('one sampling thread',
                                            'pool of 2')
        for run_ahead in ('adaptive', 'trainer_first')}
    assert "run_ahead='trainer_first' slows the trainer" in text
    assert "of the step's time beside it" in text
    assert all(len(v) == 3 for v in out['trainer'].values())
    assert "run_ahead='trainer_first' measured the trainer's step at" in text
    assert set(out['batch_ms']) == {
        f'{kind}, width {width}' for width in (1, 2)
        for kind in ('one draw per hop', 'chunk tasks')}
    assert 'faster per batch than one draw per hop' in text


def test_the_trainer_counts_the_stage_threads_cpu_during_its_steps():
    assert sampling._train([None] * 4, 64, 3)[2] == 0.0  # no stage thread
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            pass

    busy = threading.Thread(target=spin, name='pyg_fastload-busy')
    busy.start()
    try:
        model, _, stages = sampling._train([None] * 4, 400, 3)
    finally:
        stop.set()
        busy.join()
    assert stages >= 0.2 * model  # it spun beside every product
