r"""What :class:`~pyg_fastload.lightning.LoaderMonitor` computes from its
per-epoch records: the counters' arithmetic, the totals of a run
(:func:`summarize`) and the records of all ranks as one
(:func:`combine_ranks`)."""
from __future__ import annotations

from typing import Any, Dict, List, Optional

__all__ = ['COUNTERS', 'Stats', 'add_counters', 'combine_ranks',
           'counter_delta', 'rate', 'summarize', 'with_hit_ratios']

#: Cumulative per-tier counters of ``TieredFeatureStore.stats()`` that are
#: turned into per-epoch deltas.
COUNTERS = ('requests', 'hits', 'bytes', 'pages', 'disk_bytes')

Stats = Dict[str, Dict[str, Dict[str, float]]]
Record = Dict[str, Any]


def counter_delta(after: Stats, before: Stats) -> Stats:
    r"""``after - before`` of the cumulative counters, per attribute and
    tier."""
    out: Stats = {}
    for attr, tiers in after.items():
        out[attr] = {}
        for tier, counters in tiers.items():
            base = before.get(attr, {}).get(tier, {})
            out[attr][tier] = {key: counters.get(key, 0) - base.get(key, 0)
                               for key in COUNTERS}
    return out


def add_counters(total: Stats, delta: Stats) -> None:
    r"""Adds :obj:`delta`'s counters into :obj:`total`, in place."""
    for attr, tiers in delta.items():
        for tier, counters in tiers.items():
            into = total.setdefault(attr, {}).setdefault(
                tier, dict.fromkeys(COUNTERS, 0))
            for key in COUNTERS:
                into[key] += counters.get(key, 0)


def with_hit_ratios(counters: Stats) -> Stats:
    r"""Adds ``hit_ratio`` (:obj:`None` without requests) to every tier."""
    return {attr: {tier: {**c, 'hit_ratio': (c['hits'] / c['requests']
                                             if c['requests'] else None)}
                   for tier, c in tiers.items()}
            for attr, tiers in counters.items()}


def rate(count: float, seconds: float) -> float:
    r"""``count / seconds``; 0 without time."""
    return count / seconds if seconds > 0 else 0.0


def summarize(records: List[Record], ranks: int = 1) -> Dict[str, Any]:
    r"""Totals over per-epoch :obj:`records` (see
    :meth:`LoaderMonitor.summary`); :obj:`ranks` is how many ranks the
    records stand for (:func:`combine_ranks`)."""
    total_time = sum(r['train_time_s'] for r in records)
    seeds = [r['seeds'] for r in records if r['seeds'] is not None]
    cache: Stats = {}
    for record in records:
        add_counters(cache, record['cache'])
    times: Dict[str, float] = {}
    for record in records:
        for key, seconds in record['time'].items():
            times[key] = times.get(key, 0.0) + seconds
    epoch_time = times.pop('epoch', 0.0)
    return {
        'ranks': ranks,
        'epochs': len(records),
        'mean_epoch_time_s': (total_time / len(records)
                              if records else 0.0),
        'seeds_per_s': rate(sum(seeds), total_time) if seeds else None,
        'batches_per_s': rate(sum(r['batches'] for r in records),
                              total_time),
        'hit_ratio': {attr: {tier: c['hit_ratio']
                             for tier, c in tiers.items()
                             if tier != 'served'}
                      for attr, tiers in with_hit_ratios(cache).items()},
        'rows_by_tier': {attr: {tier: {'rows': c['hits'],
                                       'bytes': c['bytes']}
                                for tier, c in tiers.items()
                                if tier != 'served'}
                         for attr, tiers in cache.items()},
        'peak_anon_bytes': max((r.get('peak_anon_bytes', 0)
                                for r in records), default=0),
        'storage_read': {attr: {'rows': tiers['storage']['requests'],
                                'disk_bytes': tiers['storage'][
                                    'disk_bytes']}
                         for attr, tiers in cache.items()
                         if 'storage' in tiers},
        'time_share_pct': ({key: 100 * seconds / epoch_time
                            for key, seconds in times.items()}
                           if epoch_time > 0 else {}),
        'time_s': times,
    }


def _mean(values: List[float]) -> float:
    return sum(values) / len(values)


def _combine_epoch(parts: List[Record]) -> Record:
    r"""One epoch of every rank as one record: batches, seeds and the
    tiers' counters summed; the training time of the slowest rank (the
    epoch lasts that long), so the rates are of all ranks together; the
    loader's timings averaged over the ranks; the largest peak memory."""
    train_time = max(p['train_time_s'] for p in parts)
    seeds: Optional[int] = None
    if any(p['seeds'] is not None for p in parts):
        seeds = sum(p['seeds'] or 0 for p in parts)
    batches = sum(p['batches'] for p in parts)
    cache: Stats = {}
    for part in parts:
        add_counters(cache, part['cache'])
    keys = dict.fromkeys(k for p in parts for k in p['time'])
    counts = dict.fromkeys(k for p in parts for k in p['loader_counts'])
    return {
        'epoch': parts[0]['epoch'],
        'global_step': parts[0]['global_step'],
        'batches': batches,
        'seeds': seeds,
        'train_time_s': train_time,
        'seeds_per_s': None if seeds is None else rate(seeds, train_time),
        'batches_per_s': rate(batches, train_time),
        'loader': parts[0]['loader'],
        'time': {k: _mean([p['time'].get(k, 0.0) for p in parts])
                 for k in keys},
        'loader_counts': {
            k: (sum if k == 'batches' else _mean)(
                [p['loader_counts'].get(k, 0) for p in parts])
            for k in counts},
        'peak_anon_bytes': max(p.get('peak_anon_bytes', 0) for p in parts),
        'cache': with_hit_ratios(cache),
    }


def combine_ranks(per_rank: List[List[Record]]) -> List[Record]:
    r"""The per-epoch records of every rank (``per_rank[r]``: rank
    :obj:`r`'s) as one list of records, epoch by epoch (see
    :func:`_combine_epoch`); epochs that not every rank recorded are left
    out."""
    epochs = min(len(records) for records in per_rank)
    return [_combine_epoch([records[i] for records in per_rank])
            for i in range(epochs)]
