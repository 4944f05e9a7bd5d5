import argparse

from pyg_fastload.bench import cache as bench_cache


def test_disk_section_caches_spare_storage_reads(tmp_path, capsys):
    parser = argparse.ArgumentParser()
    bench_cache.add_arguments(parser)
    args = parser.parse_args([
        '--preset', 'tiny', '--fanout', '4', '2', '--batch-size', '32',
        '--epoch-batches', '3', '--cache-dir', str(tmp_path),
        '--skip-hit-ratio'
    ])
    result = bench_cache.run(args)['disk']
    out = capsys.readouterr().out
    for name in ('all in memory', 'plain mmap', 'host buffer (out-degree)',
                 'window-buffered device'):
        assert name in out
    # a host buffer of the hottest rows spares storage reads, and a device
    # cache in front of it spares more (fixed seed: 0.74x, then 0.63x)
    assert result['storage_bytes_ratio'] < 0.9
    assert result['tiered_storage_bytes_ratio'] < \
        result['storage_bytes_ratio']
    assert (tmp_path / 'datasets' / 'tiny-seed0' / 'meta.json').exists()
