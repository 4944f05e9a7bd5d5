import argparse

import pytest

from pyg_fastload.bench import train as bench_train

from ..conftest import requires_torch_sparse

FAST = 'FastNeighborLoader'


def run(tmp_path, *extra):
    parser = argparse.ArgumentParser()
    bench_train.add_arguments(parser)
    args = parser.parse_args([
        '--preset', 'tiny', '--fanout', '4', '2', '--batch-size', '32',
        '--hidden', '16', '--batches', '3', '--cache-dir', str(tmp_path),
        *extra
    ])
    return bench_train.run(args)


def test_every_fast_loader_trains_the_same_model(tmp_path, capsys):
    result = run(tmp_path, '--pyg-workers', '--disk', '--trim')
    out = capsys.readouterr().out
    assert 'pipelined / sequential' in out and 'hidden' in out
    # Pipelined or not, features in memory or on disk, trimmed or not: the
    # same batches and the same seed outputs, so the same losses.
    reference = result[f'{FAST} loss']
    for name in (f'{FAST}(pipeline=False)', f'{FAST} + trim_to_layer',
                 f'{FAST}, features on disk'):
        assert result[f'{name} loss'] == pytest.approx(reference, rel=1e-5)
    assert 'speedup' not in result  # no PyG row, no ratio to it


@requires_torch_sparse
def test_train_bench_reports_ratio_to_pyg(tmp_path, capsys):
    result = run(tmp_path, '--pyg-workers', '0')
    assert 'best PyG' in capsys.readouterr().out
    pyg = result['PyG NeighborLoader(num_workers=0) loss']
    # the same model on other samples of the same graph: a comparable loss
    assert pyg == pytest.approx(result[f'{FAST} loss'], rel=0.2)
    assert set(result) >= {'speedup', 'pipelined_vs_sequential'}
