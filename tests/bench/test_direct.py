import argparse

import pytest

from pyg_fastload.bench import direct
from pyg_fastload.datasets import DiskGraphConfig, prepare_disk_synthetic

pytest.importorskip('torch_sparse')  # PyG's NeighborLoader samples with it


def test_bench_direct_compares_the_same_batches(tmp_path, capsys):
    cfg = DiskGraphConfig(num_nodes=20_000, mean_degree=6.0,
                          num_features=32, num_classes=4,
                          train_fraction=0.2)
    prepare_disk_synthetic(cfg, tmp_path / 'ds', progress=False)
    parser = argparse.ArgumentParser()
    direct.add_arguments(parser)
    out = direct.run(parser.parse_args([
        '--dataset', str(tmp_path / 'ds'), '--batches', '3',
        '--batch-size', '64', '--in-flight', '1', '4', '--probe-rows',
        '500', '--probe-seconds', '0.2', '--policies',
        'expected_access', 'random']))
    text = capsys.readouterr().out
    assert 'random-read bound' in text and '(target >= 3x)' in text
    assert set(out['bound']['rows_per_s']) == {1, 4}
    results = out['results']
    base = results['pyg x[n_id] over np.memmap, MADV_RANDOM']
    ours = results['direct + host buffer']
    # both sides loaded the same batches: mmap reads every row, the tiers
    # only what the host buffer missed, and counted blocks of it
    assert ours['storage_rows'] < base['storage_rows']
    assert ours['counted_bytes'] >= ours['storage_rows'] * 32 * 4
    assert ours['disk_bytes'] >= ours['counted_bytes']
    # the host-buffer shares are those the tiers served (ranked by the
    # first policy, which needs the fan-outs)
    rows = base['storage_rows']
    shares = out['host_shares']
    assert ours['storage_rows'] == round(rows * (1 - shares[
        'expected_access']['share']))
    assert shares['expected_access']['share'] > shares['random']['share']
