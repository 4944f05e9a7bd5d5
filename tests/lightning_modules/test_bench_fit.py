import argparse

import pytest

from pyg_fastload.lightning.bench import fit as bench_fit

from ..helpers import requires_torch_sparse

FAST = 'FastLoadDataModule'
UNTRIMMED = 'FastLoadDataModule, trim=False'


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


def test_without_pyg_the_trim_share_is_reported(tmp_path, capsys):
    result = run(tmp_path, '--pyg-workers')
    out = capsys.readouterr().out
    assert "model's share (trim_to_layer)" in out
    assert result['trim_speedup'] == pytest.approx(
        result[f'{UNTRIMMED} s/step'] / result[f'{FAST} s/step'])
    assert 'speedup' not in result  # no PyG row, no headline ratio


@requires_torch_sparse
def test_headline_ratio_is_like_for_like(tmp_path, capsys):
    result = run(tmp_path, '--pyg-workers', '0')
    out = capsys.readouterr().out
    pyg = 'PyG LightningNodeData(num_workers=0)'
    assert 'like for like' in out and 'validation accuracy' in out
    # the headline compares the same untrimmed model on both loaders
    assert result['speedup'] == pytest.approx(
        result[f'{pyg} s/step'] / result[f'{UNTRIMMED} s/step'])
    assert result['trimmed_speedup'] == pytest.approx(
        result[f'{pyg} s/step'] / result[f'{FAST} s/step'])
    assert result['val_acc_difference'] == pytest.approx(
        result[f'{UNTRIMMED} val_acc'] - result[f'{pyg} val_acc'])


def test_fit_bench_needs_a_timed_epoch(tmp_path):
    with pytest.raises(ValueError, match="'--epochs 1'"):
        run(tmp_path, '--epochs', '1')
