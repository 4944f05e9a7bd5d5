import argparse

import pytest

from lightning_modules.bench import fit as bench_fit

from ..conftest import requires_torch_sparse


def run(tmp_path, *extra):
    parser = argparse.ArgumentParser()
    bench_fit.add_arguments(parser)
    args = parser.parse_args([
        '--preset', 'tiny', '--fanout', '4', '2', '--layers', '2',
        '--batch-size', '32', '--hidden', '16', '--batches', '2',
        '--epochs', '2', '--val-batches', '2', '--cache-dir', str(tmp_path),
        *extra
    ])
    return bench_fit.run(args)


def test_fit_bench_fastload_rows(tmp_path, capsys):
    result = run(tmp_path, '--pyg-workers')
    out = capsys.readouterr().out
    assert "model's share (trim_to_layer)" in out
    for label in ('FastLoadDataModule', 'FastLoadDataModule, trim=False'):
        assert result[f'{label} s/step'] > 0
        assert 0 <= result[f'{label} val_acc'] <= 100
    assert result['trim_speedup'] > 0 and 'speedup' not in result


@requires_torch_sparse
def test_fit_bench_reports_ratio_to_pyg(tmp_path, capsys):
    result = run(tmp_path, '--pyg-workers', '0')
    out = capsys.readouterr().out
    assert 'best PyG' in out and 'validation accuracy' in out
    assert result['speedup'] > 0 and result['loader_speedup'] > 0
    assert 0 <= result['PyG LightningNodeData(num_workers=0) val_acc'] <= 100
    assert abs(result['val_acc_difference']) <= 100


def test_fit_bench_needs_a_timed_epoch(tmp_path):
    with pytest.raises(ValueError, match="'--epochs 1'"):
        run(tmp_path, '--epochs', '1')
