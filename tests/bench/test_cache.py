import argparse

import pytest

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


def test_a_hetero_preset_shares_one_cache_across_types(capsys):
    parser = argparse.ArgumentParser()
    bench_cache.add_arguments(parser)
    args = parser.parse_args(['--preset', 'hetero-tiny', '--fanout', '4',
                              '3', '--batch-size', '32', '--fractions', '0',
                              '20', '100'])
    result = bench_cache.run(args)['hit_ratio']
    out = capsys.readouterr().out
    assert 'features on every type: 742 rows' in out
    for layout in ('papers only', 'every type'):
        curves = result[layout]['hit_ratio']
        for name, curve in curves.items():  # nothing cached, everything
            assert curve[0] == 0.0 and abs(curve[-1] - 1.0) < 1e-9, name
        at_20 = result[layout]['at_20']
        # nothing ranks the evaluated epoch better than its own trace
        assert max(at_20.values()) == at_20['oracle']
        assert at_20['oracle'] > at_20['random']
    with pytest.raises(ValueError, match="'--scale' and '--max-batches'"):
        bench_cache.run(parser.parse_args(['--preset', 'tiny', '--scale',
                                           '0.5']))
