import argparse
from types import SimpleNamespace

from pyg_fastload.bench import partition as bench_partition

from ..distributed.ranks import _context


def test_bench_partition_measures_every_method(tmp_path, capsys,
                                               monkeypatch):
    # each partition in a process of its own as the bench starts it, forked
    # from the warm server (torch imported once) instead of spawned
    monkeypatch.setattr(bench_partition, 'multiprocessing', SimpleNamespace(
        get_context=lambda method: _context()))
    parser = argparse.ArgumentParser()
    bench_partition.add_arguments(parser)
    args = parser.parse_args(['--preset', 'tiny', '--cache-dir',
                              str(tmp_path), '--out-dir',
                              str(tmp_path / 'parts')])
    reports = bench_partition.run(args)
    out = capsys.readouterr().out
    assert set(reports) == {'hash', 'metis', 'pagraph', 'bytegnn'}
    assert (tmp_path / 'parts' / 'tiny-4-bytegnn' / 'report.json').exists()
    # each partition ran in a process of its own and recorded itself
    for report in reports.values():  # a process that imported torch
        assert 100 * 2**20 < report['partition_peak_rss_bytes'] < 16 * 2**30
    assert reports['pagraph']['replication'] > 0  # parts overlap
    assert 'edge cut' in out and 'pagraph replicates' in out
    # the verdicts are those of check_targets on the same reports
    for line in bench_partition.check_targets(reports):
        assert line in out


def _report(cut, balance, r_micro, r_sub, ratio):
    return {'edge_cut': cut, 'balance': {'train_mask': balance},
            'locality': {'2 hops': {'R_micro': r_micro, 'R_sub': r_sub}},
            'requests': {'ratio': ratio}}


def test_targets_say_met_and_short():
    good = {'hash': _report(0.75, 1.0, 0.25, 0.25, 2.9),
            'metis': _report(0.16, 1.002, 0.72, 0.25, 0.7),
            'bytegnn': _report(0.38, 1.001, 0.5, 0.25, 1.3)}
    lines = bench_partition.check_targets(good)
    assert not [line for line in lines if line.startswith('SHORT')]
    assert 'met: METIS edge cut 0.21x hash\'s (target <= 0.3x)' in lines
    bad = dict(good, metis=_report(0.3, 1.2, 0.3, 0.25, 3.0))
    short = [line for line in bench_partition.check_targets(bad)
             if line.startswith('SHORT')]
    assert len(short) == 4  # cut, balance, locality, request ordering


def test_bounded_row_targets():
    metis = _report(0.16, 1.002, 0.72, 0.25, 0.7)
    bounded = dict(_report(0.2, 1.02, 0.7, 0.25, 0.8),
                   partition_peak_rss_bytes=2 * 2**30,
                   assign_peak_rss_bytes=2**30)
    lines = bench_partition.check_targets(
        {'metis': metis, 'bounded': bounded}, 2 * 2**30)
    assert 'met: bounded peak memory 2.0 GiB (target <= 2.5 GiB, 1.25x ' \
        '--max-memory)' in lines
    assert 'met: bounded peak memory while assigning (before writing the ' \
        'parts) 1.0 GiB (target <= 2.5 GiB, 1.25x --max-memory)' in lines
    assert "met: bounded edge cut 1.25x unbounded METIS's (target <= " \
        "1.5x)" in lines
    assert 'met: bounded train balance max/mean 1.020 (target <= 1.05)' \
        in lines
    bad = dict(bounded, edge_cut=0.3, partition_peak_rss_bytes=3 * 2**30)
    lines = bench_partition.check_targets({'metis': metis, 'bounded': bad},
                                          2 * 2**30)
    assert 'SHORT: bounded peak memory 3.0 GiB (target <= 2.5 GiB, 1.25x ' \
        '--max-memory)' in lines
    assert "SHORT: bounded edge cut 1.88x unbounded METIS's (target <= " \
        "1.5x)" in lines
