import pytest

from pyg_fastload.lightning.stats_summary import combine_ranks, summarize
from pyg_fastload.lightning.summary_text import format_summary


def _record(seeds, seconds, host, storage, remote, sampling):
    def tier(hits, requests):
        return {'requests': requests, 'hits': hits, 'bytes': 400 * hits,
                'pages': 0, 'disk_bytes': 0}
    return {'epoch': 0, 'global_step': 4, 'batches': 4, 'seeds': seeds,
            'train_time_s': seconds, 'loader': 'FastNeighborLoader',
            'time': {'sampling': sampling, 'model': seconds - 1,
                     'waiting': 1.0, 'epoch': seconds},
            'loader_counts': {'batches': 4, 'run_ahead': 2},
            'peak_anon_bytes': 2**30 * seconds,
            'cache': {'x': {'host': tier(host, host + storage + remote),
                            'storage': tier(storage, storage + remote),
                            'remote': tier(remote, remote)}}}


@pytest.mark.reliability(
    fault="a distributed run's summary from rank 0's counters alone",
    behaviour='rows, bytes and seeds summed over the ranks, the slowest '
              "rank's time, timings averaged; each rank's rows printed "
              'beside the total')
def test_ranks_are_summed_and_printed_each():
    per_rank = [[_record(256, 2.0, 100, 50, 10, 1.0)],
                [_record(128, 4.0, 30, 60, 70, 3.0)]]
    [both] = combine_ranks(per_rank)
    assert both['seeds'] == 384 and both['batches'] == 8
    assert both['train_time_s'] == 4.0  # the slowest rank
    assert both['seeds_per_s'] == pytest.approx(384 / 4.0)
    assert both['time']['sampling'] == pytest.approx(2.0)  # mean
    assert both['loader_counts'] == {'batches': 8, 'run_ahead': 2}
    assert both['peak_anon_bytes'] == 4 * 2**30
    host = both['cache']['x']['host']
    assert host['hits'] == 130 and host['requests'] == 160 + 160
    assert host['hit_ratio'] == pytest.approx(130 / 320)

    summary = summarize([both], ranks=2)
    assert summary['ranks'] == 2
    assert summary['rows_by_tier']['x']['remote'] == {
        'rows': 80, 'bytes': 80 * 400}
    text = format_summary(summary, [summarize(r) for r in per_rank])
    lines = text.splitlines()
    assert lines[0].startswith('LoaderMonitor: 2 ranks together')
    header = lines.index(next(line for line in lines
                              if line.startswith('rows served')))
    assert 'other ranks' in lines[header]
    rows = lines[header + 1:header + 4]
    assert [row.split()[0:3] for row in rows] == [
        ['x', '(all', 'ranks)'], ['x', '(rank', '0)'], ['x', '(rank', '1)']]
    assert rows[0].split()[3:5] == ['130', '(0.0']  # host rows, all ranks
    assert rows[2].split()[-2:] == ['(0.0', 'MiB)'] and '70 ' in rows[2]
    assert 'mean of 2 ranks' in text
    # one epoch missing on a rank: only the epochs every rank has
    assert combine_ranks([per_rank[0] * 2, per_rank[1]]) == [both]
    # labels and masks (under 5% of the bytes) named, not tabled
    both['cache']['y'] = {'storage': dict(host, bytes=8),
                          'remote': dict(host, bytes=1)}
    text = format_summary(summarize([both], ranks=2))
    assert '(under 5% of the bytes, not shown: y)' in text
    assert not any(line.startswith('y') for line in text.splitlines())


@pytest.mark.reliability(
    fault="the last tier's hit ratio printed as 0.988 (storage counts the "
          'distinct rows it read), rows asked of storage against fewer in '
          'the table; the paused sampler listed among the busy stages',
    behaviour='hit ratios for the caches only; storage served the rows '
              'asked of it, the distinct rows said apart; the paused '
              'sampler on a line of its own, said to be no bottleneck')
def test_storage_serves_every_row_asked_and_a_paused_sampler_is_idle():
    record = _record(256, 2.0, 100, 50, 0, 1.0)
    del record['cache']['x']['remote']
    record['cache']['x']['storage'] = {'requests': 60, 'hits': 48,
                                       'bytes': 48 * 400, 'pages': 0,
                                       'disk_bytes': 0}
    record['time']['throttled'] = 0.5
    summary = summarize([record])
    assert summary['hit_ratio']['x'] == {'host': pytest.approx(100 / 150)}
    assert summary['rows_by_tier']['x']['storage']['rows'] == 60
    assert summary['storage_read']['x'] == {'rows': 60, 'distinct_rows': 48,
                                            'disk_bytes': 0}
    lines = format_summary(summary).splitlines()
    assert lines[1].split() == ['cache', 'hit', 'ratio', 'host', 'buffer']
    assert lines[3].split()[:3] == ['rows', 'served', '(bytes)']
    assert lines[4].split()[4] == '60'  # storage's rows: the rows asked
    assert ('x: 60 rows asked of storage (48 distinct rows read once '
            'each), 0.0 MiB read from disk (measured)') in lines
    busy = next(line for line in lines if line.startswith('loader stages'))
    assert 'throttled' not in busy
    assert lines[-1] == ('sampling paused, far enough ahead of the model '
                         '(the run-ahead scheduler; not a bottleneck): '
                         '0.5 s (25.0%)')
