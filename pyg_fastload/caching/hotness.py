r"""Hotness policies: which node feature rows a static cache should hold.

A neighbour sampler draws the *in-neighbours* of its frontier, so a node is
fetched often when it appears in many in-neighbour lists, when random walks
along in-edges end on it, or simply when sampling already fetched it often.
Every policy returns one score per node (higher: hotter); :func:`hot_order`
turns scores into the order in which a cache is filled:

* ``'out_degree'``: PaGraph's static cache, the number of in-neighbour lists
  a node appears in (:func:`out_degree_scores`).
* ``'reverse_pagerank'``: GIDS' host buffer, the PageRank of the walk that
  steps to a random in-neighbour (:func:`reverse_pagerank_scores`).
* ``'expected_access'``: the expected fetches of a node in one epoch under
  the loader's fan-outs, propagated from the training nodes against the
  edges (:func:`expected_access_scores`; the notes' fan-out-weighted
  variant of GIDS's ranking).
* ``'presample'``: GNNLab's pre-sampling, how many mini-batches of a few
  sampled epochs fetched the node (:func:`presample_scores`).
* ``'random'``: the baseline (:func:`random_scores`).

:func:`access_counts` records the same per-node batch counts for a given
epoch (the trace an oracle cache would be built from) and
:func:`hit_ratio` / :func:`hit_ratio_curve` score a cache against a trace.
"""
from __future__ import annotations

import math
from typing import (Any, Callable, Iterable, List, Optional, Sequence,
                    Union)

import torch
from torch import Tensor
from tqdm.auto import tqdm

from ..config import POLICIES, check_fanouts, check_hops
from ..graph.convert import topology_of
from ..graph.hetero_topology import HeteroTopology
from ..graph.kind import is_hetero, is_topology
from ..graph.topology import CSCTopology
from ..sampling import FastNeighborSampler, HeteroNeighborSampler, HopSampler
from ..sampling.hetero_sampler import hetero_fanouts
from .ranking import (
    check_int,
    hit_ratio,
    hit_ratio_curve,
    hot_order,
    node_ids,
)
from .walks import Segments, expected_accesses, reverse_walk_ranks

__all__ = [
    'POLICIES',
    'out_degree_scores',
    'reverse_pagerank_scores',
    'expected_access_scores',
    'presample_scores',
    'random_scores',
    'hotness_scores',
    'loader_scores',
    'Scores',
    'hot_order',
    'access_counts',
    'hit_ratio',
    'hit_ratio_curve',
]



def _as_topology(topology: Any) -> Union[CSCTopology, HeteroTopology]:
    if is_topology(topology):
        return topology
    try:
        return topology_of(topology)
    except TypeError:
        raise TypeError(f"'topology' must be a CSCTopology or a "
                        f"HeteroTopology (or a torch_geometric Data or "
                        f"HeteroData), got "
                        f"{type(topology).__name__}") from None


# Policies ####################################################################


def out_degree_scores(topology: CSCTopology) -> Tensor:
    r"""PaGraph's score: the number of in-neighbour lists every node appears
    in (its out-degree under PyG's ``flow='source_to_target'``, i.e.
    ``degree(edge_index[0])``), as ``int64``.

    Args:
        topology (CSCTopology or HeteroTopology): the graph (a
            homogeneous one is one relation).

    Example:
        >>> import torch
        >>> from pyg_fastload import CSCTopology
        >>> from pyg_fastload.caching import out_degree_scores
        >>> out_degree_scores(CSCTopology.from_edge_index(
        ...     torch.tensor([[0, 0, 1], [1, 2, 2]]), num_nodes=3)).tolist()
        [2, 1, 0]
    """
    return Segments.of(_as_topology(topology)).out_degree()


def _sampler(topo: Union[CSCTopology, HeteroTopology],
             num_neighbors: Any) -> HopSampler:
    r"""The loader's sampler of :obj:`topo` (heterogeneous or not)."""
    sampler: HopSampler = HeteroNeighborSampler(topo, num_neighbors) \
        if is_hetero(topo) else \
        FastNeighborSampler(topo, list(num_neighbors))
    check_hops(sampler.num_hops)
    return sampler


def _hop_fanouts(topo: Union[CSCTopology, HeteroTopology],
                 num_neighbors: Any) -> List[List[int]]:
    r"""The fan-out of every hop along every relation (``[hop][relation]``;
    a homogeneous graph is one relation), checked as the loader's sampler
    checks them."""
    if not is_hetero(topo):
        return [[fanout] for fanout in check_fanouts(num_neighbors)]
    fanouts = hetero_fanouts(num_neighbors, topo.edge_types)
    hops = len(next(iter(fanouts.values()), []))
    return [[fanouts[e][hop] for e in topo.edge_types]
            for hop in range(hops)]


def reverse_pagerank_scores(
    topology: CSCTopology,
    alpha: float = 0.85,
    max_iters: int = 50,
    tol: float = 1e-6,
    out_of_core: Optional[bool] = None,
    progress: bool = False,
) -> Tensor:
    r"""GIDS' score: the PageRank of the random walk that steps from a node
    to a uniformly drawn *in*-neighbour (the direction a neighbour sampler
    walks), teleporting uniformly with probability ``1 - alpha``; the mass
    of nodes without in-neighbours is spread uniformly.

    Power iteration in ``float64`` until the L1 change drops below
    :obj:`tol` or :obj:`max_iters` steps; the result sums to 1.

    Args:
        topology (CSCTopology or HeteroTopology): the graph (a
            homogeneous one is one relation).
        alpha (float, optional): damping, the probability of following an
            edge. (default: :obj:`0.85`)
        max_iters (int, optional): most power-iteration steps.
            (default: :obj:`50`)
        tol (float, optional): stop once the L1 change of one step is below
            this. (default: :obj:`1e-6`)
        out_of_core (bool, optional): scatter over the CSC in bounded
            chunks instead of transposing it (slower per step, memory
            bounded); default: where the transpose would need more than half
            the available memory.
        progress (bool, optional): show a progress bar of the steps.
            (default: :obj:`False`)
    """
    topo = _as_topology(topology)
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or \
            not 0.0 <= float(alpha) < 1.0:
        raise ValueError(f"'alpha' = {alpha!r}: pass a damping factor in "
                         f"[0, 1), e.g. 0.85")
    check_int('max_iters', max_iters, 1)
    if isinstance(tol, bool) or not isinstance(tol, (int, float)) or \
            not float(tol) >= 0.0:
        raise ValueError(f"'tol' = {tol!r}: pass a tolerance >= 0")
    if topo.num_nodes == 0:
        return torch.empty(0, dtype=torch.float64)
    return reverse_walk_ranks(Segments.of(topo), float(alpha), max_iters,
                              float(tol), out_of_core=out_of_core,
                              progress=progress)


def expected_access_scores(
    topology: CSCTopology,
    train_nodes: Tensor,
    num_neighbors: Sequence[int],
    out_of_core: Optional[bool] = None,
) -> Tensor:
    r"""Expected fetches of every node's row in one epoch over
    :obj:`train_nodes` with fan-outs :obj:`num_neighbors`, without
    sampling: 1 on every training node, then hop by hop each node passes
    ``min(1, fanout / in-degree)`` of its value to each of its
    in-neighbours; the score sums the hops (``float64``). Deterministic and
    ``len(num_neighbors)`` sparse steps (out of core on graphs whose
    transpose does not fit), where ``'presample'`` samples whole epochs.

    Args:
        topology (CSCTopology or HeteroTopology): the graph (a
            homogeneous one is one relation).
        train_nodes (torch.Tensor): training node ids or a boolean mask.
        num_neighbors (List[int] or Dict[EdgeType, List[int]]): fan-out
            per hop (``-1``: all), per relation where a dict.
        out_of_core (bool, optional): see
            :func:`reverse_pagerank_scores`.
    """
    topo = _as_topology(topology)
    train = node_ids('train_nodes', train_nodes, topo.num_nodes)
    return expected_accesses(Segments.of(topo), train,
                             _hop_fanouts(topo, num_neighbors), out_of_core)


def _count_batches(
    sampler: HopSampler,
    batches: Iterable[Tensor],
    generator: torch.Generator,
    counts: Tensor,
    progress: bool,
    desc: str,
    total: Optional[int],
) -> Tensor:
    r"""Adds 1 to :obj:`counts` for every node of every batch's ``n_id``
    (``n_id`` of a non-disjoint sample holds every node once)."""
    bar = tqdm(batches, desc=desc, total=total, disable=not progress,
               unit='batch', leave=False)
    for batch in bar:
        node = sampler.sample(batch, generator).node
        counts.index_add_(0, node, torch.ones_like(node))
    return counts


def access_counts(
    topology: CSCTopology,
    seed_batches: Iterable[Tensor],
    num_neighbors: Sequence[int],
    seed: int = 0,
    *,
    progress: bool = False,
) -> Tensor:
    r"""The access trace of one pass over :obj:`seed_batches`: for every
    node, the number of batches whose sampled ``n_id`` holds it (``int64``).
    This is what an oracle cache for exactly these batches would rank by.

    Args:
        topology (CSCTopology or HeteroTopology): the graph (a
            homogeneous one is one relation).
        seed_batches (Iterable[torch.Tensor]): the seed node ids of every
            mini-batch, in order.
        num_neighbors (List[int]): fan-out per hop, as for
            :class:`~pyg_fastload.FastNeighborSampler`.
        seed (int, optional): seed of the sampling randomness.
            (default: :obj:`0`)
        progress (bool, optional): show a progress bar.
            (default: :obj:`False`)
    """
    topo = _as_topology(topology)
    check_int('seed', seed, 0)
    sampler = _sampler(topo, num_neighbors)
    counts = torch.zeros(topo.num_nodes, dtype=torch.long)
    generator = torch.Generator().manual_seed(seed)
    total = len(seed_batches) if hasattr(seed_batches, '__len__') else None
    batches = (node_ids('seed_batches', b, topo.num_nodes)
               for b in seed_batches)
    return _count_batches(sampler, batches, generator, counts, progress,
                          'tracing accesses', total)


def presample_scores(
    topology: CSCTopology,
    train_nodes: Tensor,
    num_neighbors: Sequence[int],
    batch_size: int = 1024,
    epochs: int = 1,
    seed: int = 0,
    progress: bool = True,
) -> Tensor:
    r"""GNNLab's score: sample :obj:`epochs` shuffled epochs over
    :obj:`train_nodes` with :class:`~pyg_fastload.FastNeighborSampler` and
    count, for every node, the mini-batches that fetched it (``int64``).

    Use a different :obj:`seed` than training does: the point is to predict
    the accesses of epochs that have not been sampled yet.

    Args:
        topology (CSCTopology or HeteroTopology): the graph (a
            homogeneous one is one relation).
        train_nodes (torch.Tensor): training node ids or a boolean mask.
        num_neighbors (List[int]): fan-out per hop.
        batch_size (int, optional): seeds per mini-batch.
            (default: :obj:`1024`)
        epochs (int, optional): sampled epochs. (default: :obj:`1`)
        seed (int, optional): seed of the shuffling and sampling.
            (default: :obj:`0`)
        progress (bool, optional): show a progress bar.
            (default: :obj:`True`)
    """
    topo = _as_topology(topology)
    train = node_ids('train_nodes', train_nodes, topo.num_nodes)
    check_int('batch_size', batch_size, 1)
    check_int('epochs', epochs, 1)
    check_int('seed', seed, 0)
    sampler = _sampler(topo, num_neighbors)
    generator = torch.Generator().manual_seed(seed)
    counts = torch.zeros(topo.num_nodes, dtype=torch.long)
    per_epoch = math.ceil(train.numel() / batch_size)
    for epoch in range(epochs):
        order = train[torch.randperm(train.numel(), generator=generator)]
        _count_batches(sampler, order.split(batch_size), generator, counts,
                       progress, f'pre-sampling epoch {epoch + 1}/{epochs}',
                       per_epoch)
    return counts


def random_scores(num_nodes: int, seed: int = 0) -> Tensor:
    r"""Uniform random ``float64`` scores (a random cache).

    Args:
        num_nodes (int): number of nodes.
        seed (int, optional): the random seed. (default: :obj:`0`)
    """
    check_int('num_nodes', num_nodes, 0)
    check_int('seed', seed, 0)
    generator = torch.Generator().manual_seed(seed)
    return torch.rand(num_nodes, dtype=torch.float64, generator=generator)


def hotness_scores(
    policy: str,
    topology: CSCTopology,
    *,
    train_nodes: Optional[Tensor] = None,
    num_neighbors: Optional[Sequence[int]] = None,
    batch_size: int = 1024,
    presample_epochs: int = 1,
    seed: int = 0,
    progress: bool = True,
) -> Tensor:
    r"""Per-node hotness under :obj:`policy` (one of :obj:`POLICIES`);
    rank with :func:`hot_order`.

    Args:
        policy (str): ``'out_degree'``, ``'reverse_pagerank'``,
            ``'expected_access'``, ``'presample'`` or ``'random'``.
        topology (CSCTopology or HeteroTopology): the graph (a
            homogeneous one is one relation).
        train_nodes (torch.Tensor, optional): training node ids or mask
            (``'expected_access'`` and ``'presample'`` only, required
            there).
        num_neighbors (List[int], optional): fan-out per hop (the same).
        batch_size (int, optional): seeds per pre-sampled mini-batch.
            (default: :obj:`1024`)
        presample_epochs (int, optional): pre-sampled epochs.
            (default: :obj:`1`)
        seed (int, optional): seed of ``'presample'`` and ``'random'``.
            (default: :obj:`0`)
        progress (bool, optional): show a progress bar while pre-sampling
            or iterating PageRank.
            (default: :obj:`True`)

    Example:
        >>> import torch
        >>> from pyg_fastload import CSCTopology
        >>> from pyg_fastload.caching import hot_order, hotness_scores
        >>> topo = CSCTopology.from_edge_index(
        ...     torch.tensor([[0, 1, 2, 3, 0], [1, 2, 3, 0, 2]]), num_nodes=4)
        >>> scores = hotness_scores('out_degree', topo, progress=False)
        >>> scores.tolist(), hot_order(scores).tolist()
        ([2, 1, 1, 1], [0, 1, 2, 3])
    """
    if policy not in POLICIES:
        raise ValueError(f"unknown hotness 'policy' = {policy!r}: pass one "
                         f"of {', '.join(repr(p) for p in POLICIES)}")
    if policy == 'out_degree':
        return out_degree_scores(topology)
    if policy == 'reverse_pagerank':
        return reverse_pagerank_scores(topology, progress=progress)
    if policy == 'random':
        return random_scores(_as_topology(topology).num_nodes, seed)
    missing = [name for name, value in (('train_nodes', train_nodes),
                                        ('num_neighbors', num_neighbors))
               if value is None]
    if missing:
        raise ValueError(f"policy {policy!r} follows the loader's mini-"
                         f"batches and needs "
                         f"{' and '.join(repr(m) for m in missing)}: pass the "
                         f"training nodes and the fan-out the loader uses")
    if policy == 'expected_access':
        return expected_access_scores(topology, train_nodes, num_neighbors)
    return presample_scores(topology, train_nodes, num_neighbors,
                            batch_size=batch_size, epochs=presample_epochs,
                            seed=seed, progress=progress)


#: Hotness per node, or a function ``(policy, topology, train_nodes) ->
#: scores`` computing it once a store is open (:func:`loader_scores`).
Scores = Union[Tensor,
               Callable[[str, CSCTopology, Optional[Tensor]], Tensor]]


def loader_scores(num_neighbors: Optional[Sequence[int]] = None,
                  batch_size: int = 1024, *, seed: int = 0,
                  progress: bool = True) -> Callable[
                      [str, CSCTopology, Optional[Tensor]], Tensor]:
    r"""The hotness of a cache policy (:func:`hotness_scores`) for a loader
    with these fan-outs and batch size (which ``'expected_access'`` and
    ``'presample'`` follow), computed when a store's opener calls it with
    the policy, its topology and training nodes: the loader's settings,
    the seed and progress bars are given here, once, and openers pass this
    one function (``open_dataset(path, cache, scores=loader_scores(
    [15, 10, 5], 1024))``).

    Args:
        num_neighbors (List[int], optional): the loader's fan-out per hop
            (needed by ``'expected_access'`` and ``'presample'``).
        batch_size (int, optional): the loader's seeds per mini-batch.
            (default: :obj:`1024`)
        seed (int, optional): seed of the sampled policies.
            (default: :obj:`0`)
        progress (bool, optional): show progress bars.
            (default: :obj:`True`)
    """
    def scores(policy: str, topology: CSCTopology,
               train_nodes: Optional[Tensor]) -> Tensor:
        return hotness_scores(policy, topology, train_nodes=train_nodes,
                              num_neighbors=num_neighbors,
                              batch_size=batch_size, seed=seed,
                              progress=progress)
    return scores
