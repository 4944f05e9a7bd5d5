r"""The planner: which rows each cache tier of a feature store holds, from a
hotness policy and the budgets of a :class:`~pyg_fastload.config.FeatureCache`.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Dict, List, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor

from ..config import (
    FeatureCache,
    SettingError,
    available_memory,
    budget_rows,
    format_bytes,
    parse_budget,
)
from ..graph.hetero_topology import HeteroTopology
from ..graph.kind import is_topology
from ..graph.topology import CSCTopology
from ..storage import (DeviceCache, HostBuffer, TieredFeatureStore,
                       WindowCache)
from .hotness import Scores, hot_order, loader_scores

__all__ = ['configure_caches', 'AutoDeviceBudget']

#: Bytes left free when ``device_budget='auto'`` sizes the device cache.
AUTO_RESERVE_BYTES = 2**30
#: On the CPU, where the "device" cache is a second copy in host memory,
#: ``'auto'`` takes at most this share of the free memory ...
CPU_AUTO_SHARE = 0.25
#: ... and at most this many bytes.
CPU_AUTO_MAX_BYTES = 4 * 2**30


def configure_caches(
    store: TieredFeatureStore,
    cache: FeatureCache,
    topology: Union[CSCTopology, HeteroTopology, None] = None,
    *,
    attrs: Optional[Sequence[str]] = None,
    scores: Optional[Scores] = None,
    train_nodes: Optional[Tensor] = None,
    seed: int = 0,
    reserve_bytes: int = AUTO_RESERVE_BYTES,
) -> None:
    r"""Fills the host buffer and the device cache of :obj:`store`.

    The hottest rows by :obj:`scores` go to the device cache, the next ones
    to the host buffer. With ``device_cache='window'`` the device cache
    starts empty and fills itself with GIDS's window buffering instead.
    With ``device_budget='auto'`` the device cache is sized after the first
    training step (PaGraph; with the scores computed now; until then only
    the host buffer serves): the free memory (CUDA: with the blocks the
    caching allocator holds unused, which include the step's, so the step
    is not counted twice) minus the step's transient
    memory (CUDA: its peak allocated beyond what stays allocated; CPU: the
    process's peak resident memory beyond its size after the step) minus
    :obj:`reserve_bytes`; on the CPU, where that cache is a second copy in host
    memory, at most a quarter of the free memory and at most 4 GiB
    (:data:`CPU_AUTO_SHARE`, :data:`CPU_AUTO_MAX_BYTES`). Caches that would not
    fit in the memory the machine has are refused unless
    ``cache.exceed_memory``.

    Args:
        store (TieredFeatureStore): the store whose caches to fill.
        cache (FeatureCache): budgets, policy and device-cache mode.
        topology (CSCTopology, optional): the graph the scores rank.
        attrs (List[str], optional): attributes to cache (default: every
            feature matrix).
        scores (Scores, optional): hotness per node, or the function
            computing ``cache.policy``'s
            (:func:`~pyg_fastload.caching.loader_scores`, the default,
            which needs :obj:`topology`).
        train_nodes (torch.Tensor, optional): what the batch-following
            policies sample from.
        seed (int): seed of the caches' own random choices.
        reserve_bytes (int, optional): memory left free when
            ``device_budget='auto'`` sizes the device cache.
            (default: :data:`AUTO_RESERVE_BYTES`)
    """
    if not isinstance(cache, FeatureCache):
        raise TypeError(f"'cache' must be a FeatureCache, got "
                        f"{type(cache).__name__}")
    auto = cache.device_budget == 'auto'
    device_budget = None if auto else cache.device_budget
    store.size_after_first_step(None)
    by_type = store.cacheable(attrs)
    if len(by_type) > 1 or is_topology(topology, hetero=True):
        _configure_types(store, cache, topology, by_type, attrs, scores,
                         train_nodes, seed, reserve_bytes)
        return
    keys, num_rows, row_bytes = next(iter(by_type.values()), ([], 0, 0))
    window_size = cache.window if cache.device_cache == 'window' else 0
    device_rows = budget_rows(device_budget, num_rows, row_bytes,
                              'device_budget')
    host_rows = budget_rows(cache.host_budget, num_rows, row_bytes,
                            'host_budget')
    if not cache.exceed_memory:
        _check_fits(store, store.host_buffer_bytes(keys, host_rows),
                    device_rows * row_bytes)
    static_device = cache.device_cache == 'static'
    needed = host_rows + (device_rows if static_device else 0)
    order = torch.empty(0, dtype=torch.long)
    if needed or auto:  # scored once, also for the 'auto' resize
        scores = _scores(scores, topology, cache, train_nodes, num_rows)
        order = hot_order(scores)
    if auto:
        store.size_after_first_step(AutoDeviceBudget(
            cache, None, attrs, scores, seed, reserve_bytes))
    store.fill_caches(keys, [
        HostBuffer(order[needed - host_rows:needed]),
        DeviceCache(order[:device_rows]) if static_device
        else WindowCache(device_rows, window_size, seed)])


class AutoDeviceBudget:
    r"""``device_budget='auto'``: the device cache sized after the first
    training step, when the model's own memory use is known (until then
    only the host buffer serves), from the scores computed now. The store
    calls :meth:`size_device_caches` once
    (:meth:`~pyg_fastload.storage.TieredFeatureStore.size_after_first_step`
    says when).

    Args:
        cache (FeatureCache): the settings (with ``device_budget='auto'``).
        topology (HeteroTopology, optional): the graph of a store over
            several node types.
        attrs (List[str], optional): the attributes cached.
        scores (torch.Tensor): hotness per row (per global node id over
            several types).
        seed (int): seed of the caches' own random choices.
        reserve_bytes (int): bytes left free.
    """
    def __init__(self, cache: FeatureCache,
                 topology: Optional[HeteroTopology],
                 attrs: Optional[Sequence[str]], scores: Tensor, seed: int,
                 reserve_bytes: int):
        self.cache, self.topology, self.attrs = cache, topology, attrs
        self.scores, self.seed = scores, seed
        self.reserve_bytes = reserve_bytes

    def budget(self, store: TieredFeatureStore, step_bytes: int) -> int:
        r"""Bytes for the device cache: what is free now, minus what the
        step needs again at its peak, minus the reserve; on the CPU at most
        :data:`CPU_AUTO_SHARE` of the free memory and
        :data:`CPU_AUTO_MAX_BYTES`."""
        free = store.free_device_bytes()
        budget = max(free - step_bytes - self.reserve_bytes, 0)
        if store.device.type != 'cuda':
            budget = min(budget, int(free * CPU_AUTO_SHARE),
                         CPU_AUTO_MAX_BYTES)
        return budget

    def size_device_caches(self, store: TieredFeatureStore,
                           step_bytes: int) -> None:
        r"""Fills :obj:`store`'s caches again with the device budget of
        :meth:`budget` (measured to fit: not held against the host's
        memory, as a GPU's cache may be larger)."""
        budget = self.budget(store, step_bytes)
        configure_caches(store, replace(self.cache, device_budget=budget,
                                        exceed_memory=True),
                         self.topology, attrs=self.attrs,
                         scores=self.scores, seed=self.seed)


def _check_fits(store: TieredFeatureStore, host_bytes: int,
                device_bytes: int) -> None:
    r"""Refuses caches larger than the memory the machine has: the host
    buffer (:obj:`host_bytes`, what it takes pinned:
    :meth:`~pyg_fastload.storage.TieredFeatureStore.host_buffer_bytes`;
    on the CPU with the device cache) against the available host memory, a
    CUDA device cache against the free device memory."""
    on_cuda = store.device.type == 'cuda'
    in_host = host_bytes + (0 if on_cuda else device_bytes)
    checks = [('host_budget' if host_bytes else 'device_budget', in_host,
               available_memory(), 'memory')]
    if on_cuda:
        checks.append(('device_budget', device_bytes,
                       store.free_device_bytes(), 'free device memory'))
    for key, needed, available, what in checks:
        if available and needed > available:
            raise SettingError(
                key, f"the caches need {format_bytes(needed)}, more than the "
                f"{format_bytes(available)} of {what} available; give a "
                f"smaller budget, or set exceed_memory=True to allow it")


def _scores(scores: Optional[Scores], topology: Optional[CSCTopology],
            cache: FeatureCache, train_nodes: Optional[Tensor],
            num_rows: int) -> Tensor:
    if scores is None:
        scores = loader_scores()
    if callable(scores):
        if topology is None:
            raise ValueError("'configure_caches' needs 'topology' (or "
                             "precomputed 'scores') to rank rows")
        scores = scores(cache.policy, topology, train_nodes)
    if not isinstance(scores, Tensor):
        raise TypeError(f"'scores' must be a tensor of per-row hotness or "
                        f"a function returning one (loader_scores(...)), "
                        f"got {type(scores).__name__}")
    if scores.numel() != num_rows:
        raise ValueError(f"'scores' has {scores.numel()} entries, the "
                         f"cached tensors have {num_rows} rows")
    return scores


Rows = Dict[Optional[str], Tuple[List[Tuple[Optional[str], str]], int, int]]


def _budget_bytes(budget: object, total: int, name: str) -> int:
    value = parse_budget(budget, name)
    if value is None:
        return 0
    if isinstance(value, float):
        return int(round(value * total))
    return min(int(value), total)


def _configure_types(store: TieredFeatureStore, cache: FeatureCache,
                     topology: Optional[HeteroTopology], by_type: Rows,
                     attrs: Optional[Sequence[str]],
                     scores: Optional[Scores], train_nodes: Optional[Tensor],
                     seed: int, reserve_bytes: int) -> None:
    r"""One byte budget over the feature rows of several node types: every
    row of every type ranked by :obj:`scores` (per global node id of
    :obj:`topology`), the hottest rows, whatever their type, fill the
    device cache, the next ones the host buffer. With window buffering the
    hottest rows fill the host buffer, and each type's window holds as many
    rows as the ranking would give its type in a static device cache."""
    if not by_type:
        return
    types = ', '.join(map(str, by_type))
    window = cache.device_cache == 'window'
    if not is_topology(topology, hetero=True):
        raise ValueError(f"caches over several node types ({types}) rank "
                         f"the rows of every type together: pass the graph's "
                         f"HeteroTopology as 'topology'")
    ids, row_bytes, spans = [], [], {}
    for group, (_, rows, nbytes) in by_type.items():
        if group not in topology.node_types or \
                rows != topology.num_nodes_of(group):
            raise ValueError(f"the feature store's node type {group!r} "
                             f"({rows} rows) is not a node type of the "
                             f"topology with that many nodes")
        first = int(topology.node_offset[topology.node_types.index(group)])
        spans[group] = (sum(map(len, ids)), first)
        ids.append(torch.arange(first, first + rows))
        row_bytes.append(torch.full((rows, ), nbytes, dtype=torch.long))
    ids, row_bytes = torch.cat(ids), torch.cat(row_bytes)
    total = int(row_bytes.sum())
    auto = cache.device_budget == 'auto'
    device = 0 if auto else _budget_bytes(cache.device_budget, total,
                                          'device_budget')
    host = _budget_bytes(cache.host_budget, total, 'host_budget')
    device_pos = host_pos = torch.empty(0, dtype=torch.long)
    if host or device or auto:
        scores = _scores(scores, topology, cache, train_nodes,
                         topology.num_nodes)
        order = hot_order(scores[ids])
        used = torch.cumsum(row_bytes[order], 0)
        num_device = int(torch.searchsorted(used, device, right=True))
        spent = int(used[num_device - 1]) if num_device else 0
        num_cached = int(torch.searchsorted(used, spent + host, right=True))
        device_pos = order[:num_device]
        host_pos = order[num_device:num_cached]
        if window:  # the window fills itself: the host takes the hottest
            host_pos = order[:int(torch.searchsorted(used, host,
                                                     right=True))]
    held = {}  # per type: the rows of its host buffer and device cache
    for group, (keys, rows, _) in by_type.items():
        start, first = spans[group]
        held[group] = [ids[pos[(pos >= start) & (pos < start + rows)]] - first
                       for pos in (host_pos, device_pos)]
    if not cache.exceed_memory:  # a host buffer per type and attribute
        _check_fits(store, sum(
            store.host_buffer_bytes(by_type[group][0], host_ids.numel())
            for group, (host_ids, _) in held.items()), device)
    if auto:
        store.size_after_first_step(AutoDeviceBudget(
            cache, topology, attrs, scores, seed, reserve_bytes))
    for group, (host_ids, device_ids) in held.items():
        keys = by_type[group][0]
        store.fill_caches(keys, [
            HostBuffer(host_ids),
            WindowCache(device_ids.numel(), cache.window, seed) if window
            else DeviceCache(device_ids)])
