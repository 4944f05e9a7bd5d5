r"""What :class:`~pyg_fastload.lightning.LoaderMonitor` computes from its
per-epoch records: the counters' arithmetic, the totals of a run
(:func:`summarize`) and the records of all ranks as one
(:func:`combine_ranks`)."""
from __future__ import annotations

from typing import Any, Dict, List, Optional

__all__ = ['CACHE_TIERS', 'COUNTERS', 'Stats', 'add_counters',
           'combine_ranks', 'counter_delta', 'merge_places', 'rate',
           'served_rows', 'summarize', 'with_hit_ratios']

#: Cumulative per-tier counters of ``TieredFeatureStore.stats()`` that are
#: turned into per-epoch deltas.
COUNTERS = ('requests', 'hits', 'bytes', 'pages', 'disk_bytes')

#: The tiers that hold some rows and miss the others: a hit ratio is
#: theirs. Storage and other ranks serve every row asked of them.
CACHE_TIERS = ('device', 'host')

Stats = Dict[str, Dict[str, Dict[str, float]]]
Places = Dict[str, Dict[str, str]]
Record = Dict[str, Any]


def served_rows(tier: str, counters: Dict[str, float]) -> float:
    r"""Rows :obj:`tier` served: a cache's hits; every row asked of any
    other tier (storage counts as hits the distinct rows it read, once
    each)."""
    return counters['hits'] if tier in CACHE_TIERS else counters['requests']


def merge_places(records: List[Record]) -> Places:
    r"""Where each tier of the :obj:`records` lives (their ``places``;
    a tier that some records lack, e.g. one rank's, is taken from the
    others)."""
    out: Places = {}
    for record in records:
        for attr, tiers in record.get('places', {}).items():
            out.setdefault(attr, {}).update(tiers)
    return out


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
    r"""Adds ``hit_ratio`` to every tier: hits over requests of a cache
    (:data:`CACHE_TIERS`), :obj:`None` without requests and for the tiers
    that serve every row asked of them."""
    return {attr: {tier: {**c, 'hit_ratio': (
        c['hits'] / c['requests']
        if c['requests'] and tier in CACHE_TIERS else None)}
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
        # the last epoch stopped early (Ctrl-C): its steps so far
        'interrupted': bool(records and records[-1].get('partial')),
        'mean_epoch_time_s': (total_time / len(records)
                              if records else 0.0),
        'seeds_per_s': rate(sum(seeds), total_time) if seeds else None,
        'batches_per_s': rate(sum(r['batches'] for r in records),
                              total_time),
        'hit_ratio': {attr: {tier: c['hit_ratio']
                             for tier, c in tiers.items()
                             if tier in CACHE_TIERS}
                      for attr, tiers in with_hit_ratios(cache).items()},
        'rows_by_tier': {attr: {tier: {'rows': served_rows(tier, c),
                                       'bytes': c['bytes']}
                                for tier, c in tiers.items()
                                if tier != 'served'}
                         for attr, tiers in cache.items()},
        'places': merge_places(records),
        'peak_anon_bytes': max((r.get('peak_anon_bytes', 0)
                                for r in records), default=0),
        'storage_read': {attr: {'rows': tiers['storage']['requests'],
                                'distinct_rows': tiers['storage']['hits'],
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
    r"""One epoch of every rank as one record: batches, seeds, sampled
    nodes and edges and the tiers' counters summed; the training time of
    the slowest rank (the epoch lasts that long), so the rates are of all
    ranks together; the loader's timings averaged over the ranks; the
    largest peak memory."""
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
        'sampler': parts[0].get('sampler'),
        'sampled_nodes': sum(p.get('sampled_nodes', 0) for p in parts),
        'sampled_edges': sum(p.get('sampled_edges', 0) for p in parts),
        'time': {k: _mean([p['time'].get(k, 0.0) for p in parts])
                 for k in keys},
        'loader_counts': {
            k: (sum if k == 'batches' else _mean)(
                [p['loader_counts'].get(k, 0) for p in parts])
            for k in counts},
        'peak_anon_bytes': max(p.get('peak_anon_bytes', 0) for p in parts),
        'cache': with_hit_ratios(cache),
        'places': merge_places(parts),
    }


def combine_ranks(per_rank: List[List[Record]]) -> List[Record]:
    r"""The per-epoch records of every rank (``per_rank[r]``: rank
    :obj:`r`'s) as one list of records, epoch by epoch (see
    :func:`_combine_epoch`); epochs that not every rank recorded are left
    out."""
    epochs = min(len(records) for records in per_rank)
    return [_combine_epoch([records[i] for records in per_rank])
            for i in range(epochs)]
