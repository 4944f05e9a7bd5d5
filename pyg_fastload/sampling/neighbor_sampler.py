r"""Node-wise multi-hop neighbour sampling behind PyG's ``BaseSampler``
contract, in vectorized tensor code."""
from __future__ import annotations

import threading
import warnings
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

import torch
from torch import Tensor
from torch_geometric.sampler import (
    BaseSampler,
    EdgeSamplerInput,
    NodeSamplerInput,
    SamplerOutput,
)
from torch_geometric.sampler.base import NegativeSampling, SubgraphType

from ..config import check_fanouts
from ..graph.convert import topology_of
from ..graph.kind import is_hetero
from ..graph.ranges import expand_ranges
from ..graph.topology import index_dtype_for
from ..placement import check_shared_memory
from .link import EdgeKeys, LabelEnds, sample_edges
from .ops import arange_as, sample_uniform, sample_weighted
from .relabel import DenseRelabeler, SortedRelabeler
from .tasks import CHUNK_NODES, Steps, Work, chunk_bounds, current_runner
from .temporal import (TemporalIndex, check_strategy, seed_times,
                       temporal_index)

__all__ = ['FastNeighborSampler', 'HopSampler']

#: Seeds of the batch whose sampling scratch a topology moved to a GPU
#: leaves free memory for, unless the sampler is told its batch size.
SCRATCH_BATCH_SIZE = 1024
#: Bytes a batch's sampling holds at once per edge it draws (or weighs)
#: and per node it reaches, at most: positions, neighbours, counts, keys
#: and local ids in ``int64``, the rows, columns and edge ids kept across
#: hops and joined at the end (with their reverses for a bidirectional
#: subgraph). Measured on the CPU (``tests/sampling/test_scratch.py``,
#: with torch's profiler): at most 100 bytes, for a bidirectional subgraph
#: of disjoint trees; the rest is room for the GPU's caching allocator,
#: which rounds every block up to 512 bytes.
SCRATCH_BYTES_PER_EDGE = 160
#: Index entries whose differences are taken at once to find the widest
#: in-edge list.
_WIDEST_CHUNK = 2**24


def _widest(indptr: Tensor) -> int:
    r"""The most in-edges one segment of :obj:`indptr` has (in chunks:
    no copy of the whole index)."""
    most = 0
    for start in range(0, indptr.numel() - 1, _WIDEST_CHUNK):
        part = indptr[start:start + _WIDEST_CHUNK + 1]
        most = max(most, int(part.diff().max()))
    return most


def _seed_generator(generator: Optional[torch.Generator],
                    device: torch.device) -> torch.Generator:
    r"""A fresh generator on :obj:`device` (the topology's: a CUDA sampler
    draws there), seeded from :obj:`generator` (or torch's global RNG), so
    every batch's randomness is fixed when the batch is created."""
    seed = int(torch.randint(0, 2**62, (1, ), generator=generator,
                             device=_device_of(generator)))
    return torch.Generator(device).manual_seed(seed)


def _device_of(generator: Optional[torch.Generator]) -> torch.device:
    r"""Where :obj:`generator` draws (torch's global RNG: the CPU)."""
    return torch.device('cpu') if generator is None else generator.device


def _per_node(counts: Tensor, owner: Optional[Tensor], nodes: int
              ) -> Tensor:
    r"""The draws of each of :obj:`nodes` frontier nodes from the
    :obj:`counts` of their segments (:obj:`owner`: each segment's node;
    :obj:`None`: a node's one segment)."""
    if owner is None:
        return counts
    return counts.new_zeros(nodes).index_add_(0, owner, counts)


_TWINS: Dict[type, type] = {}


def _twin(cls: type, typed: type) -> type:
    r"""The heterogeneous class of :obj:`cls`, a subclass of a sampler
    whose heterogeneous class is :obj:`typed`: ``cls`` before ``typed``
    (made once)."""
    if cls not in _TWINS:
        _TWINS[cls] = type(cls.__name__, (cls, typed),
                           {'__module__': cls.__module__,
                            '__qualname__': cls.__qualname__})
    return _TWINS[cls]


class HopSampler(BaseSampler):
    r"""Shared hop-by-hop engine: subclasses check their fan-outs
    (:meth:`_take_fanouts`) and decide how many and which in-edges each
    frontier node draws per hop (:meth:`draw`).

    Args:
        data: a :class:`~torch_geometric.data.Data`, a ``(FeatureStore,
            GraphStore)`` tuple or a :class:`~pyg_fastload.CSCTopology`.
        fanouts: what each hop draws, as the subclass takes it (node-wise
            fan-outs, per relation, or layer sizes).
        subgraph_type (str): ``'directional'`` (sampled edges only),
            ``'bidirectional'`` (sampled edges and their reverses) or
            ``'induced'`` (every edge between sampled nodes).
        disjoint (bool): give every seed its own tree (nodes are repeated
            across trees; :obj:`batch` tells the tree of every node).
        weight_attr (str, optional): edge attribute used as sampling weight.
        share_memory (bool): move the topology to shared memory.
        device (torch.device or str, optional): where the topology lives and
            sampling runs (default: where :obj:`data`'s topology is, the
            CPU unless a :class:`~pyg_fastload.CSCTopology` on a GPU was
            given); batches' ids are returned there.
        batch_size (int): seeds of one batch: a topology moved to a GPU
            leaves the free memory its sampling takes
            (:meth:`scratch_bytes`), or is refused.
    """
    def __init__(
        self,
        data: Any,
        fanouts: Any,
        subgraph_type: Union[SubgraphType, str] = 'directional',
        disjoint: bool = False,
        weight_attr: Optional[str] = None,
        share_memory: bool = False,
        device: Optional[Union[str, torch.device]] = None,
        batch_size: int = SCRATCH_BATCH_SIZE,
    ):
        self.topology = topology_of(data, weight_attr)
        self.num_hops = self._take_fanouts(fanouts)
        try:
            self.subgraph_type = SubgraphType(subgraph_type)
        except ValueError:
            raise ValueError(
                f"'subgraph_type={subgraph_type!r}' is not one of "
                f"'directional', 'bidirectional', 'induced'") from None
        if disjoint and self.subgraph_type == SubgraphType.induced:
            raise ValueError("'disjoint=True' cannot be combined with "
                             "'subgraph_type=\"induced\"'")
        self.disjoint = bool(disjoint)
        if device is not None and torch.device(device).type != 'cpu':
            self.topology = self.topology.to(device,
                                             self.scratch_bytes(batch_size))
        if share_memory:
            check_shared_memory(self.topology.device)
            self.topology.share_memory_()
        self.weight_attr = weight_attr
        self.cum_weight: Optional[Tensor] = None
        if self.topology.edge_weight is not None:
            self.cum_weight = torch.cumsum(self.topology.edge_weight, 0)
        self._relabel_lock = threading.Lock()
        self._relabelers: List[DenseRelabeler] = []
        # Every relation's sorted edge keys for strict negatives (link
        # sampling), built on first use.
        self._edge_keys: Dict[Any, EdgeKeys] = {}
        #: In-edges sorted by time (temporal samplers only).
        self.temporal: Optional[TemporalIndex] = None

    def _take_fanouts(self, fanouts: Any) -> int:
        r"""Checks and keeps what every hop draws (the topology is
        built); returns the number of hops."""
        raise NotImplementedError

    def _hop_edges(self, hop: int, frontier: int, in_edges: int) -> int:
        r"""The most edges hop :obj:`hop` draws or weighs for
        :obj:`frontier` frontier nodes, which have at most :obj:`in_edges`
        in-edges."""
        raise NotImplementedError

    def _most_in_edges(self) -> int:
        r"""The most in-edges one node has."""
        return _widest(self.topology.indptr)

    def scratch_bytes(self, batch_size: int) -> int:
        r"""An upper estimate of what sampling one batch of
        :obj:`batch_size` seeds allocates where the topology is:
        :data:`SCRATCH_BYTES_PER_EDGE` for every edge its hops may draw or
        weigh and every node they may reach (hop by hop from the seeds,
        :meth:`_hop_edges`: a hop reaches at most the graph's nodes unless
        trees are disjoint, where nodes repeat; :obj:`n` frontier nodes
        have at most :obj:`n` times the largest in-degree in-edges, and
        distinct ones at most the graph's edges; an induced subgraph adds
        the in-edges of every node reached, a bidirectional one the
        reverse of every edge), the relabelling arrays (two ids per node
        of the graph, non-disjoint) and a weighted sampler's cumulative
        weights."""
        topo = self.topology
        most = self._most_in_edges()

        def in_edges(nodes: int) -> int:
            return nodes * most if self.disjoint else \
                min(nodes * most, topo.num_edges)
        frontier = nodes = batch_size
        edges = 0
        for hop in range(self.num_hops):
            drawn = self._hop_edges(hop, frontier, in_edges(frontier))
            frontier = drawn if self.disjoint else min(drawn, self.num_nodes)
            edges += drawn
            nodes += frontier
        if self.subgraph_type == SubgraphType.induced:
            edges += in_edges(nodes)
        elif self.subgraph_type == SubgraphType.bidirectional:
            edges *= 2
        relabel = 0 if self.disjoint else 2 * self.num_nodes * \
            index_dtype_for(self.num_nodes).itemsize
        weights = 0 if topo.edge_weight is None else \
            topo.edge_weight.numel() * topo.edge_weight.element_size()
        return (edges + nodes) * SCRATCH_BYTES_PER_EDGE + relabel + weights

    def _sample(self, start: Tensor, deg: Tensor, k: Union[int, Tensor],
                replace: bool, generator: Optional[torch.Generator]
                ) -> Tuple[Tensor, Tensor]:
        r"""``(positions, counts)``: up to :obj:`k` (one count for all, or
        one per segment) of the in-edges ``[start, start + deg)`` of every
        segment, uniformly or by the topology's edge weights."""
        if self.cum_weight is None:
            return sample_uniform(start, deg, k, replace, generator)
        return sample_weighted(start, deg, k, replace, self.cum_weight,
                               self.topology.edge_weight, generator)

    @property
    def num_nodes(self) -> int:
        return self.topology.num_nodes

    @property
    def device(self) -> torch.device:
        r"""Where sampling runs and batches' ids are returned: the
        topology's device."""
        return self.topology.device

    @property
    def edge_permutation(self) -> None:
        return None  # `SamplerOutput.edge` already holds original edge ids.

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state.pop('_relabel_lock')
        state['_relabelers'] = []
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._relabel_lock = threading.Lock()

    def _checkout(self) -> Union[DenseRelabeler, SortedRelabeler]:
        r"""A relabeler for one batch (dense ones are recycled: a batch's
        hops may run on several threads, one at a time). Its buffers are
        normal tensors even when made under ``torch.inference_mode`` (a
        prediction loop's), so a thread outside it may reuse them."""
        if self.disjoint:
            return SortedRelabeler(self.device)
        with self._relabel_lock:
            if self._relabelers:
                return self._relabelers.pop()
        with torch.inference_mode(False):
            return DenseRelabeler(self.num_nodes, self.device)

    def _checkin(self, relabeler: Union[DenseRelabeler,
                                        SortedRelabeler]) -> None:
        r"""Hands back a batch's relabeler (emptied)."""
        relabeler.reset()
        if isinstance(relabeler, DenseRelabeler):
            with self._relabel_lock:
                self._relabelers.append(relabeler)

    def draw(self, hop: int, start: Tensor, deg: Tensor,
             generator: torch.Generator) -> Tuple[Tensor, Tensor]:
        r"""CSC positions drawn for every frontier node at :obj:`hop`,
        grouped by frontier node, and the number drawn per node."""
        raise NotImplementedError

    def expand(self, hop: int, frontier: Tensor,
               generator: Optional[torch.Generator]
               ) -> Tuple[Tensor, Tensor, Tensor]:
        r"""One hop: ``(neighbours, counts, edges)``, the sampled
        in-neighbours of every frontier node (grouped by frontier node, in
        frontier order), how many each drew, and the CSC position of every
        sampled edge. A distributed sampler overrides this."""
        topo = self.topology
        start = topo.indptr.index_select(0, frontier)
        deg = topo.indptr.index_select(0, frontier + 1) - start
        pos, counts = self.draw(hop, start, deg, generator)
        return topo.indices.index_select(0, pos).long(), counts, pos

    def expand_in_time(self, hop: int, frontier: Tensor, time: Tensor,
                       generator: Optional[torch.Generator]
                       ) -> Tuple[Tensor, Tensor, Tensor]:
        r"""One temporal hop: as :meth:`expand`, drawing only in-edges not
        later than each frontier node's seed time :obj:`time`."""
        raise NotImplementedError(f"{type(self).__name__} does not sample "
                                  f"in time")

    # PyG's BaseSampler contract ##############################################

    def sample_from_nodes(self, inputs: NodeSamplerInput,
                          **kwargs: Any) -> Any:
        generator = _seed_generator(kwargs.get('generator'), self.device)
        seeds = self.global_seeds(inputs.input_type, inputs.node)
        out = self.sample_global(seeds, generator,
                                 self.seed_time(seeds, inputs.time))
        out.metadata = (inputs.input_id, inputs.time)
        return out

    def global_seeds(self, input_type: Any, seeds: Tensor) -> Tensor:
        r"""Seeds of the node type :obj:`input_type` (ids of their type)
        among all the graph's nodes; a homogeneous graph's one type holds
        them all."""
        return seeds

    def seed_time(self, seeds: Tensor, time: Optional[Tensor],
                  name: str = 'input_time') -> Optional[Tensor]:
        r"""The time of every seed for a temporal sampler (:obj:`time`, or
        the seeds' node times); ``None`` otherwise."""
        if self.temporal is None:
            if time is not None:
                raise ValueError(f"{name!r} was given but the sampler is not "
                                 f"temporal: set 'time_attr' too")
            return None
        if time is not None:
            time = self.temporal.cast(time, f"'{name}'").to(self.device)
        return seed_times(time, seeds.long().to(self.device),
                          self.temporal.node_time, name)

    def sample_from_edges(self, inputs: EdgeSamplerInput,
                          neg_sampling: Optional[NegativeSampling] = None,
                          **kwargs: Any) -> Any:
        r"""Samples around the label edges of :obj:`inputs` (of the edge
        type ``input_type`` on a heterogeneous graph) and their negatives
        (:func:`~pyg_fastload.sampling.link.sample_edges`), drawing from
        ``generator`` if given; ``strict=True``: no negative is a true
        edge."""
        return sample_edges(self, inputs, neg_sampling,
                            _seed_generator(kwargs.get('generator'),
                                            self.device),
                            bool(kwargs.get('strict')))

    def label_ends(self, input_type: Any) -> LabelEnds:
        r"""Where the label edges of the edge type :obj:`input_type` end
        among the node ids; a homogeneous graph is one node type and one
        relation, named by no edge type."""
        if input_type is not None:
            raise ValueError(f"link sampling got 'input_type="
                             f"{input_type!r}' but the graph is "
                             f"homogeneous (one relation): give the label "
                             f"edges without an edge type")
        return LabelEnds((0, self.num_nodes), (0, self.num_nodes), True)

    def edge_keys(self, input_type: Any) -> EdgeKeys:
        r"""The edge keys of :obj:`input_type`'s relation (strict
        negatives), built on first use."""
        key = None if input_type is None else tuple(input_type)
        if key not in self._edge_keys:
            self._edge_keys[key] = EdgeKeys(*self._relation(key))
        return self._edge_keys[key]

    def _relation(self, edge_type: Any) -> Tuple[Any, int]:
        r"""The CSC topology of :obj:`edge_type`'s relation and its source
        node count (a homogeneous graph: the graph)."""
        return self.topology, self.num_nodes

    def sample_global(self, seeds: Tensor,
                      generator: Optional[torch.Generator] = None,
                      seed_time: Optional[Tensor] = None,
                      trees: Optional[int] = None) -> Any:
        r"""Samples around :obj:`seeds`, ids among all the graph's nodes
        (of any types), at :obj:`seed_time` for a temporal sampler, in the
        layout of the graph's kind (:meth:`_typed`). :obj:`trees`: every
        disjoint tree belongs to its seed's position modulo :obj:`trees`
        (PyG's link batches: a label edge's negatives join its positive's
        tree)."""
        out = self.sample(seeds, generator, seed_time)
        if trees is not None:
            out.batch = out.batch % trees
        return self._typed(out)

    def _typed(self, out: SamplerOutput) -> Any:
        r""":obj:`out` in the layout of the graph's kind (a homogeneous
        graph's is :meth:`sample`'s)."""
        return out

    # The engine ##############################################################

    def sample(self, seeds: Tensor,
               generator: Optional[torch.Generator] = None,
               seed_time: Optional[Tensor] = None) -> SamplerOutput:
        r"""Samples the multi-hop neighbourhood of :obj:`seeds` (with
        :obj:`seed_time`, temporal samplers draw only neighbours not later
        than the time of the seed whose tree they join): the task graph
        :meth:`steps`, run by the thread's
        :func:`~pyg_fastload.sampling.tasks.current_runner`.

        Returns:
            A :class:`~torch_geometric.sampler.SamplerOutput` in PyG's
            layout: ``node`` holds the seeds first, then the nodes reached
            for the first time hop by hop; ``row``/``col`` are local indices
            of the source (neighbour) and destination of every sampled edge;
            ``edge`` the original edge ids.
        """
        runner = current_runner()
        return runner.drive(self.steps(seeds, generator, seed_time,
                                       runner.wants_costs))

    def steps(self, seeds: Tensor,
              generator: Optional[torch.Generator] = None,
              seed_time: Optional[Tensor] = None,
              costed: bool = False) -> Steps:
        r"""The batch :meth:`sample` returns, as ByteGNN's task graph: one
        :class:`~pyg_fastload.sampling.tasks.Work` step per hop (its draw
        tasks, and the rows the previous hop reached first), then one with
        the last hop's rows; :obj:`costed`: fill in the draws' costs (their
        frontier's neighbour count, :meth:`hop_cost`) and the rows."""
        device = self.device
        seeds = seeds.reshape(-1).long().to(device)
        num_nodes = self.num_nodes
        if seeds.numel() > 0 and (int(seeds.min()) < 0
                                  or int(seeds.max()) >= num_nodes):
            raise IndexError(f"seed node ids must lie in [0, {num_nodes}), "
                             f"got ids from {int(seeds.min())} to "
                             f"{int(seeds.max())}")
        movable = self.hop_tasks
        relabeler = self._checkout()
        keys = seeds
        if self.disjoint:
            keys = arange_as(seeds) * num_nodes + seeds
        try:
            relabeler.insert_seeds(keys)
            node_keys: List[Tensor] = [keys]
            frontier = rows = seeds
            frontier_local = arange_as(seeds)
            frontier_batch = arange_as(seeds)
            rows_list, cols, edges = [], [], []
            num_sampled_nodes = [seeds.numel()]
            num_sampled_edges = []
            for hop in range(self.num_hops):
                tasks, costs, join = self._hop_tasks(
                    hop, frontier, None if seed_time is None
                    else seed_time[frontier_batch], generator, costed)
                nbr, counts, pos = join((yield Work(
                    tasks, costs, rows if costed else None, movable)))
                col = torch.repeat_interleave(frontier_local, counts,
                                              output_size=pos.numel())
                nbr_keys = nbr
                if self.disjoint:
                    tree = torch.repeat_interleave(frontier_batch, counts,
                                                   output_size=pos.numel())
                    nbr_keys = tree * num_nodes + nbr
                row, new = relabeler.insert(nbr_keys)
                rows_list.append(row)
                cols.append(col)
                edges.append(pos)
                node_keys.append(new)
                num_sampled_nodes.append(new.numel())
                num_sampled_edges.append(pos.numel())
                rows = torch.remainder(new, num_nodes) if self.disjoint \
                    else new
                if self.walks:  # every walker goes on from where it is
                    frontier_local, frontier = row, nbr
                    if self.disjoint:
                        frontier_batch = tree
                    continue
                frontier_local = torch.arange(
                    relabeler.num_local - new.numel(), relabeler.num_local,
                    device=device)
                if self.disjoint:
                    frontier_batch = torch.div(new, num_nodes,
                                               rounding_mode='floor')
                frontier = rows
            if costed:  # the last hop's rows
                yield Work([], [], rows, movable)
        finally:
            self._checkin(relabeler)

        all_keys = torch.cat(node_keys)
        batch = None
        if self.disjoint:
            batch = torch.div(all_keys, num_nodes, rounding_mode='floor')
            node = all_keys - batch * num_nodes
        else:
            node = all_keys
        none = torch.empty(0, dtype=torch.long, device=device)  # zero hops
        row, col, pos = (torch.cat(part or [none])
                         for part in (rows_list, cols, edges))
        if self.subgraph_type == SubgraphType.induced:
            row, col, pos = self._induced_edges(node)
            num_sampled_edges = None
        if self.walks:  # a revisited node was expanded at several hops,
            # which per-hop trimming (``trim_to_layer``) cannot tell
            num_sampled_nodes = num_sampled_edges = None
        edge = self._edge_ids(pos)
        out = SamplerOutput(node=node, row=row, col=col, edge=edge,
                            batch=batch, num_sampled_nodes=num_sampled_nodes,
                            num_sampled_edges=num_sampled_edges)
        if self.subgraph_type == SubgraphType.bidirectional and \
                self.adds_reverse_edges:
            out = out.to_bidirectional()
        return out

    def hop_cost(self, frontier: Tensor) -> float:
        r"""ByteGNN's cost of drawing one hop for :obj:`frontier`: the
        number of in-edges of its nodes (a degree sum over their CSC
        segments, every relation's on a typed graph)."""
        segment, _, _ = self._segments(frontier)
        indptr = self.topology.indptr
        return float((indptr.index_select(0, segment + 1) -
                      indptr.index_select(0, segment)).sum())

    def _hop_tasks(self, hop: int, frontier: Tensor,
                   time: Optional[Tensor],
                   generator: Optional[torch.Generator], costed: bool
                   ) -> Tuple[List[Callable[[], Any]], List[float],
                              Callable[[List[Any]], Tuple[Tensor, Tensor,
                                                          Tensor]]]:
        r"""One hop's draw tasks (:meth:`expand`, or :meth:`expand_in_time`
        with seed times), their costs (zeros unless :obj:`costed`) and how
        their results join into ``(neighbours, counts, edges)``: one task,
        or, for a frontier above :data:`~pyg_fastload.sampling.tasks.
        CHUNK_NODES` nodes, one per chunk, each drawing from its own
        generator seeded from :obj:`generator` (ByteGNN's tasks)."""
        def draw(nodes: Tensor, when: Optional[Tensor],
                 gen: Optional[torch.Generator]
                 ) -> Tuple[Tensor, Tensor, Tensor]:
            if when is None:
                return self.expand(hop, nodes, gen)
            return self.expand_in_time(hop, nodes, when, gen)

        if not (self.hop_tasks and self.concurrent_batches) or \
                frontier.numel() <= CHUNK_NODES:
            return ([lambda: draw(frontier, time, generator)],
                    [self.hop_cost(frontier) if costed else 0.0],
                    lambda out: out[0])
        base = int(torch.randint(0, 2**62, (1, ), generator=generator,
                                 device=_device_of(generator)))

        def task(i: int, cut: slice) -> Callable[[], Any]:
            def run() -> Tuple[Tensor, Tensor, Tensor]:
                gen = torch.Generator(self.device).manual_seed(base + i)
                return draw(frontier[cut], None if time is None
                            else time[cut], gen)
            return run

        cuts = [slice(part.start, part.stop)
                for part in chunk_bounds(frontier.numel(), CHUNK_NODES)]
        return ([task(i, cut) for i, cut in enumerate(cuts)],
                [self.hop_cost(frontier[cut]) if costed else 0.0
                 for cut in cuts],
                lambda out: tuple(torch.cat(x) for x in zip(*out)))

    #: Whether every sampled neighbour is the next hop's frontier (a
    #: walker's next position, a node seen before included), rather than
    #: only the nodes reached for the first time.
    walks = False

    #: Whether a hop's frontier may be split into tasks drawn apart (every
    #: frontier node draws alone; a layer-wise draw spans the frontier).
    hop_tasks = True

    def _edge_ids(self, pos: Tensor) -> Tensor:
        r"""The ids a batch reports for the CSC positions :obj:`pos`: the
        original edge ids."""
        edge_id = self.topology.edge_id
        return pos if edge_id is None else edge_id.index_select(0, pos).long()

    #: Whether several threads may sample batches at once (each thread has
    #: its own relabelling state; a sampler issuing collectives may not).
    concurrent_batches = True

    @classmethod
    def gives_edge_weight(cls, **options: Any) -> bool:
        r"""Whether the sampler built with :obj:`options` puts estimator
        weights on its batches' edges (``edge_weight``), which a model
        must aggregate with."""
        return False

    @classmethod
    def reach(cls, num_hops: int, **options: Any) -> Optional[int]:
        r"""How many hops of in-edges from its seeds a batch of
        :obj:`num_hops` hops reads, built with :obj:`options`: the
        frontiers of its hops (:obj:`None`: a batch drawn anywhere in the
        graph)."""
        return num_hops

    #: Whether a hop's draw reads one variate per source vertex, which the
    #: ranks of a collective sampler must share (their ``batch_seed``).
    shared_variates = False

    #: Whether :meth:`sample` adds the reverse of every sampled edge for
    #: ``subgraph_type='bidirectional'`` (a subclass may do it later).
    adds_reverse_edges = True

    def _induced_edges(self, node: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
        r"""Every edge of the graph between two nodes of :obj:`node`."""
        topo = self.topology
        relabeler = self._checkout()
        try:
            relabeler.insert_seeds(node)
            segment, _, owner = self._segments(node)
            start = topo.indptr[segment]
            deg = topo.indptr[segment + 1] - start
            pos = expand_ranges(start, deg)
            col = torch.repeat_interleave(
                arange_as(node) if owner is None else owner, deg,
                output_size=pos.numel())
            # Look up without inserting: unseen sources get local id -1.
            src = topo.indices[pos].long()
            row = relabeler.lookup(src)
            keep = row >= 0
        finally:
            self._checkin(relabeler)
        return row[keep], col[keep], pos[keep]

    def _segments(self, nodes: Tensor
                  ) -> Tuple[Tensor, Optional[Tensor], Optional[Tensor]]:
        r"""``(segments, relations, owners)``: the CSC segments of
        :obj:`nodes`' in-edges, the relation of each and the position of
        its node in :obj:`nodes`. A homogeneous graph is one relation: a
        node's one segment is the node (relations and owners
        :obj:`None`)."""
        return nodes, None, None


class FastNeighborSampler(HopSampler):
    r"""Node-wise neighbour sampler: at hop ``i`` every frontier node draws up
    to ``num_neighbors[i]`` of its in-neighbours (``-1``: all of them),
    uniformly or in proportion to :obj:`weight_attr`, with or without
    replacement. A drop-in for PyG's
    :class:`~torch_geometric.sampler.NeighborSampler` on homogeneous graphs
    that needs neither pyg-lib nor torch-sparse. Given a heterogeneous
    graph it is a :class:`~pyg_fastload.sampling.HeteroNeighborSampler`.

    Randomness comes from torch's global RNG (or a given ``generator``), so
    ``torch.manual_seed`` makes the batches reproducible.

    Args:
        data: a :class:`~torch_geometric.data.Data`, a ``(FeatureStore,
            GraphStore)`` tuple or a :class:`~pyg_fastload.CSCTopology`.
        num_neighbors (List[int]): fan-out per hop (``[]``: zero hops,
            the seeds alone).
        replace (bool): sample with replacement. (default: :obj:`False`)
        subgraph_type (str): ``'directional'``, ``'bidirectional'`` or
            ``'induced'``. (default: ``'directional'``)
        disjoint (bool): one tree per seed. (default: :obj:`False`)
        weight_attr (str, optional): edge attribute holding sampling weights.
        share_memory (bool): move the topology to shared memory.
        directed (bool): deprecated, ``False`` means ``'induced'``.
        device (torch.device or str, optional): where the topology lives and
            sampling runs (:class:`HopSampler`); on a GPU the random
            streams differ from the CPU's, so batches are equal in
            distribution, not draw for draw.
        batch_size (int): seeds of one batch, whose sampling scratch a
            move to a GPU leaves room for (:class:`HopSampler`).

    Example:
        >>> import torch
        >>> from torch_geometric.data import Data
        >>> from pyg_fastload import FastNeighborSampler
        >>> data = Data(edge_index=torch.tensor([[0, 1, 2, 3], [1, 2, 3, 0]]),
        ...             num_nodes=4)  # a cycle: one in-neighbour each
        >>> out = FastNeighborSampler(data, [1, 1]).sample(torch.tensor([3]))
        >>> out.node.tolist(), out.row.tolist(), out.col.tolist()
        ([3, 2, 1], [1, 2], [0, 1])
    """
    #: The class a heterogeneous graph gets when this class is named (the
    #: heterogeneous engine of the same draw; set beside that class). A
    #: subclass that names none gets its own: the subclass before it.
    typed_class: Optional[type] = None
    #: Node types without node times, whose seeds need input times (a
    #: heterogeneous graph's; a homogeneous graph's one type has them).
    untimed_types: List[str] = []

    def __new__(cls, data: Any = None, *args: Any,
                **kwargs: Any) -> 'FastNeighborSampler':
        typed = cls.typed_class
        if typed is not None and not issubclass(cls, typed) and \
                data is not None and is_hetero(data):
            cls = typed if 'typed_class' in cls.__dict__ else _twin(cls, typed)
        return super().__new__(cls)

    def __init__(
        self,
        data: Any,
        num_neighbors: List[int],
        replace: bool = False,
        subgraph_type: Union[SubgraphType, str] = 'directional',
        disjoint: bool = False,
        temporal_strategy: str = 'uniform',
        time_attr: Optional[str] = None,
        weight_attr: Optional[str] = None,
        is_sorted: bool = False,
        share_memory: bool = False,
        directed: bool = True,
        device: Optional[Union[str, torch.device]] = None,
        batch_size: int = SCRATCH_BATCH_SIZE,
    ):
        self.temporal_strategy, disjoint = check_strategy(
            temporal_strategy, time_attr, disjoint, weight_attr)
        self.time_attr = time_attr
        if not directed:
            warnings.warn("'directed=False' is deprecated, use "
                          "'subgraph_type=\"induced\"'", DeprecationWarning,
                          stacklevel=2)
            subgraph_type = SubgraphType.induced
        self.replace = bool(replace)
        super().__init__(data, num_neighbors, subgraph_type, disjoint,
                         weight_attr, share_memory, device, batch_size)
        if time_attr is not None:
            self.temporal, self.untimed_types = temporal_index(
                data, time_attr, self.topology)

    def _take_fanouts(self, fanouts: Any) -> int:
        self.num_neighbors = check_fanouts(fanouts, zero_hops=True)
        return len(self.num_neighbors)

    def _hop_fanout(self, hop: int) -> int:
        r"""The most in-edges one node draws at :obj:`hop` (``-1``: all)."""
        return self.num_neighbors[hop]

    def _hop_edges(self, hop: int, frontier: int, in_edges: int) -> int:
        fanout = self._hop_fanout(hop)
        if fanout < 0 or (self.topology.edge_weight is not None
                          and not self.replace):
            return in_edges  # all, or every candidate weighed
        return frontier * fanout if self.replace else \
            min(frontier * fanout, in_edges)

    def _fanouts(self, hop: int, relations: Optional[Tensor]
                 ) -> Union[int, Tensor]:
        r"""The fan-out of hop :obj:`hop` (one, or one per segment of the
        :obj:`relations`, :meth:`_segments`)."""
        return self.num_neighbors[hop]

    def expand(self, hop: int, frontier: Tensor,
               generator: Optional[torch.Generator]
               ) -> Tuple[Tensor, Tensor, Tensor]:
        topo = self.topology
        segment, relation, owner = self._segments(frontier)
        start = topo.indptr.index_select(0, segment)
        deg = topo.indptr.index_select(0, segment + 1) - start
        pos, counts = self.pick(hop, start, deg,
                                self._fanouts(hop, relation), topo.indices,
                                generator)
        return (topo.indices.index_select(0, pos).long(),
                _per_node(counts, owner, frontier.numel()), pos)

    def expand_in_time(self, hop: int, frontier: Tensor, time: Tensor,
                       generator: Optional[torch.Generator]
                       ) -> Tuple[Tensor, Tensor, Tensor]:
        index = self.temporal
        segment, relation, owner = self._segments(frontier)
        indptr = self.topology.indptr
        start = indptr.index_select(0, segment)
        deg = indptr.index_select(0, segment + 1) - start
        valid = index.valid_counts(segment, start, deg, time if owner is None
                                   else time.index_select(0, owner))
        k = self._fanouts(hop, relation)
        if self.temporal_strategy == 'last':  # the most recent ones
            kept = torch.as_tensor(k, device=valid.device)
            counts = torch.where(kept < 0, valid,
                                 torch.minimum(valid, kept))
            pos = expand_ranges(start + valid - counts, counts)
        else:
            pos, counts = self.pick(hop, start, valid, k, index.indices,
                                    generator)
        return (index.indices.index_select(0, pos),
                _per_node(counts, owner, frontier.numel()),
                index.positions.index_select(0, pos))

    def draw(self, hop: int, start: Tensor, deg: Tensor,
             generator: torch.Generator) -> Tuple[Tensor, Tensor]:
        return self.pick(hop, start, deg, self.num_neighbors[hop],
                         self.topology.indices, generator)

    def pick(self, hop: int, start: Tensor, deg: Tensor,
             k: Union[int, Tensor], indices: Tensor,
             generator: Optional[torch.Generator]
             ) -> Tuple[Tensor, Tensor]:
        r"""What hop :obj:`hop` draws: ``(positions, counts)``, up to
        :obj:`k` (one fan-out, or one per segment) of the in-edges
        ``[start, start + deg)`` of every segment (a frontier node, or a
        node and one of its relations), grouped by segment; the sources
        of the positions are in :obj:`indices`. Node-wise neighbour
        sampling here; another hop-wise sampler overrides it (the one
        method the homogeneous and heterogeneous engines, temporal or
        not, local or collective, call to draw)."""
        if isinstance(k, int):
            return self._sample(start, deg, k, self.replace, generator)
        return self._pick_each(start, deg, k, self.hop_fanouts[hop],
                               generator)

    def _pick_each(self, start: Tensor, deg: Tensor, k: Tensor,
                   values: List[int], generator: Optional[torch.Generator]
                   ) -> Tuple[Tensor, Tensor]:
        r"""Draws for every segment with its own fan-out :obj:`k` (one of
        :obj:`values`): one vectorized call per value, positions grouped
        by segment."""
        if len(values) == 1 and values[0] != 0:  # one fan-out everywhere
            return self._sample(start, deg, int(values[0]), self.replace,
                                generator)
        counts = torch.zeros_like(deg)
        draws = []
        for value in values:
            if value == 0:
                continue
            idx = (k == value).nonzero().view(-1)
            if idx.numel() == 0:
                continue
            pos, cnt = self._sample(start[idx], deg[idx], int(value),
                                    self.replace, generator)
            counts[idx] = cnt
            draws.append((idx, pos, cnt))
        offsets = torch.cumsum(counts, 0) - counts
        out = start.new_empty(int(counts.sum()))
        for idx, pos, cnt in draws:
            out[expand_ranges(offsets[idx], cnt)] = pos
        return out, counts

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}(num_neighbors='
                f'{self.num_neighbors}, replace={self.replace}, '
                f'subgraph_type={self.subgraph_type.value!r}, '
                f'disjoint={self.disjoint}, time_attr={self.time_attr!r})')
