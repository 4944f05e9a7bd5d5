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


def test_the_trainer_counts_the_stage_threads_cpu_during_its_steps(
        monkeypatch):
    assert sampling._train([None] * 4, 64, 3)[2] == 0.0  # no stage thread
    stop = threading.Event()
    threads = [threading.Thread(target=stop.wait, name=name) for name in
               ('pyg_fastload-busy', 'pyg_fastload-other', 'not-a-stage')]
    for thread in threads:
        thread.start()
    # A fake CPU clock for these threads (none for another test's thread
    # still stopping): each reading 0.5 s on, whatever loads the machine.
    readings = {}

    def thread_cpu(ident):
        if ident not in {thread.ident for thread in threads}:
            return None
        readings[ident] = readings.get(ident, -0.5) + 0.5
        return readings[ident]

    monkeypatch.setattr(sampling, 'thread_cpu', thread_cpu)
    try:
        stages = sampling._train([None] * 4, 64, 3)[2]
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    # read before and after every step: 0.5 s per stage thread per step
    assert stages == 2 * 0.5
    assert threads[2].ident not in readings  # not a loader's thread
