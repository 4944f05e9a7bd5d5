import json
import signal
import time
from pathlib import Path

import pytest

from pyg_fastload.lightning.command import main
from pyg_fastload.lightning.run_end import result_line

from ..distributed.ranks import Forked, run_command

TINY = ['--data.dataset', 'tiny', '--data.num_neighbors', '[5, 5]',
        '--data.batch_size', '256', '--data.progress', 'false',
        '--trainer.accelerator', 'cpu',
        '--trainer.enable_progress_bar', 'false']


def _written(out: str) -> dict:
    r"""The ``written: what path, ...`` line of a fit, as a dict."""
    [line] = [line for line in out.splitlines()
              if line.startswith('written: ')]
    return dict(item.split(' ', 1) for item in line.removeprefix(
        'written: ').split(', '))


def _plots(entry: str) -> list:
    r"""The files of a ``DIR/{a.png,b.png}`` entry."""
    folder, _, names = entry.partition('/{')
    return [Path(folder) / name for name in names.rstrip('}').split(',')]


def test_the_result_line_names_each_task_s_metrics():
    assert result_line({'val_acc': 0.90651, 'val_loss': 0.3,
                        'train_loss': 0.2}) == 'validation accuracy: 0.9065'
    assert result_line({'val_auroc': 0.91, 'val_hits@50': 0.9,
                        'val_hits@10': 0.8, 'val_mrr': 0.412}) == (
        'validation MRR: 0.4120, Hits@10: 0.8000, Hits@50: 0.9000, '
        'AUROC: 0.9100')
    assert result_line({'train_loss': 0.2}) is None


@pytest.mark.reliability(
    fault='a link fit ended without its MRR or Hits@K, and no fit drew '
          'its plots (only `pyg-fastload report` did; one epoch gave a '
          'one-dot throughput plot)',
    behaviour="the fit's last lines: the validation MRR, Hits@K and AUROC "
              '(accuracy for nodes) and where the logs, checkpoint, stats '
              'and the plots it drew are')
def test_a_link_fit_ends_with_its_ranking_metrics_and_plots(cache_env,
                                                            capsys):
    main(['fit', '--model', 'LinkPredictor', '--data.task', 'link', *TINY,
          '--model.hidden_channels', '16', '--model.num_layers', '2',
          '--model.hits', '[1, 10]', '--trainer.max_epochs', '1',
          '--trainer.default_root_dir', str(cache_env / 'runs')])
    out = capsys.readouterr().out
    [result] = [line for line in out.splitlines()
                if line.startswith('validation ')]
    assert result.startswith('validation MRR: 0.') and \
        ', Hits@1: ' in result and ', Hits@10: ' in result and \
        ', AUROC: ' in result, result
    written = _written(out)
    [stats] = (cache_env / 'runs').rglob('fastload_stats.json')
    assert Path(written['stats']) == stats
    plots = _plots(written['plots'])
    assert [p.name for p in plots] == ['throughput.png', 'time_breakdown.png']
    assert all(p.parent == stats.parent and p.stat().st_size > 10_000
               for p in plots)


def _start_fit(root: Path) -> Forked:
    command = ['fit', *TINY,
               '--model.hidden_channels', '16', '--model.num_layers', '2',
               '--data.batch_size', '32', '--trainer.max_epochs', '1000',
               '--trainer.log_every_n_steps', '1',
               '--trainer.logger', json.dumps({
                   'class_path': 'pytorch_lightning.loggers.CSVLogger',
                   'init_args': {'save_dir': str(root),
                                 'flush_logs_every_n_steps': 1}}),
               '--trainer.default_root_dir', str(root)]
    return Forked(command)


@pytest.mark.reliability(
    fault='Ctrl-C in the first epoch of a fit: no fastload_stats.json, and '
          '`pyg-fastload report` skipped the run without a word',
    behaviour='the steps that ran summed up and written (the epoch marked '
              'partial), plotted, the files named; report names a run '
              'without stats')
def test_an_interrupted_fit_keeps_what_ran(cache_env):
    root = cache_env / 'runs'
    fit = _start_fit(root)
    try:
        deadline = time.monotonic() + 240
        # a few steps logged: training is under way in epoch 0
        while not any(len(path.read_text().splitlines()) > 3
                      for path in root.rglob('metrics.csv')):
            assert fit.poll() is None, fit.communicate()[1][-2000:]
            assert time.monotonic() < deadline, 'training never started'
            time.sleep(0.2)
        fit.send_signal(signal.SIGINT)
        out, err = fit.communicate(timeout=120)
    finally:
        if fit.poll() is None:
            fit.kill()
            fit.wait(timeout=30)
    assert fit.returncode == 130, err[-2000:]
    assert '1 epoch(s) (the last one interrupted)' in out, out[-2000:]
    assert 'interrupted in epoch 0 ' in out
    written = _written(out)
    stats = json.loads(Path(written['stats']).read_text())
    [epoch] = stats['epochs']
    assert epoch['partial'] is True and epoch['epoch'] == 0
    assert epoch['batches'] > 0 and epoch['seeds'] == 32 * epoch['batches']
    assert all(path.is_file() for path in _plots(written['plots']))

    # a run that stopped before any stats: report says so
    (root / 'lightning_logs' / 'version_9').mkdir(parents=True)
    (root / 'lightning_logs' / 'version_9' / 'hparams.yaml').write_text('')
    done = run_command(['report', str(root)], timeout=120)
    assert done.returncode == 0, done.stderr
    assert "pyg-fastload report: skipped '" in done.stderr and \
        "version_9': no 'fastload_stats.json'" in done.stderr


@pytest.mark.reliability(
    fault="the predict command a fit prints, run once, then again over its "
          "own predictions",
    behaviour=("the run leaves nothing but the predictions (was: a logs "
               "version_N of config.yaml and hparams.yaml, which report "
               "called a fit stopped before its first batch, and Lightning's "
               "'dirpath has changed' warning); run again, one line naming "
               "the writer's key `--trainer.callbacks.overwrite true`, which "
               "then replaces them (was: `--overwrite`, an unknown key)"))
def test_a_fit_ends_with_the_command_that_predicts_every_node(cache_env,
                                                              capsys):
    import shlex
    import warnings
    from pyg_fastload.inference import read_predictions
    runs = cache_env / 'runs'
    main(['fit', *TINY, '--model.hidden_channels', '16',
          '--model.num_layers', '2', '--trainer.max_epochs', '1',
          '--trainer.default_root_dir', str(runs)])
    out = capsys.readouterr().out
    [line] = [line for line in out.splitlines()
              if line.startswith("next, every node's prediction: ")]
    command = shlex.split(line.split(': ', 1)[1].rsplit(' (', 1)[0])
    assert command[:2] == ['pyg-fastload', 'predict']
    assert _written(out)['checkpoint'] in command
    fitted = sorted(runs.rglob('*'))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        main(command[1:])  # the printed command runs as it is
    assert read_predictions('predictions')['node_ids'].tolist() == list(
        range(2000))
    # no clutter: no new log directory, no warning about the checkpoint's
    assert sorted(runs.rglob('*')) == fitted
    said = [str(w.message) for w in caught]
    assert not [w for w in said if 'dirpath has changed' in w
                or 'callbacks used to create the checkpoint' in w], said
    report = run_command(['report', str(runs)], timeout=120)
    assert report.returncode == 0 and 'skipped' not in report.stderr, \
        report.stderr
    # again (a process of its own: a config error ends the process): the
    # writer's own key, which then replaces the predictions
    again = run_command(command[1:], timeout=300)
    assert again.returncode == 2, again.stderr[-2000:]
    assert "already exists; pass `--trainer.callbacks.overwrite true`" in \
        again.stderr.strip().splitlines()[-1], again.stderr[-2000:]
    capsys.readouterr()
    main([*command[1:], '--trainer.callbacks.overwrite', 'true'])
    assert "wrote the predicted classes of 2,000 nodes" in \
        capsys.readouterr().out
