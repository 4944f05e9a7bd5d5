r"""HopGNN's feature-centric training on one rank: every rank (model ``m``)
draws its mini-batch from the global training set as in data parallelism,
the roots are routed to the rank that owns their features (their home),
and each rank samples one micrograph (a disjoint computation tree) per root
it received. The micrographs a rank holds are grouped into *time steps*,
one per origin model: at step ``t`` model ``m`` visits rank ``(m + t) % N``
and trains the micrographs it drew that are homed there (HopGNN 4.2). The
union of a rank's micrographs' remote rows is fetched once per owner per
iteration (pre-gathering, in
:class:`~pyg_fastload.distributed.PartitionedFeatureStore`).

Micrographs are sampled on the whole topology, which every rank holds
(``partition.full_topology``): topology is small next to features
(products-like's ``meta.json``: 495 MB of neighbour ids, 980 MB of
features), and a full topology keeps micrograph sampling local with no
collectives. On a heterogeneous partition (:class:`HeteroRootRouter`) the
roots are of the labelled node type and the micrographs span every
relation of the whole typed topology; :func:`split_time_steps` splits a
typed batch per node type and relation.

Models are replicas here (DDP), so instead of migrating a model between
steps each rank trains its steps one after the other, accumulating
gradients, and DDP combines them once per iteration. The update equals
data-parallel training on the same global batch when each rank's loss is
the *sum* over the roots it trained divided by the per-rank batch size (DDP
averages), and no layer uses batch statistics (batch norm would see one
time step's micrographs).

Micrograph merging (HopGNN 5.3, :func:`merge_order`) removes the step with
the fewest roots and spreads each model's roots of that step evenly over
its remaining steps, so those micrographs train away from their home and
their rows are fetched remotely: fewer, larger steps for more remote rows.
:class:`MergeSearch` picks how many steps to merge from measured epoch
times (the examination period).
"""
from __future__ import annotations

import time
from typing import Any, Dict, Iterator, List, Optional, Tuple, Union

import torch
from torch import Tensor
from torch_geometric.data import Data, HeteroData
from torch_geometric.sampler import (HeteroSamplerOutput, NodeSamplerInput,
                                     SamplerOutput)

from ..graph.hetero_topology import end_types
from ..partition import HeteroPartitionBook, PartitionBook
from ..sampling import FastNeighborSampler, HeteroNeighborSampler
from ..sampling.temporal import TemporalIndex, check_strategy, node_time_index
from .collective_sampling import share_node_times
from .collectives import Collectives

__all__ = ['RootRouting', 'RootRouter', 'HeteroRootRouter', 'MergeSearch',
           'merge_order', 'assign_steps', 'split_time_steps']


def merge_order(counts: Tensor, merges: int) -> List[int]:
    r"""The steps HopGNN's merging removes, in order. :obj:`counts` is
    ``R[m][t]``, the roots model ``m`` trains at step ``t``; each round
    removes the step with the fewest roots over all models (the first on a
    tie) and spreads every model's roots of it evenly over the remaining
    steps (the first ``R mod k`` remaining steps take one more), as
    :func:`assign_steps` does root by root."""
    counts = counts.clone().long()
    alive = list(range(counts.size(1)))
    if not 0 <= merges < len(alive):
        raise ValueError(f"'merges' = {merges} must lie in [0, "
                         f"{len(alive) - 1}] for {len(alive)} steps")
    removed = []
    for _ in range(merges):
        step = alive[int(torch.argmin(counts[:, alive].sum(0)))]
        alive.remove(step)
        removed.append(step)
        base, extra = counts[:, step] // len(alive), \
            counts[:, step] % len(alive)
        for j, t in enumerate(alive):
            counts[:, t] += base + (extra > j).long()
        counts[:, step] = 0
    return removed


def assign_steps(steps: Tensor, removed: List[int],
                 num_steps: int) -> Tensor:
    r"""Each root's step (of :obj:`num_steps`) after merging away
    :obj:`removed` (in order): the roots of a removed step go round robin
    to the remaining ones."""
    steps = steps.clone()
    alive = list(range(num_steps))
    for step in removed:
        alive.remove(step)
        moved = (steps == step).nonzero().view(-1)
        targets = torch.tensor(alive, dtype=steps.dtype)
        steps[moved] = targets[torch.arange(moved.numel()) % len(alive)]
    return steps


def split_time_steps(batch: Union[Data, HeteroData]
                     ) -> List[Union[Data, HeteroData]]:
    r"""A root router's batch (homogeneous or heterogeneous) as one batch
    per time step: the micrographs of roots ``[step_ptr[j], step_ptr[j +
    1])`` with every node type's ``x``, ``y``, ``n_id`` and
    ``dataset_id``, every
    relation's ``edge_index``, the seeds' ``batch_size`` and the per-hop
    counts (the trees are disjoint, so no edge crosses two steps)."""
    ptr = batch.step_ptr
    steps = [type(batch)() for _ in range(ptr.numel() - 1)]
    node_step, local = {}, {}
    for store in batch.node_stores:
        key = store._key
        counts = torch.as_tensor(store.num_sampled_nodes)
        hops = torch.repeat_interleave(torch.arange(counts.numel()), counts)
        node_step[key] = torch.searchsorted(ptr, store.batch, right=True) - 1
        for j, step in enumerate(steps):
            mask = node_step[key] == j
            local[key, j] = torch.cumsum(mask, 0) - 1
            out = _store(step, key)
            for name in ('x', 'y', 'n_id', 'dataset_id'):
                if name in store:
                    out[name] = store[name][mask]
            out.num_nodes = int(mask.sum())
            out.num_sampled_nodes = torch.bincount(
                hops[mask], minlength=counts.numel()).tolist()
            if 'batch_size' in store:
                out.batch_size = int(ptr[j + 1] - ptr[j])
    for store in batch.edge_stores:
        key = store._key
        src, dst = end_types(key)
        counts = torch.as_tensor(store.num_sampled_edges)
        hops = torch.repeat_interleave(torch.arange(counts.numel()), counts)
        edge_index = store.edge_index
        edge_step = node_step[dst][edge_index[1]]
        for j, step in enumerate(steps):
            keep = edge_step == j
            out = _store(step, key)
            out.edge_index = torch.stack([local[src, j][edge_index[0, keep]],
                                          local[dst, j][edge_index[1, keep]]])
            out.num_sampled_edges = torch.bincount(
                hops[keep], minlength=counts.numel()).tolist()
    return steps


def _store(data: Union[Data, HeteroData], key: Any) -> Any:
    r"""The store of :obj:`data` named :obj:`key` (``None``: a ``Data``'s
    own)."""
    return data if key is None else data[key]


class MergeSearch:
    r"""HopGNN's examination period: from the second epoch on, merge one
    more step per epoch while the epoch time falls; at the first epoch that
    is not faster, go back to the best count and keep it.

    Args:
        num_steps (int): steps without merging (the world size).
    """
    def __init__(self, num_steps: int):
        self.num_steps = num_steps
        self.merges = 0
        self.history: List[Dict[str, float]] = []
        self.done = num_steps <= 1

    def epoch_done(self, seconds: float) -> int:
        r"""Records an epoch's time at the current count; returns the
        number of merges for the next epoch."""
        self.history.append({'time_steps': self.num_steps - self.merges,
                             'seconds': seconds})
        if self.done:
            return self.merges
        if len(self.history) >= 2 and seconds >= self.history[-2]['seconds']:
            self.done = True
            self.merges -= 1  # back to the previous, faster count
        elif self.merges + 1 < self.num_steps:
            self.merges += 1
        else:
            self.done = True
        return self.merges


class RootRouting:
    r"""HopGNN's routing in front of a local sampler (a mixin listed before
    it): routes this rank's drawn roots to where they train (their home, or
    another rank of their model's path after merging) and samples the
    micrographs of the roots it receives (a collective per batch).

    A batch holds the roots this rank received (the seeds, first in their
    type), grouped by time step (``step_ptr``: the roots of step ``j`` are
    ``[step_ptr[j], step_ptr[j + 1])``; ``batch`` maps every node to its
    root), with one disjoint tree per root. :attr:`load` lists the roots
    trained here per batch; :meth:`stats` the feature locality.

    Args:
        topology: the whole graph, in new ids (typed on a heterogeneous
            partition).
        book: who owns (homes) which node.
        part (int): this rank's part.
        collectives (Collectives): this rank's collectives.
        num_neighbors: fan-out per hop (one list for every relation, or a
            dict by edge type on a heterogeneous graph).
        replace (bool): sample with replacement.
        merges (int): time steps merged away per iteration (0: one step
            per rank).
        merge_search (bool): choose :obj:`merges` by HopGNN's examination
            period (needs :attr:`batches_per_epoch`).
        node_time (optional): temporal micrographs: the times of the nodes
            this part owns (new-id order; on a heterogeneous partition a
            dict by node type, as DSP's :class:`~pyg_fastload.distributed.
            collective_sampling.HeteroCollectiveSampler` takes them); the
            ranks share them once, and each root's tree holds only nodes
            not later than the root's own time (PyG's ``time_attr``
            semantics).
        temporal_strategy (str): ``'uniform'`` or ``'last'``, as in
            :class:`~pyg_fastload.FastNeighborSampler`.
    """
    concurrent_batches = False  # a collective per batch, in order
    book: Union[PartitionBook, HeteroPartitionBook]

    def __init__(self, topology: Any, book: Union[PartitionBook,
                                                   HeteroPartitionBook],
                 part: int, collectives: Collectives, num_neighbors: Any,
                 replace: bool = False, merges: int = 0,
                 merge_search: bool = False, node_time: Any = None,
                 temporal_strategy: str = 'uniform', **options: Any):
        if collectives.world_size != book.num_parts:
            raise ValueError(f'{book.num_parts} parts but world size '
                             f'{collectives.world_size}')
        world = collectives.world_size
        if not 0 <= merges < world:
            raise ValueError(f"'merges' = {merges} must lie in [0, "
                             f"{world - 1}] with {world} ranks")
        super().__init__(topology, num_neighbors,  # type: ignore
                         replace=replace, disjoint=True, **options)
        self.book = book
        self.part = part
        self.collectives = collectives
        self.merges = merges
        self.search = MergeSearch(world) if merge_search else None
        self.batches_per_epoch: Optional[int] = None
        self.load: List[int] = []
        self.locality: Dict[str, float] = dict.fromkeys(
            ('rows', 'local', 'remote', 'remote_per_step', 'requests',
             'requests_per_step'), 0.0)
        self._calls = 0
        # The epoch the search times (its first call, its last one so far).
        self._epoch: Optional[int] = None
        self._epoch_started: Optional[float] = None
        self._last_call: Optional[float] = None
        if node_time is not None:
            self.temporal_strategy, _ = check_strategy(
                temporal_strategy, 'node_time', True)
            self.time_attr = 'node_time'
            self.temporal = self.whole_times(node_time)

    def whole_times(self, node_time: Any) -> TemporalIndex:
        r"""The whole topology's in-edges sorted by their sources' times,
        every part's :obj:`node_time` shared (a collective; by node type,
        a homogeneous graph's one type :obj:`None`)."""
        times = share_node_times(self.collectives, self.book, self.part,
                                 node_time)
        if not self.book.hetero:
            return TemporalIndex.of(self.topology, times[None], 'node')
        index, self.untimed_types = node_time_index(self.topology, times)
        return index

    @property
    def time_steps(self) -> int:
        r"""Time steps per iteration (world size minus merges)."""
        return self.collectives.world_size - self.merges

    def route(self, roots: Tensor, root_type: Optional[str] = None
              ) -> tuple:
        r"""Sends each root (of node type :obj:`root_type` on a
        heterogeneous graph) to the rank its model trains it on; returns
        the roots received (grouped by time step) and ``step_ptr``."""
        roots = roots.long()
        world, rank = self.collectives.world_size, self.collectives.rank
        steps = (self.book.of_group(root_type).owner(roots) - rank) % world
        removed: List[int] = []
        if self.merges:
            counts = torch.bincount(steps, minlength=world)
            table = torch.stack(self.collectives.exchange(
                [counts] * world, 'control', 'share the roots per step'))
            # R[m][t]: every model's roots per step, the same on every rank
            removed = merge_order(table, self.merges)
            steps = assign_steps(steps, removed, world)
        dest = (steps + rank) % world
        order = torch.argsort(dest, stable=True)
        sizes = torch.bincount(dest, minlength=world)
        got = self.collectives.exchange(
            list(roots[order].split(sizes.tolist())), 'sampling',
            'route the roots to their ranks')
        # rank i's step t trains model (i - t) % N: origins in step order
        alive = [t for t in range(world) if t not in removed]
        groups = [got[(rank - t) % world] for t in alive]
        ptr = torch.tensor([0] + [g.numel() for g in groups]).cumsum(0)
        return torch.cat(groups), ptr

    def sample_from_nodes(self, inputs: NodeSamplerInput,
                          **kwargs: Any) -> Any:
        if inputs.time is not None:
            raise ValueError("'input_time': HopGNN's root router samples "
                             "each root at its own node time (routing "
                             "moves the roots, not given times): leave "
                             "input_time out")
        self._epoch_clock()
        self.collectives.begin_batch()
        roots, ptr = self.route(inputs.node, inputs.input_type)
        self.load.append(roots.numel())
        out = self.micrographs(roots, inputs.input_type,
                               kwargs.get('generator'))
        self._count_locality(out, ptr)
        out.metadata = (roots, None, {'step_ptr': ptr})
        return out

    def micrographs(self, roots: Tensor, root_type: Optional[str],
                    generator: Optional[torch.Generator]) -> Any:
        r"""One disjoint tree per root (of :obj:`root_type`)."""
        raise NotImplementedError

    def node_groups(self, out: Any) -> Iterator[Tuple[PartitionBook, Tensor,
                                                      Tensor]]:
        r"""``(book, node ids, root of each)`` of a batch's nodes, one
        triple per node type."""
        raise NotImplementedError

    def _count_locality(self, out: Any, ptr: Tensor) -> None:
        r"""Rows of this iteration's micrographs: local, remote (fetched
        once per iteration), and what fetching per time step would
        fetch (requests: to every owner, for all node types at once)."""
        world = self.collectives.world_size
        stat = self.locality
        owners = []
        for book, node, root in self.node_groups(out):
            owner = book.owner(node)
            remote = owner != self.part
            node_step = torch.searchsorted(ptr, root, right=True) - 1
            rows = torch.unique(node)  # the owner decides local or remote
            remote_rows = int((book.owner(rows) != self.part).sum())
            keys = torch.unique(node_step[remote] * book.num_nodes
                                + node[remote])
            owners.append(node_step[remote] * world + owner[remote])
            stat['rows'] += rows.numel()
            stat['local'] += rows.numel() - remote_rows
            stat['remote'] += remote_rows
            stat['remote_per_step'] += keys.numel()
        per_step_owner = torch.unique(torch.cat(owners))
        stat['requests'] += int(torch.unique(per_step_owner % world).numel())
        stat['requests_per_step'] += per_step_owner.numel()

    def _epoch_clock(self) -> None:
        r"""Times the epochs from this stage's calls (validation between
        epochs excluded); at each epoch boundary the search takes the
        slowest rank's time and sets the next epoch's merges."""
        now = time.perf_counter()
        if self.search is None or not self.batches_per_epoch:
            return
        epoch = self._calls // self.batches_per_epoch
        if epoch != self._epoch:  # the first call of an epoch
            if self._epoch is not None:  # the one before has ended
                mine = torch.tensor([self._last_call - self._epoch_started])
                seconds = torch.cat(self.collectives.exchange(
                    [mine] * self.collectives.world_size, 'control',
                    'agree on the epoch time')).max()
                self.merges = self.search.epoch_done(float(seconds))
            self._epoch, self._epoch_started = epoch, now
        self._calls += 1
        self._last_call = now

    def state_dict(self) -> Dict[str, Any]:
        r"""What a resumed run continues from (saved with the loader's
        place in its epochs): the merges, the merge search's epochs and
        the time of the epoch it is timing so far."""
        search = self.search
        return {'merges': self.merges, 'epoch': self._epoch,
                'seconds': 0.0 if self._epoch is None else
                self._last_call - self._epoch_started,
                'search': None if search is None else {
                    'merges': search.merges, 'done': search.done,
                    'history': [dict(h) for h in search.history]}}

    def load_state_dict(self, state: Dict[str, Any], batches: int) -> None:
        r"""Continues from :obj:`state` (:meth:`state_dict`'s) before the
        training loader's :obj:`batches`-th batch (counted over its epochs:
        calls sampled ahead of it are made again)."""
        self.merges = state['merges']
        if self.search is not None and state['search'] is not None:
            self.search.merges = state['search']['merges']
            self.search.done = state['search']['done']
            self.search.history = [dict(h) for h in state['search'][
                'history']]
        self._calls, self._epoch = batches, state['epoch']
        self._last_call = time.perf_counter()
        self._epoch_started = self._last_call - state['seconds']

    def stats(self) -> Dict[str, Any]:
        r"""Per-iteration feature locality summed so far (rows of the
        micrographs, local, remote fetched once per iteration, remote as
        fetched per time step, owner requests both ways), the time steps and
        the merge search's epochs."""
        out: Dict[str, Any] = dict(self.locality)
        out['time_steps'] = self.time_steps
        if self.search is not None:
            out['search'] = list(self.search.history)
        return out

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}(part={self.part}, '
                f'num_neighbors={self.num_neighbors}, '
                f'time_steps={self.time_steps})')


class RootRouter(RootRouting, FastNeighborSampler):
    r"""HopGNN's root router on a homogeneous graph (see
    :class:`RootRouting`): micrographs drawn by
    :class:`~pyg_fastload.sampling.FastNeighborSampler` over the whole
    :class:`~pyg_fastload.graph.CSCTopology` in new ids."""
    def micrographs(self, roots: Tensor, root_type: Optional[str],
                    generator: Optional[torch.Generator]) -> SamplerOutput:
        return self.sample(roots, generator, self.seed_time(roots, None))

    def node_groups(self, out: SamplerOutput) -> Iterator[
            Tuple[PartitionBook, Tensor, Tensor]]:
        yield self.book, out.node, out.batch


class HeteroRootRouter(RootRouting, HeteroNeighborSampler):
    r"""HopGNN's root router on a heterogeneous graph (see
    :class:`RootRouting`): roots of the labelled type go to the rank that
    owns their features; micrographs over every relation are drawn by
    :class:`~pyg_fastload.sampling.HeteroNeighborSampler` over the whole
    :class:`~pyg_fastload.graph.HeteroTopology` in typed new ids, in PyG's
    per-type layout (``batch`` per type gives every node's root)."""
    def micrographs(self, roots: Tensor, root_type: Optional[str],
                    generator: Optional[torch.Generator]
                    ) -> HeteroSamplerOutput:
        return self.sample_hetero(root_type, roots, generator)

    def node_groups(self, out: HeteroSamplerOutput) -> Iterator[
            Tuple[PartitionBook, Tensor, Tensor]]:
        for node_type, node in out.node.items():
            yield self.book.of_group(node_type), node, out.batch[node_type]
