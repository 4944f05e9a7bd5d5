r"""Seeded generator of realistic node-classification graphs.

The graphs come from a degree-corrected stochastic block model (a Chung-Lu
model with communities): every node gets a community and an expected-degree
weight drawn from a truncated power law; every undirected edge picks its first
endpoint proportionally to weight and its second endpoint proportionally to
weight either inside the first endpoint's community (with probability
:obj:`homophily`) or among all nodes.  Labels are the class of a node's
community and features are a noisy class centroid, so a model that averages
over neighbours classifies clearly better than one that only sees :obj:`x`.

The presets ``'arxiv-like'`` and ``'products-like'`` have the size, feature
width, class count, split and degree distribution of ``ogbn-arxiv`` and
``ogbn-products``, so loaders can be benchmarked without downloading them.
:func:`load_synthetic` caches a generated graph on disk and memory-maps it
back on the next call.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import tempfile
import warnings
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Dict, Optional, Union

import numpy as np
import torch
from torch import Tensor
from tqdm.auto import tqdm

from ..graph.topology import CSCTopology, index_dtype_for

__all__ = [
    'SyntheticGraphConfig',
    'SyntheticGraph',
    'PRESETS',
    'generate',
    'load_synthetic',
    'degree_stats',
    'default_cache_root',
]

#: Bumped whenever the generator or the cache layout changes, so stale cache
#: directories are never reused (the version is part of the directory hash).
FORMAT_VERSION = 1

#: Edges drawn per vectorised chunk (bounds the temporary memory).
_CHUNK = 1 << 22
#: Rows of ``x`` filled per chunk.
_FEATURE_CHUNK = 1 << 18
#: Give up when this many rounds of extra draws do not reach ``num_edges``.
_MAX_ROUNDS = 64

_ARRAYS = ('indptr', 'indices', 'x', 'y', 'train_mask', 'val_mask',
           'test_mask')


@dataclass(frozen=True)
class SyntheticGraphConfig:
    r"""Parameters of a synthetic node-classification graph.

    Args:
        num_nodes (int): number of nodes :math:`N`.
        num_edges (int): number of unique undirected edges; the stored graph
            holds both directions, :obj:`2 * num_edges` directed edges.
        num_features (int): width of the node features :obj:`x`.
        num_classes (int): number of labels.
        num_communities (int): number of communities (at least
            :obj:`num_classes`); community :obj:`c` has class
            :obj:`c % num_classes`.
        degree_exponent (float, optional): exponent :math:`\gamma > 1` of the
            power law :math:`p(w) \propto w^{-\gamma}` of the expected
            degrees. (default: :obj:`2.1`)
        max_degree_fraction (float, optional): the power law is truncated so
            that no node's expected degree exceeds this fraction of
            :obj:`num_nodes`. (default: :obj:`0.05`)
        homophily (float, optional): probability that an edge stays inside
            the community of its first endpoint. (default: :obj:`0.8`)
        feature_signal (float, optional): length of the class centroid added
            to the unit Gaussian noise of :obj:`x`. (default: :obj:`1.0`)
        community_size_spread (float, optional): standard deviation of the
            log of the community sizes (:obj:`0` gives equal sizes).
            (default: :obj:`0.5`)
        train_fraction (float, optional): share of nodes in the training
            mask. (default: :obj:`0.5`)
        val_fraction (float, optional): share of nodes in the validation
            mask. (default: :obj:`0.2`)
        test_fraction (float, optional): share of nodes in the test mask;
            the three masks are disjoint and the remaining nodes are
            unlabelled. (default: :obj:`0.3`)
    """
    num_nodes: int
    num_edges: int
    num_features: int
    num_classes: int
    num_communities: int
    degree_exponent: float = 2.1
    max_degree_fraction: float = 0.05
    homophily: float = 0.8
    feature_signal: float = 1.0
    community_size_spread: float = 0.5
    train_fraction: float = 0.5
    val_fraction: float = 0.2
    test_fraction: float = 0.3

    def __post_init__(self) -> None:
        _validate_config(self)

    @property
    def max_edges(self) -> int:
        r"""The number of distinct undirected node pairs."""
        return self.num_nodes * (self.num_nodes - 1) // 2


def _fail(name: str, value: Any, fix: str) -> None:
    raise ValueError(f"invalid '{name}' = {value!r}: {fix}")


def _validate_config(cfg: SyntheticGraphConfig) -> None:
    for name in ('num_nodes', 'num_edges', 'num_features', 'num_classes',
                 'num_communities'):
        value = getattr(cfg, name)
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            _fail(name, value, 'pass an int')
    for f in fields(cfg):
        if f.type in ('float', float):
            value = getattr(cfg, f.name)
            if isinstance(value, bool) or not isinstance(
                    value, (int, float, np.integer, np.floating)):
                _fail(f.name, value, 'pass a float')
            if not math.isfinite(float(value)):
                _fail(f.name, value, 'pass a finite float')
    if cfg.num_nodes < 2:
        _fail('num_nodes', cfg.num_nodes, 'a graph needs at least 2 nodes')
    if cfg.num_nodes > 2**31 - 1:
        _fail('num_nodes', cfg.num_nodes,
              'at most 2**31 - 1 nodes are supported')
    if cfg.num_edges < 0:
        _fail('num_edges', cfg.num_edges, 'pass a count >= 0')
    if cfg.num_edges > cfg.max_edges:
        _fail('num_edges', cfg.num_edges,
              f'{cfg.num_nodes} nodes have at most num_nodes * (num_nodes - '
              f'1) / 2 = {cfg.max_edges} undirected edges without self '
              f'loops; lower num_edges or raise num_nodes')
    if cfg.num_features < 1:
        _fail('num_features', cfg.num_features, 'pass a width >= 1')
    if cfg.num_classes < 1:
        _fail('num_classes', cfg.num_classes, 'pass a count >= 1')
    if cfg.num_communities < cfg.num_classes:
        _fail('num_communities', cfg.num_communities,
              f'every class needs a community: pass num_communities >= '
              f'num_classes = {cfg.num_classes}')
    if cfg.num_communities > cfg.num_nodes:
        _fail('num_communities', cfg.num_communities,
              f'every community needs a node: pass num_communities <= '
              f'num_nodes = {cfg.num_nodes}')
    if not cfg.degree_exponent > 1.0:
        _fail('degree_exponent', cfg.degree_exponent,
              'the power-law exponent must be > 1 (real graphs: 2 to 3)')
    if not 0.0 < cfg.max_degree_fraction <= 1.0:
        _fail('max_degree_fraction', cfg.max_degree_fraction,
              'pass a fraction of num_nodes in (0, 1]')
    mean_degree = 2.0 * cfg.num_edges / cfg.num_nodes
    if cfg.max_degree_fraction * cfg.num_nodes < mean_degree:
        _fail('max_degree_fraction', cfg.max_degree_fraction,
              f'the degree cap max_degree_fraction * num_nodes = '
              f'{cfg.max_degree_fraction * cfg.num_nodes:g} is below the '
              f'mean degree 2 * num_edges / num_nodes = {mean_degree:g}; '
              f'raise max_degree_fraction')
    if not 0.0 <= cfg.homophily <= 1.0:
        _fail('homophily', cfg.homophily, 'pass a probability in [0, 1]')
    if cfg.feature_signal < 0.0:
        _fail('feature_signal', cfg.feature_signal, 'pass a value >= 0')
    if cfg.community_size_spread < 0.0:
        _fail('community_size_spread', cfg.community_size_spread,
              'pass a value >= 0 (0 gives equal community sizes)')
    for name in ('train_fraction', 'val_fraction', 'test_fraction'):
        value = getattr(cfg, name)
        if not 0.0 <= value <= 1.0:
            _fail(name, value, 'pass a fraction in [0, 1]')
    total = cfg.train_fraction + cfg.val_fraction + cfg.test_fraction
    if total > 1.0 + 1e-9:
        _fail('train_fraction + val_fraction + test_fraction', total,
              'the masks are disjoint, so the fractions must sum to at most '
              '1; lower one of them')


#: Ready-made configurations.  ``'arxiv-like'`` and ``'products-like'`` copy
#: the node/edge counts, feature width, class count and split sizes of
#: ``ogbn-arxiv`` (symmetrised) and ``ogbn-products``; the degree exponent and
#: cap are tuned so that the maximum degree and the edge share of the
#: highest-degree nodes are close to the real graphs.  With seed 0,
#: :func:`degree_stats` gives (mean / median / max degree, edge share of the
#: top 20% nodes): ``'arxiv-like'`` 13.8 / 7 / 13,765 / 0.64 (ogbn-arxiv
#: symmetrised: mean 13.7, max 13,161) and ``'products-like'``
#: 50.5 / 24 / 17,387 / 0.63 (ogbn-products: mean 50.5, max 17,481).
#: ``feature_signal`` is set so that an MLP on ``x`` alone is far below a
#: 2-layer mean-aggregation GNN (``'arxiv-like'``: about 42% vs 91% test
#: accuracy).
PRESETS: Dict[str, SyntheticGraphConfig] = {
    'tiny': SyntheticGraphConfig(
        num_nodes=2_000,
        num_edges=10_000,
        num_features=16,
        num_classes=4,
        num_communities=8,
        degree_exponent=2.5,
        max_degree_fraction=0.05,
        homophily=0.8,
        feature_signal=1.0,
        train_fraction=0.5,
        val_fraction=0.2,
        test_fraction=0.3,
    ),
    'arxiv-like': SyntheticGraphConfig(
        num_nodes=169_343,
        num_edges=1_166_243,
        num_features=128,
        num_classes=40,
        num_communities=80,
        degree_exponent=2.3,
        max_degree_fraction=0.23,
        homophily=0.65,
        feature_signal=2.0,
        train_fraction=0.537,
        val_fraction=0.176,
        test_fraction=0.287,
    ),
    'products-like': SyntheticGraphConfig(
        num_nodes=2_449_029,
        num_edges=61_859_140,
        num_features=100,
        num_classes=47,
        num_communities=94,
        degree_exponent=2.3,
        max_degree_fraction=0.01,
        homophily=0.8,
        feature_signal=2.0,
        train_fraction=0.08,
        val_fraction=0.016,
        test_fraction=0.9,
    ),
}


@dataclass
class SyntheticGraph:
    r"""A generated graph; every tensor lives on the CPU.

    Args:
        topology (CSCTopology): the undirected graph (both directions stored)
            in CSC form with sorted neighbour lists; :obj:`edge_id` and
            :obj:`edge_weight` are :obj:`None`, the CSC order is the edge
            order.
        x (torch.Tensor): ``float32`` node features ``[num_nodes,
            num_features]``.
        y (torch.Tensor): ``int64`` labels ``[num_nodes]``.
        train_mask (torch.Tensor): ``bool`` training mask ``[num_nodes]``.
        val_mask (torch.Tensor): ``bool`` validation mask ``[num_nodes]``.
        test_mask (torch.Tensor): ``bool`` test mask ``[num_nodes]``.
        config (SyntheticGraphConfig): the configuration it was made from.
        seed (int): the seed it was made with.
    """
    topology: CSCTopology
    x: Tensor
    y: Tensor
    train_mask: Tensor
    val_mask: Tensor
    test_mask: Tensor
    config: SyntheticGraphConfig
    seed: int

    @property
    def num_nodes(self) -> int:
        return self.topology.num_nodes

    def to_data(self) -> Any:
        r"""Returns a :class:`torch_geometric.data.Data` holding :obj:`x`,
        :obj:`y`, the masks and the ``edge_index`` of the CSC topology (sorted
        by destination).  The topology is attached as
        :obj:`data._fastload_topology = (data.edge_index, topology)` so a
        loader can reuse it instead of rebuilding the CSC."""
        from torch_geometric.data import Data

        data = Data(x=self.x, y=self.y,
                    edge_index=self.topology.to_edge_index(),
                    train_mask=self.train_mask, val_mask=self.val_mask,
                    test_mask=self.test_mask, num_nodes=self.num_nodes)
        data._fastload_topology = (data.edge_index, self.topology)
        return data


def _resolve(config: Union[SyntheticGraphConfig, str],
             arg: str = 'config') -> SyntheticGraphConfig:
    if isinstance(config, SyntheticGraphConfig):
        return config
    if isinstance(config, str):
        if config not in PRESETS:
            known = ', '.join(repr(name) for name in PRESETS)
            raise ValueError(
                f"unknown preset '{arg}' = {config!r}: pass one of {known} "
                f"or a SyntheticGraphConfig")
        return PRESETS[config]
    raise TypeError(f"'{arg}' must be a preset name or a "
                    f"SyntheticGraphConfig, got {type(config).__name__}")


def _check_seed(seed: Any) -> int:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise ValueError(f"invalid 'seed' = {seed!r}: pass an int >= 0")
    if seed < 0:
        raise ValueError(f"invalid 'seed' = {seed!r}: pass an int >= 0")
    return int(seed)


def _generator(seed: int, stage: int) -> torch.Generator:
    r"""An independent generator per stage, so changing how one stage draws
    does not change what the others produce."""
    state = np.random.SeedSequence([seed, stage]).generate_state(
        2, dtype=np.uint32)
    gen = torch.Generator()
    gen.manual_seed(int(state[0]) << 31 ^ int(state[1]))
    return gen


_STAGE_COMMUNITIES, _STAGE_WEIGHTS, _STAGE_EDGES, _STAGE_RELABEL = 0, 1, 2, 3
_STAGE_FEATURES, _STAGE_MASKS = 4, 5


def _community_sizes(cfg: SyntheticGraphConfig, gen: torch.Generator) -> Tensor:
    r"""Moderately uneven (log-normal) community sizes, each >= 1, summing
    to ``num_nodes``."""
    k, n = cfg.num_communities, cfg.num_nodes
    share = torch.exp(cfg.community_size_spread *
                      torch.randn(k, generator=gen, dtype=torch.float64))
    extra = n - k  # one node per community is guaranteed
    share = share / share.sum() * extra
    sizes = share.floor().long()
    remainder = extra - int(sizes.sum())
    if remainder > 0:  # largest fractional parts get the leftover nodes
        order = torch.argsort(share - sizes, descending=True, stable=True)
        sizes[order[:remainder]] += 1
    return sizes + 1


def _degree_weights(cfg: SyntheticGraphConfig, gen: torch.Generator) -> Tensor:
    r"""Expected-degree weights from a power law truncated so that the
    largest expected degree is ``max_degree_fraction * num_nodes``."""
    n = cfg.num_nodes
    alpha = cfg.degree_exponent - 1.0
    mean_degree = 2.0 * cfg.num_edges / n
    cap = cfg.max_degree_fraction * n
    u = torch.rand(n, generator=gen, dtype=torch.float64)
    if cfg.num_edges == 0:
        return torch.ones(n, dtype=torch.float64)

    def sample(t: float) -> Tensor:  # inverse CDF of Pareto(alpha) on [1, t]
        return (1.0 - u * (1.0 - t**-alpha)).pow(-1.0 / alpha)

    # Expected degree of node i is mean_degree * w_i / mean(w); choose the
    # truncation t with mean_degree * t / mean(w_t) = cap (a contraction).
    t = max(cap / max(mean_degree, 1e-12), 1.0)
    for _ in range(100):
        new_t = max(cap * float(sample(t).mean()) / max(mean_degree, 1e-12),
                    1.0)
        if abs(new_t - t) <= 1e-9 * t:
            break
        t = new_t
    return sample(t)


def _dedup_sorted(keys: np.ndarray) -> np.ndarray:
    r"""Unique values of a sorted array."""
    if keys.size <= 1:
        return keys
    keep = np.empty(keys.size, dtype=bool)
    keep[0] = True
    np.not_equal(keys[1:], keys[:-1], out=keep[1:])
    return keys[keep]


def _draw_edges(
    cfg: SyntheticGraphConfig,
    seed: int,
    progress: bool,
    desc: str,
) -> np.ndarray:
    r"""Sorted unique undirected edge keys ``lo * N + hi`` (``lo < hi``) in
    the final (randomly relabelled) node ids, exactly ``num_edges`` of
    them."""
    n, target = cfg.num_nodes, cfg.num_edges
    sizes = _community_sizes(cfg, _generator(seed, _STAGE_COMMUNITIES))
    weight = _degree_weights(cfg, _generator(seed, _STAGE_WEIGHTS))
    # Nodes are laid out by community (community c owns the contiguous range
    # comm_ptr[c]:comm_ptr[c + 1]), so one global cumulative sum serves both
    # global draws and draws restricted to one community.
    comm_ptr = torch.zeros(cfg.num_communities + 1, dtype=torch.long)
    torch.cumsum(sizes, 0, out=comm_ptr[1:])
    community = torch.repeat_interleave(
        torch.arange(cfg.num_communities, dtype=torch.int32), sizes,
        output_size=n)
    cum = torch.cumsum(weight, 0)
    del weight
    total = float(cum[-1])
    cum_before = torch.cat([cum.new_zeros(1), cum])
    comm_lo = cum_before[comm_ptr[:-1]]
    comm_width = cum_before[comm_ptr[1:]] - comm_lo
    comm_first = comm_ptr[:-1].to(torch.int32)
    comm_last = (comm_ptr[1:] - 1).to(torch.int32)
    del cum_before
    # Random relabelling so that node ids reveal nothing about communities.
    node_dtype = index_dtype_for(n - 1)
    perm = torch.randperm(n, generator=_generator(seed, _STAGE_RELABEL),
                          dtype=torch.int64).to(node_dtype)

    gen = _generator(seed, _STAGE_EDGES)
    keys = np.empty(0, dtype=np.int64)
    bar = tqdm(total=target, desc=desc, unit='edge', unit_scale=True,
               disable=not progress)
    drawn_total, kept_total = 0, 0
    try:
        for _ in range(_MAX_ROUNDS):
            deficit = target - keys.size
            if deficit <= 0:
                break
            # Draw enough to cover the deficit, given the share of draws that
            # survived so far (self loops and duplicates are lost).
            survive = (kept_total / drawn_total if drawn_total else 0.97)
            survive = max(survive, 0.02)
            num_draw = int(deficit / survive * 1.02) + 64
            fresh = np.empty(num_draw, dtype=np.int64)
            filled = 0
            for start in range(0, num_draw, _CHUNK):
                m = min(_CHUNK, num_draw - start)
                a = torch.searchsorted(
                    cum, torch.rand(m, generator=gen, dtype=torch.float64) *
                    total, right=True, out_int32=True).clamp_(max=n - 1)
                inside = torch.rand(m, generator=gen) < cfg.homophily
                r = torch.rand(m, generator=gen, dtype=torch.float64)
                comm_a = community[a].long()
                u = torch.where(inside, comm_lo[comm_a] + r * comm_width[comm_a],
                                r * total)
                del r
                b = torch.searchsorted(cum, u, right=True, out_int32=True)
                del u
                # Guard against float round-off at the range boundaries.
                b = torch.where(
                    inside,
                    torch.maximum(torch.minimum(b, comm_last[comm_a]),
                                  comm_first[comm_a]),
                    b.clamp_(max=n - 1))
                del inside, comm_a
                a, b = perm[a].long(), perm[b].long()
                lo, hi = torch.minimum(a, b), torch.maximum(a, b)
                del a, b
                valid = lo != hi
                chunk_keys = (lo[valid] * n + hi[valid]).numpy()
                del lo, hi, valid
                fresh[filled:filled + chunk_keys.size] = chunk_keys
                filled += chunk_keys.size
                bar.update(min(m, max(target - bar.n, 0)))
            fresh = fresh[:filled]
            fresh.sort()
            fresh = _dedup_sorted(fresh)
            if keys.size:  # drop pairs that exist already
                pos = np.searchsorted(keys, fresh)
                np.minimum(pos, keys.size - 1, out=pos)
                fresh = fresh[keys[pos] != fresh]
                del pos
            drawn_total += num_draw
            kept_total += fresh.size
            if fresh.size > deficit:  # trim a random subset of the new pairs
                pick = torch.randperm(fresh.size, generator=gen)[:deficit]
                fresh = fresh[np.sort(pick.numpy())]
            merged = np.concatenate([keys, fresh])
            del keys, fresh
            merged.sort(kind='stable')  # merges the two sorted runs
            keys = merged
            del merged
            bar.n = keys.size
            bar.refresh()
        else:
            raise RuntimeError(
                f"could not draw num_edges = {target} distinct edges in "
                f"{_MAX_ROUNDS} rounds (reached {keys.size}); the graph is "
                f"too dense for the degree model: lower num_edges, raise "
                f"num_nodes or lower homophily")
    finally:
        bar.close()
    return keys


def _csc_from_keys(keys: np.ndarray, n: int) -> CSCTopology:
    r"""Symmetrises the undirected keys ``lo * N + hi`` into a CSC topology
    with sorted neighbour lists."""
    lo, hi = np.divmod(keys, n)
    counts = np.bincount(lo, minlength=n) + np.bincount(hi, minlength=n)
    directed = np.empty(2 * keys.size, dtype=np.int64)
    directed[:keys.size] = keys  # dst = lo, src = hi
    np.multiply(hi, n, out=directed[keys.size:])  # dst = hi, src = lo
    directed[keys.size:] += lo
    del lo, hi
    directed.sort()  # by destination, then source
    indices_dtype = np.int32 if index_dtype_for(n - 1) == torch.int32 \
        else np.int64
    indices = np.empty(directed.size, dtype=indices_dtype)
    chunk = 1 << 24
    for start in range(0, directed.size, chunk):
        np.remainder(directed[start:start + chunk], n,
                     out=directed[start:start + chunk])
        indices[start:start + chunk] = directed[start:start + chunk]
    del directed
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    return CSCTopology(indptr=torch.from_numpy(indptr),
                       indices=torch.from_numpy(indices), num_nodes=n)


def _features(cfg: SyntheticGraphConfig, y: Tensor, seed: int) -> Tensor:
    gen = _generator(seed, _STAGE_FEATURES)
    centroid = torch.randn(cfg.num_classes, cfg.num_features, generator=gen)
    centroid = centroid / centroid.norm(dim=1, keepdim=True).clamp_(min=1e-12)
    centroid.mul_(cfg.feature_signal)
    x = torch.empty(cfg.num_nodes, cfg.num_features)
    for start in range(0, cfg.num_nodes, _FEATURE_CHUNK):
        block = x[start:start + _FEATURE_CHUNK]
        torch.randn(block.shape, generator=gen, out=block)
        block.add_(centroid[y[start:start + _FEATURE_CHUNK]])
    return x


def _masks(cfg: SyntheticGraphConfig, seed: int) -> tuple:
    n = cfg.num_nodes
    order = torch.randperm(n, generator=_generator(seed, _STAGE_MASKS))
    num_train = int(round(cfg.train_fraction * n))
    num_val = min(int(round(cfg.val_fraction * n)), n - num_train)
    num_test = min(int(round(cfg.test_fraction * n)),
                   n - num_train - num_val)
    masks = []
    start = 0
    for count in (num_train, num_val, num_test):
        mask = torch.zeros(n, dtype=torch.bool)
        mask[order[start:start + count]] = True
        masks.append(mask)
        start += count
    return tuple(masks)


def _labels(cfg: SyntheticGraphConfig, seed: int) -> Tensor:
    r"""Labels in final node ids (same community layout and relabelling as
    :func:`_draw_edges`)."""
    n = cfg.num_nodes
    sizes = _community_sizes(cfg, _generator(seed, _STAGE_COMMUNITIES))
    community = torch.repeat_interleave(
        torch.arange(cfg.num_communities), sizes, output_size=n)
    perm = torch.randperm(n, generator=_generator(seed, _STAGE_RELABEL),
                          dtype=torch.int64)
    y = torch.empty(n, dtype=torch.long)
    y[perm] = community % cfg.num_classes
    return y


def _preset_name(config: SyntheticGraphConfig) -> str:
    for name, preset in PRESETS.items():
        if preset == config:
            return name
    return 'custom'


def generate(
    config: Union[SyntheticGraphConfig, str],
    seed: int = 0,
    progress: bool = True,
) -> SyntheticGraph:
    r"""Generates a synthetic node-classification graph.

    The same :obj:`config` and :obj:`seed` give bit-identical tensors; the
    global random state is neither used nor changed.

    Args:
        config (SyntheticGraphConfig or str): a configuration or the name of
            a preset in :obj:`PRESETS` (``'tiny'``, ``'arxiv-like'``,
            ``'products-like'``).
        seed (int, optional): the random seed. (default: :obj:`0`)
        progress (bool, optional): show a progress bar while drawing edges.
            (default: :obj:`True`)
    """
    cfg = _resolve(config)
    seed = _check_seed(seed)
    keys = _draw_edges(cfg, seed, progress,
                       desc=f'generating {_preset_name(cfg)} edges')
    topology = _csc_from_keys(keys, cfg.num_nodes)
    del keys
    y = _labels(cfg, seed)
    x = _features(cfg, y, seed)
    train_mask, val_mask, test_mask = _masks(cfg, seed)
    return SyntheticGraph(topology=topology, x=x, y=y, train_mask=train_mask,
                          val_mask=val_mask, test_mask=test_mask, config=cfg,
                          seed=seed)


def degree_stats(topology: CSCTopology) -> Dict[str, float]:
    r"""Summary of the degree distribution of a topology (in-degrees, which
    equal the degrees of an undirected graph stored in both directions).

    Returns a dict with :obj:`num_nodes`, :obj:`num_edges` (directed),
    :obj:`mean_degree`, :obj:`median_degree`, :obj:`max_degree`,
    :obj:`isolated_nodes` and :obj:`top20_edge_share`, the share of edges
    whose destination is among the 20% highest-degree nodes.

    Args:
        topology (CSCTopology): the graph.
    """
    deg = topology.in_degree()
    n = topology.num_nodes
    num_edges = int(deg.sum()) if n else 0
    if n == 0:
        return {'num_nodes': 0, 'num_edges': 0, 'mean_degree': 0.0,
                'median_degree': 0.0, 'max_degree': 0, 'isolated_nodes': 0,
                'top20_edge_share': 0.0}
    sorted_deg = torch.sort(deg, descending=True).values
    top = max(int(math.ceil(0.2 * n)), 1)
    return {
        'num_nodes': n,
        'num_edges': num_edges,
        'mean_degree': num_edges / n,
        'median_degree': float(sorted_deg[(n - 1) // 2]),
        'max_degree': int(sorted_deg[0]),
        'isolated_nodes': int((deg == 0).sum()),
        'top20_edge_share': (float(sorted_deg[:top].sum()) / num_edges
                             if num_edges else 0.0),
    }


# --------------------------------------------------------------- disk cache --
def default_cache_root() -> Path:
    r"""``$PYG_FASTLOAD_CACHE`` if set, else
    ``~/.cache/pyg_fastload/synthetic``."""
    env = os.environ.get('PYG_FASTLOAD_CACHE')
    if env:
        return Path(env).expanduser()
    return Path('~/.cache/pyg_fastload/synthetic').expanduser()


def _config_hash(cfg: SyntheticGraphConfig) -> str:
    blob = json.dumps({'format_version': FORMAT_VERSION,
                       'config': asdict(cfg)}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:10]


def _cache_dir(root: Path, cfg: SyntheticGraphConfig, seed: int) -> Path:
    return root / f'{_preset_name(cfg)}-seed{seed}-{_config_hash(cfg)}'


def _save(graph: SyntheticGraph, path: Path) -> None:
    r"""Writes the graph into a temporary sibling directory, then renames it
    to :obj:`path` (atomic: a reader sees all files or none)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f'.{path.name}.tmp-',
                                dir=path.parent))
    try:
        arrays = {
            'indptr': graph.topology.indptr,
            'indices': graph.topology.indices,
            'x': graph.x,
            'y': graph.y,
            'train_mask': graph.train_mask,
            'val_mask': graph.val_mask,
            'test_mask': graph.test_mask,
        }
        for name, tensor in arrays.items():
            np.save(tmp / f'{name}.npy', tensor.numpy())
        meta = {
            'format_version': FORMAT_VERSION,
            'config': asdict(graph.config),
            'seed': graph.seed,
            'num_nodes': graph.num_nodes,
            'num_directed_edges': graph.topology.num_edges,
        }
        with open(tmp / 'meta.json', 'w') as f:
            json.dump(meta, f, indent=2, sort_keys=True)
        os.chmod(tmp, 0o755)  # mkdtemp makes it private
        if path.exists():  # a corrupted directory being replaced
            shutil.rmtree(path, ignore_errors=True)
        try:
            os.replace(tmp, path)
        except OSError:
            if not path.exists():
                raise
            # Another process finished the same graph first; keep its copy.
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _load(path: Path, cfg: SyntheticGraphConfig, seed: int) -> SyntheticGraph:
    r"""Memory-maps a cached graph, raising :class:`ValueError` with the
    reason when the directory is incomplete or inconsistent."""
    try:
        with open(path / 'meta.json') as f:
            meta = json.load(f)
    except (OSError, ValueError) as exc:
        raise ValueError(f'unreadable meta.json ({exc})') from None
    if meta.get('format_version') != FORMAT_VERSION:
        raise ValueError(f"format version {meta.get('format_version')!r}, "
                         f"expected {FORMAT_VERSION}")
    if meta.get('config') != asdict(cfg) or meta.get('seed') != seed:
        raise ValueError('meta.json describes a different config or seed')
    n, f_dim = cfg.num_nodes, cfg.num_features
    num_edges = meta.get('num_directed_edges')
    if not isinstance(num_edges, int) or num_edges < 0:
        raise ValueError(f'bad num_directed_edges {num_edges!r}')
    expected = {
        'indptr': ((n + 1,), np.int64),
        'indices': ((num_edges,), np.dtype(
            np.int32 if index_dtype_for(n - 1) == torch.int32 else np.int64)),
        'x': ((n, f_dim), np.float32),
        'y': ((n,), np.int64),
        'train_mask': ((n,), np.bool_),
        'val_mask': ((n,), np.bool_),
        'test_mask': ((n,), np.bool_),
    }
    arrays = {}
    for name, (shape, dtype) in expected.items():
        file = path / f'{name}.npy'
        try:
            # 'c' (copy-on-write) maps the file like 'r' but gives writable
            # arrays, so torch.from_numpy neither warns nor hands out tensors
            # whose in-place ops would crash on a read-only mapping.
            array = np.load(file, mmap_mode='c', allow_pickle=False)
        except (OSError, ValueError, EOFError) as exc:
            raise ValueError(f'{file.name}: {exc}') from None
        if array.shape != shape or array.dtype != np.dtype(dtype):
            raise ValueError(f'{file.name}: shape {array.shape} dtype '
                             f'{array.dtype}, expected {shape} '
                             f'{np.dtype(dtype)}')
        arrays[name] = array
    indptr = arrays['indptr']
    if int(indptr[0]) != 0 or int(indptr[-1]) != num_edges:
        raise ValueError(f'indptr.npy: ends [{int(indptr[0])}, '
                         f'{int(indptr[-1])}], expected [0, {num_edges}]')
    tensors = {name: torch.from_numpy(array)
               for name, array in arrays.items()}
    topology = CSCTopology(indptr=tensors['indptr'],
                           indices=tensors['indices'], num_nodes=n)
    return SyntheticGraph(topology=topology, x=tensors['x'], y=tensors['y'],
                          train_mask=tensors['train_mask'],
                          val_mask=tensors['val_mask'],
                          test_mask=tensors['test_mask'], config=cfg,
                          seed=seed)


def load_synthetic(
    name_or_config: Union[SyntheticGraphConfig, str],
    root: Optional[Union[str, os.PathLike]] = None,
    seed: int = 0,
    progress: bool = True,
) -> SyntheticGraph:
    r"""Returns a synthetic graph, generating and caching it on the first
    call and memory-mapping the cached ``.npy`` files afterwards.

    The cache directory is ``root/<name>-seed<seed>-<config hash>/`` with a
    ``meta.json`` and one ``.npy`` file per array, written atomically.  A
    directory that is incomplete or does not match the config is
    regenerated with a warning.

    Args:
        name_or_config (SyntheticGraphConfig or str): a configuration or the
            name of a preset in :obj:`PRESETS`.
        root (str or os.PathLike, optional): the cache root; defaults to
            ``$PYG_FASTLOAD_CACHE``, else
            ``~/.cache/pyg_fastload/synthetic``. (default: :obj:`None`)
        seed (int, optional): the random seed. (default: :obj:`0`)
        progress (bool, optional): show a progress bar while generating.
            (default: :obj:`True`)
    """
    cfg = _resolve(name_or_config, 'name_or_config')
    seed = _check_seed(seed)
    root = default_cache_root() if root is None else Path(root).expanduser()
    path = _cache_dir(root, cfg, seed)
    if path.exists():
        try:
            return _load(path, cfg, seed)
        except ValueError as exc:
            warnings.warn(f"the synthetic graph cache '{path}' is corrupted "
                          f"or incomplete ({exc}); regenerating it",
                          RuntimeWarning, stacklevel=2)
    graph = generate(cfg, seed=seed, progress=progress)
    _save(graph, path)
    return graph
