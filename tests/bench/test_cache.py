import argparse

from pyg_fastload.bench import cache as bench_cache


def test_disk_section_reports_every_configuration(tmp_path, capsys):
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
    assert 0 < result['storage_bytes_ratio'] <= 1
    assert result['epoch_time_ratio'] > 0
    assert (tmp_path / 'datasets' / 'tiny-seed0' / 'meta.json').exists()
