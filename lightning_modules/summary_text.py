r"""The end-of-fit text of :class:`~pyg_fastload.lightning.LoaderMonitor`:
throughput, every tier's hit ratio and the rows and bytes it served (other
ranks' rows under ``remote``), memory, storage reads and where the time
went, each number named with what it is a share of."""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence

__all__ = ['TIER_LABEL', 'format_summary', 'tier_label']


def _table(title: str, rows: Dict[str, Dict[str, str]]) -> List[str]:
    r"""A small text table: one line per attribute, one column per tier."""
    tiers = list(dict.fromkeys(t for cells in rows.values() for t in cells))
    cells = {attr: [values.get(t, '-') for t in tiers]
             for attr, values in rows.items()}
    widths = [max(len(t), *(len(c[i]) for c in cells.values())) + 2
              for i, t in enumerate(tiers)]
    first = max(len(title), *map(len, rows))
    lines = [title.ljust(first) + ''.join(
        t.rjust(w) for t, w in zip(tiers, widths))]
    for attr, values in cells.items():
        lines.append(attr.ljust(first) + ''.join(
            v.rjust(w) for v, w in zip(values, widths)))
    return lines


def _size(count: float) -> str:
    return f'{count / 2**20:,.1f} MiB'


#: What each tier is, in the tables' headers (the keys of the JSON).
TIER_LABEL = {'device': 'device cache', 'host': 'host buffer',
              'storage': 'storage', 'remote': 'other ranks',
              'remote_disk': "owners' part files"}


#: The device cache of a run on the CPU, named for what it is there: a
#: cache in memory beside the host buffer, sized by ``device_budget``.
CPU_DEVICE_CACHE = 'in-memory cache (device_budget)'


def tier_label(tier: str, place: Optional[str] = None) -> str:
    r"""A tier in words, with where its rows live if known: ``'device
    cache (GPU memory, cuda:0)'``, ``'storage (file, memory-mapped)'``; a
    device cache in CPU memory (a run on the CPU) is
    :data:`CPU_DEVICE_CACHE`."""
    if tier == 'device' and place == 'CPU memory':
        return CPU_DEVICE_CACHE
    label = TIER_LABEL.get(tier, tier)
    return f'{label} ({place})' if place else label


def _per_attr(summaries: List[Dict[str, Any]], attrs: List[str], key: str,
              cell: Callable[[Any], str]) -> Dict[str, Dict[str, str]]:
    r"""Table rows: per attribute, the summary's :obj:`key` entry of every
    tier, formatted by :obj:`cell`; with several summaries (all ranks,
    then each rank) one row per summary, named after it."""
    rows: Dict[str, Dict[str, str]] = {}
    for attr in attrs:
        for index, summary in enumerate(summaries):
            name = attr if len(summaries) == 1 else (
                f'{attr} (all ranks)' if index == 0 else
                f'{attr} (rank {index - 1})')
            places = summaries[0].get('places', {}).get(attr, {})
            rows[name] = {tier_label(tier, places.get(tier)): cell(value)
                          for tier, value in summary[key].get(
                              attr, {}).items()}
    return rows


def format_summary(summary: Dict[str, Any],
                   ranks: Sequence[Dict[str, Any]] = ()) -> str:
    r"""The summary of :meth:`LoaderMonitor.summary` as short text;
    :obj:`ranks` are the per-rank summaries of a distributed run, whose
    rows follow the all-ranks ones."""
    seeds = summary['seeds_per_s']
    many = len(ranks) > 1
    lines = [
        "LoaderMonitor: "
        + (f'{len(ranks)} ranks together (epoch time of the slowest, '
           f'rows and seeds summed), ' if many else '')
        + f"{summary['epochs']} epoch(s)"
        + (' (the last one interrupted)' if summary.get('interrupted')
           else '')
        + ", mean epoch "
        f"{summary['mean_epoch_time_s']:.3g} s, "
        + (f'{seeds:,.0f} seeds/s, ' if seeds is not None else '')
        + f"{summary['batches_per_s']:.3g} batches/s"
    ]
    summaries = [summary, *ranks] if many else [summary]
    # Attributes served by more than one tier (a cache, other ranks; the
    # rest come from storage alone) carrying at least 5% of the bytes (the
    # features, not the labels and masks).
    served = summary.get('rows_by_tier', {})
    size = {attr: sum(c['bytes'] for c in tiers.values())
            for attr, tiers in served.items()}
    small = [attr for attr in size
             if size[attr] < 0.05 * sum(size.values())]
    attrs = [attr for attr in served if attr not in small
             and any(len(s['rows_by_tier'].get(attr, {})) > 1
                     for s in summaries)]
    cached = [attr for attr in attrs if summary['hit_ratio'].get(attr)]
    if cached:  # of the rows asked of each cache (the faster ones' misses)
        lines += _table('cache hit ratio', _per_attr(
            summaries, cached, 'hit_ratio',
            lambda r: '-' if r is None else f'{r:.3f}'))
    if attrs:  # storage and other ranks serve every row asked of them
        lines += _table('rows served (bytes)', _per_attr(
            summaries, attrs, 'rows_by_tier',
            lambda c: f"{int(c['rows']):,} ({_size(c['bytes'])})"))
    if any('remote_disk' in served.get(attr, {}) for attr in attrs):
        lines.append("(rows in no rank's cache are read here from their "
                     "owners' part files, on this machine, beside the "
                     "exchange with the owners: data.mode_options."
                     "cold_rows 'auto'; 'owner' has the owners send them)")
    if small:
        lines.append(f"(under 5% of the bytes, not shown: "
                     f"{', '.join(small)})")
    if summary.get('peak_anon_bytes'):
        lines.append(f"memory: peak {summary['peak_anon_bytes'] / 2**30:.2f} "
                     "GiB allocated by the process"
                     + (' (the largest rank)' if many else '')
                     + " (sampled after each training batch; mapped "
                     "files and page cache apart)")
    for attr, read in summary.get('storage_read', {}).items():
        if read['rows'] and attr not in small and (
                read['disk_bytes'] or attr in attrs):
            distinct = read.get('distinct_rows', read['rows'])
            once = ('' if distinct == read['rows'] else
                    f' ({distinct:,} distinct rows read once each)')
            place = summary.get('places', {}).get(attr, {}).get('storage')
            disk = (' (in memory: no disk)' if place == 'in memory' else
                    f", {read['disk_bytes'] / 2**20:,.1f} MiB read from disk "
                    f"(measured)")
            lines.append(f"{attr}: {read['rows']:,} rows asked of storage"
                         f"{once}{disk}")
    shares = summary['time_share_pct']
    seconds = summary.get('time_s', {})

    def timed(key: str) -> str:
        if key not in seconds:
            return f'{key} {shares[key]:.1f}%'
        return f'{key} {seconds[key]:.3g} s ({shares[key]:.1f}%)'
    trainer = [k for k in shares if k in ('model', 'waiting')]
    # stages that never ran (no cache tier, no remote rows) or were busy
    # under 0.5% of the epoch left out; 'throttled' is idle time
    stages = [k for k in shares if k not in trainer
              and k != 'throttled' and shares[k] >= 0.5]
    if trainer:
        mean = f', mean of {len(ranks)} ranks' if many else ''
        lines.append(f'training loop (adds up to the epoch{mean}): '
                     + ', '.join(map(timed, trainer)))
    if stages:
        lines.append('loader stages busy (concurrent, each a share of the '
                     'epoch): ' + ', '.join(map(timed, stages)))
    if shares.get('throttled', 0.0) >= 0.5:
        lines.append('sampling paused, far enough ahead of the model '
                     '(the run-ahead scheduler; not a bottleneck): '
                     + timed('throttled').partition(' ')[2])
    return '\n'.join(lines)
