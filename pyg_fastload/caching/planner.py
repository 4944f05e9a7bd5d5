r"""The planner: which rows each cache tier of a feature store holds, from a
hotness policy and the budgets of a :class:`~pyg_fastload.config.FeatureCache`.
"""
from __future__ import annotations

from dataclasses import replace
from typing import List, Optional, Sequence

import torch
from torch import Tensor

from ..config import FeatureCache, budget_rows
from ..graph.topology import CSCTopology
from ..storage import TieredFeatureStore
from .hotness import hot_order, hotness_scores

__all__ = ['configure_caches']

#: Bytes left free when ``device_budget='auto'`` sizes the device cache.
AUTO_RESERVE_BYTES = 2**30


def configure_caches(
    store: TieredFeatureStore,
    cache: FeatureCache,
    topology: Optional[CSCTopology] = None,
    *,
    attrs: Optional[Sequence[str]] = None,
    scores: Optional[Tensor] = None,
    train_nodes: Optional[Tensor] = None,
    num_neighbors: Optional[List[int]] = None,
    batch_size: int = 1024,
    seed: int = 0,
    progress: bool = True,
    reserve_bytes: int = AUTO_RESERVE_BYTES,
) -> None:
    r"""Fills the host buffer and the device cache of :obj:`store`.

    The hottest rows (by :obj:`scores`, or by ``cache.policy`` on
    :obj:`topology`) go to the device cache, the next ones to the host
    buffer. With ``device_cache='window'`` the device cache starts empty
    and fills itself with GIDS's window buffering instead. With
    ``device_budget='auto'`` the device cache is sized after the first
    gathered batch: the free device memory (host memory on CPU) minus
    :obj:`reserve_bytes` (PaGraph).

    Args:
        store (TieredFeatureStore): the store whose caches to fill.
        cache (FeatureCache): budgets, policy and device-cache mode.
        topology (CSCTopology, optional): the graph, for the policy.
        attrs (List[str], optional): attributes to cache (default: every
            feature matrix).
        scores (torch.Tensor, optional): hotness per node (skips the policy).
        train_nodes, num_neighbors, batch_size: what ``'presample'`` samples
            from: the training seeds, fan-outs and batch size of the loader.
        seed (int): seed of the ``'presample'`` and ``'random'`` policies.
        progress (bool): show progress bars.
    """
    if not isinstance(cache, FeatureCache):
        raise TypeError(f"'cache' must be a FeatureCache, got "
                        f"{type(cache).__name__}")
    device_budget = cache.device_budget
    store.when_first_gathered(None)
    if device_budget == 'auto':
        # Decided after the first batch, when the model's own memory use is
        # known; until then only the host buffer serves.
        def resolve() -> None:
            budget = max(store.free_device_bytes() - reserve_bytes, 0)
            configure_caches(
                store, replace(cache, device_budget=budget), topology,
                attrs=attrs, scores=scores, train_nodes=train_nodes,
                num_neighbors=num_neighbors, batch_size=batch_size,
                seed=seed, progress=progress)

        store.when_first_gathered(resolve)
        device_budget = None
    keys, num_rows, row_bytes = store.cacheable(attrs)
    window_size = cache.window if cache.device_cache == 'window' else 0
    device_rows = budget_rows(device_budget, num_rows, row_bytes,
                              'device_budget')
    host_rows = budget_rows(cache.host_budget, num_rows, row_bytes,
                            'host_budget')
    static_device = cache.device_cache == 'static'
    needed = host_rows + (device_rows if static_device else 0)
    order = torch.empty(0, dtype=torch.long)
    if needed:
        order = _hot_order(scores, topology, cache.policy, num_rows,
                           train_nodes, num_neighbors, batch_size, seed,
                           progress)
    store.fill_caches(
        keys, host_ids=order[needed - host_rows:needed],
        device_ids=order[:device_rows] if static_device else None,
        window_rows=0 if static_device else device_rows,
        window_size=window_size, seed=seed)


def _hot_order(scores: Optional[Tensor], topology: Optional[CSCTopology],
               policy: str, num_rows: int, train_nodes: Optional[Tensor],
               num_neighbors: Optional[List[int]], batch_size: int,
               seed: int, progress: bool) -> Tensor:
    if scores is None:
        if topology is None:
            raise ValueError("'configure_caches' needs 'topology' (or "
                             "precomputed 'scores') to rank rows")
        scores = hotness_scores(policy, topology, train_nodes=train_nodes,
                                num_neighbors=num_neighbors,
                                batch_size=batch_size, seed=seed,
                                progress=progress)
    if scores.numel() != num_rows:
        raise ValueError(f"'scores' has {scores.numel()} entries, the "
                         f"cached tensors have {num_rows} rows")
    return hot_order(scores)
