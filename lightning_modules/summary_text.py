r"""The end-of-fit text of :class:`~pyg_fastload.lightning.LoaderMonitor`:
throughput, every tier's hit ratio and the rows and bytes it served (other
ranks' rows under ``remote``), memory, storage reads and where the time
went, each number named with what it is a share of."""
from __future__ import annotations

from typing import Any, Dict, List

__all__ = ['format_summary']


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


def format_summary(summary: Dict[str, Any]) -> str:
    r"""The summary of :meth:`LoaderMonitor.summary` as short text."""
    seeds = summary['seeds_per_s']
    lines = [
        f"LoaderMonitor: {summary['epochs']} epoch(s), mean epoch "
        f"{summary['mean_epoch_time_s']:.3g} s, "
        + (f'{seeds:,.0f} seeds/s, ' if seeds is not None else '')
        + f"{summary['batches_per_s']:.3g} batches/s"
    ]
    # Attributes with a cache tier or remote rows; the rest come from
    # storage alone.
    hit_ratio = {attr: ratios for attr, ratios in summary['hit_ratio'].items()
                 if len(ratios) > 1}
    if hit_ratio:
        lines += _table('hit ratio', {
            attr: {tier: '-' if r is None else f'{r:.3f}'
                   for tier, r in ratios.items()}
            for attr, ratios in hit_ratio.items()})
        served = summary.get('rows_by_tier', {})
        lines += _table('rows served (bytes)', {
            attr: {tier: f"{int(c['rows']):,} ({_size(c['bytes'])})"
                   for tier, c in served.get(attr, {}).items()}
            for attr in hit_ratio})
    if summary.get('peak_anon_bytes'):
        lines.append(f"memory: peak {summary['peak_anon_bytes'] / 2**30:.2f} "
                     f"GiB allocated by the process (sampled after each "
                     f"training batch; mapped files and page cache apart)")
    for attr, read in summary.get('storage_read', {}).items():
        if read['rows'] and (read['device_bytes'] or attr in hit_ratio):
            lines.append(f"{attr}: {read['rows']:,} rows asked of storage, "
                         f"{read['device_bytes'] / 2**20:,.1f} MiB read "
                         f"from the device (measured)")
    shares = summary['time_share_pct']
    seconds = summary.get('time_s', {})

    def timed(key: str) -> str:
        if key not in seconds:
            return f'{key} {shares[key]:.1f}%'
        return f'{key} {seconds[key]:.3g} s ({shares[key]:.1f}%)'
    trainer = [k for k in shares if k in ('model', 'waiting')]
    # stages that never ran (no cache tier, no remote rows) left out
    stages = [k for k in shares if k not in trainer and shares[k] > 0]
    if trainer:
        lines.append('training loop (adds up to the epoch): ' + ', '.join(
            map(timed, trainer)))
    if stages:
        lines.append('loader stages busy (concurrent, each a share of the '
                     'epoch): ' + ', '.join(map(timed, stages)))
    return '\n'.join(lines)
