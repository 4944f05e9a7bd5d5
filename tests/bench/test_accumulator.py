import argparse

from pyg_fastload.bench import accumulator
from pyg_fastload.datasets import DiskGraphConfig, prepare_disk_synthetic


def test_bench_accumulator_sweeps_both_sides(tmp_path, capsys):
    cfg = DiskGraphConfig(num_nodes=20_000, mean_degree=6.0,
                          num_features=32, num_classes=4,
                          train_fraction=0.2)
    prepare_disk_synthetic(cfg, tmp_path / 'ds', progress=False)
    parser = argparse.ArgumentParser()
    accumulator.add_arguments(parser)
    out = accumulator.run(parser.parse_args([
        '--dataset', str(tmp_path / 'ds'), '--batches', '5', '--warmup', '2',
        '--batch-sizes', '8', '16', '--target-batch', '16',
        '--read-ahead', '3', '--in-flight', '1', '2', '--probe-rows', '300',
        '--probe-seconds', '0.1']))
    text = capsys.readouterr().out
    assert '(target >= 80%)' in text and 'batch 8: with / without' in text
    bound = out['bound']['best']
    for size in (8, 16):
        off, on = out['results'][size]['off'], out['results'][size]['on']
        assert off['merged_batches'] == 0 and off['announced'] == 0
        # counted after the 2 warm-up batches: the batches announced 3 ahead
        # from then on, 7 - 3 - 2
        assert on['announced'] == 2
        for side in (off, on):
            # the host buffer (10%) redirects some rows, never all
            assert 0 < side['storage_requests'] < side['rows']
            assert side['vs_bound'] == side['read_rate'] / bound
