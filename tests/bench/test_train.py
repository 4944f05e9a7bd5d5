import argparse

from pyg_fastload.bench import train as bench_train

from ..conftest import requires_torch_sparse


def run(tmp_path, *extra):
    parser = argparse.ArgumentParser()
    bench_train.add_arguments(parser)
    args = parser.parse_args([
        '--preset', 'tiny', '--fanout', '4', '2', '--batch-size', '32',
        '--hidden', '16', '--batches', '3', '--cache-dir', str(tmp_path),
        *extra
    ])
    return bench_train.run(args)


def test_train_bench_with_disk_features(tmp_path, capsys):
    result = run(tmp_path, '--pyg-workers', '--disk', '--trim')
    out = capsys.readouterr().out
    assert 'pipelined / sequential' in out and 'hidden' in out
    assert result['pipelined_vs_sequential'] > 0
    assert 0 <= result['FastNeighborLoader, features on disk starved'] <= 1


@requires_torch_sparse
def test_train_bench_reports_ratio_to_pyg(tmp_path, capsys):
    result = run(tmp_path, '--pyg-workers', '0')
    assert 'speedup' in result
    assert 'best PyG' in capsys.readouterr().out
