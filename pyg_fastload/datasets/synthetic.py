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

import math
from dataclasses import dataclass
from typing import Any, Dict, Union

import numpy as np
import torch
from torch import Tensor
from torch_geometric.data import Data
from tqdm.auto import tqdm

from ..graph.convert import attach_topology
from ..graph.topology import CSCTopology, index_dtype_for
from .synthetic_config import SyntheticGraphConfig, preset_name, resolve_config

__all__ = ['SyntheticGraph', 'generate', 'degree_stats', 'check_seed',
           'power_law']

#: Edges drawn per vectorised chunk (bounds the temporary memory).
_CHUNK = 1 << 22
#: Rows of ``x`` filled per chunk.
_FEATURE_CHUNK = 1 << 18
#: Give up when this many rounds of extra draws do not reach ``num_edges``.
_MAX_ROUNDS = 64

_ARRAYS = ('indptr', 'indices', 'x', 'y', 'train_mask', 'val_mask',
           'test_mask')


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
        by destination).  The topology is attached
        (:func:`~pyg_fastload.graph.convert.attach_topology`) so a loader
        reuses it instead of rebuilding the CSC."""
        data = Data(x=self.x, y=self.y,
                    edge_index=self.topology.to_edge_index(),
                    train_mask=self.train_mask, val_mask=self.val_mask,
                    test_mask=self.test_mask, num_nodes=self.num_nodes)
        attach_topology(data, self.topology)
        return data


def check_seed(seed: Any) -> int:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise ValueError(f"invalid 'seed' = {seed!r}: pass an int >= 0")
    if seed < 0:
        raise ValueError(f"invalid 'seed' = {seed!r}: pass an int >= 0")
    return int(seed)


def _generator(seed: int, stage: int, *more: int) -> torch.Generator:
    r"""An independent generator per stage (and per :obj:`more` keys, such
    as a chunk), so changing how one stage draws does not change what the
    others produce."""
    state = np.random.SeedSequence([seed, stage, *more]).generate_state(
        2, dtype=np.uint32)
    gen = torch.Generator()
    gen.manual_seed(int(state[0]) << 31 ^ int(state[1]))
    return gen


_STAGE_COMMUNITIES, _STAGE_WEIGHTS, _STAGE_EDGES, _STAGE_RELABEL = 0, 1, 2, 3
_STAGE_FEATURES, _STAGE_MASKS = 4, 5


def _community_sizes(cfg: SyntheticGraphConfig,
                     gen: torch.Generator) -> Tensor:
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


def power_law(u: Tensor, alpha: float, cap: float) -> Tensor:
    r"""Expected-degree weights of a power law: the inverse CDF of
    Pareto(:obj:`alpha`) truncated to ``[1, cap]`` at the uniforms
    :obj:`u`."""
    return (1.0 - u * (1.0 - cap**-alpha)).pow(-1.0 / alpha)


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

    # Expected degree of node i is mean_degree * w_i / mean(w); choose the
    # truncation t with mean_degree * t / mean(w_t) = cap (a contraction).
    t = max(cap / max(mean_degree, 1e-12), 1.0)
    for _ in range(100):
        new_t = max(cap * float(power_law(u, alpha, t).mean()) /
                    max(mean_degree, 1e-12), 1.0)
        if abs(new_t - t) <= 1e-9 * t:
            break
        t = new_t
    return power_law(u, alpha, t)


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

    Example:
        >>> from pyg_fastload.datasets import generate
        >>> graph = generate('tiny', progress=False)
        >>> graph.topology.num_nodes, graph.x.shape
        (2000, torch.Size([2000, 16]))
    """
    cfg = resolve_config(config)
    seed = check_seed(seed)
    keys = _draw_edges(cfg, seed, progress,
                       desc=f'generating {preset_name(cfg)} edges')
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

    Example:
        >>> import torch
        >>> from pyg_fastload import CSCTopology
        >>> from pyg_fastload.datasets import degree_stats
        >>> stats = degree_stats(CSCTopology.from_edge_index(
        ...     torch.tensor([[0, 1, 2, 3, 0], [1, 2, 3, 0, 2]]), num_nodes=4))
        >>> stats['mean_degree'], stats['max_degree']
        (1.25, 2)
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
