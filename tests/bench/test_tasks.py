import argparse

import pytest

from pyg_fastload.bench import tasks


def _args(tmp_path, *more):
    parser = argparse.ArgumentParser()
    tasks.add_arguments(parser)
    return parser.parse_args([
        '--preset', 'tiny', '--batches', '2', '--warmup', '1', '--rounds',
        '1', '--batch-size', '8', '--fanout', '3', '2', '--scale', '0.5',
        '--batch-sizes', '4', '8', '--sampling-workers', '2',
        '--contention', '1', '--cache-dir', str(tmp_path), *more])


def test_bench_tasks_reports_every_experiment(tmp_path, capsys):
    out = tasks.run(_args(tmp_path))
    text = capsys.readouterr().out
    assert 'FIFO / priority: median' in text
    assert {'completion: priority median', 'completion: fifo median',
            'completion: priority variance', 'completion: fifo variance',
            'throughput: 4 ratio', 'throughput: 8 ratio'} <= set(out)
    assert "as much as PyG's NeighborLoader (target: <= 1.2x)" in text
    assert 'contention: ours, task graphs on 2 threads / PyG' in out


@pytest.mark.parametrize('bad,match', [
    (('--scale', '0'), "'--scale 0.0' must be in"),
    (('--sampling-workers', '1'), "'--sampling-workers 1'"),
])
def test_bench_tasks_names_a_bad_argument(tmp_path, bad, match):
    with pytest.raises(ValueError, match=match):
        tasks.run(_args(tmp_path, *bad))
