r"""GraphSAINT (Zeng et al., ICLR 2020) subgraph samplers behind PyG's
``BaseSampler`` contract, in pure torch (PyG's
:class:`~torch_geometric.loader.GraphSAINTSampler` needs torch_sparse).

A batch is the subgraph induced by the nodes GraphSAINT draws (every edge
between them), drawn as PyG's samplers draw them:
:class:`SaintNodeSampler` (``GraphSAINTNodeSampler``) as many nodes as the
batch has seeds, in proportion to their out-degree (the sources of
uniformly drawn edges); :class:`SaintEdgeSampler`
(``GraphSAINTEdgeSampler``) as many edges, ``(u, v)`` in proportion to
``1 / deg_out(u) + 1 / deg_in(v)`` (the paper's; PyG's code computes
``deg_in(u) + deg_out(v)``), and their endpoints;
:class:`SaintRandomWalkSampler`
(``GraphSAINTRandomWalkSampler``) the nodes of a random walk from each
seed, along in-edges (the direction messages flow; PyG's walks follow
out-edges: the same on an undirected graph, which GraphSAINT assumes).

Normalisation (``sample_coverage > 0``), PyG's formulas: before the first
batch, subgraphs are drawn as the loader draws them (batches of its
``batch_size`` seeds from its seeds, in random order) until as many nodes
as ``sample_coverage`` times the graph's were drawn, counting how often
each node (``C_v``) and edge (``C_e``) was in one; ``node_norm = samples /
(C_v * num_nodes)`` (``C_v = 0`` read as 0.1) and ``edge_norm = C_u /
C_e`` for an edge from ``u`` (clamped to ``[0, 1e4]``, 0.1 where never
drawn). Where the seeds do not fill the last batch, its smaller subgraphs
get a normalisation of their own (unless the loader drops that batch,
``drop_last``), estimated likewise from batches of its size, from at
most as many subgraphs as the full batches' estimate drew (PyG draws a
fixed number of full batches, so has no last one; the full batches'
normalisation would weigh its nodes as if drawn as often, about halving
a half-full batch's loss). Batches carry ``node_norm`` and
``edge_norm`` as PyG's do (a PyG GraphSAINT training loop runs on them
unchanged), and ``loss_norm``: the
seeds' share of the graph's nodes, so that ``sum(node_norm * loss) /
loss_norm`` over a batch's seeds (the subgraph's nodes among the loader's
seeds, first) is an unbiased estimate of the mean loss over the loader's
seeds (:func:`~pyg_fastload.modes.contract.seed_loss`).
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Tuple, Union

import torch
from torch import Tensor
from torch_geometric.sampler import NodeSamplerInput, SamplerOutput
from torch_geometric.sampler.base import SubgraphType
from tqdm.auto import tqdm

from ..config import check_fanouts
from ..graph.kind import is_hetero
from .labor import labor_key
from .neighbor_sampler import SCRATCH_BATCH_SIZE, HopSampler, _device_of
from .random_walk import RandomWalkSampler

__all__ = ['SaintSampler', 'SaintNodeSampler', 'SaintEdgeSampler',
           'SaintRandomWalkSampler', 'SAMPLE_COVERAGE']

#: The default ``sample_coverage``: nodes drawn per node of the graph to
#: estimate the normalisation (PyG's default, 0, leaves it out).
SAMPLE_COVERAGE = 50
_GOLDEN = -7046029254386353131  # 0x9E3779B97F4A7C15 as a signed int64
#: PyG's bounds of ``edge_norm``, and its value for an edge never drawn.
_EDGE_NORM_MAX = 1e4
_UNSEEN = 0.1


class SaintSampler(HopSampler):
    r"""The GraphSAINT samplers' base (see the module's description): a
    batch is the subgraph induced by :meth:`subgraph_nodes`, its nodes among
    the loader's seeds first (``batch_size`` of them, with their
    ``input_id``), then the others; with ``sample_coverage``, its
    ``node_norm``, ``edge_norm`` and ``loss_norm``.

    A loader calls :meth:`prepare` with its seeds and batch size before its
    first batch (the normalisation is estimated for them), so a sampler
    serves one loader. Homogeneous graphs only, as PyG's GraphSAINT
    samplers (which take a ``Data``).

    Args:
        data: a ``Data``, a homogeneous ``(FeatureStore, GraphStore)``
            tuple or a :class:`~pyg_fastload.CSCTopology`.
        num_neighbors (List[int]): the loader's fan-outs: their number is
            the batches' hops (the random-walk sampler's default walk
            length); the subgraphs do not read them.
        sample_coverage (int): estimate the normalisation until this many
            nodes per node of the graph were drawn (0: none; PyG's default).
            (default: :data:`SAMPLE_COVERAGE`)
        seed (int): the seed of that estimate's draws.
        progress (bool): a progress bar while estimating (shown once it
            has run for a second).
        subgraph_type (str): ``'induced'`` (or the loaders' default
            ``'directional'``, read as it): GraphSAINT's subgraph.
        share_memory, device: as in
            :class:`~pyg_fastload.sampling.HopSampler`.
        replace, disjoint, time_attr, weight_attr, temporal_strategy,
        directed: the loaders' arguments, refused where they ask for what
            GraphSAINT does not do.
    """
    typed_class = None  # homogeneous graphs only

    def __init__(self, data: Any, num_neighbors: Any, *,
                 sample_coverage: int = SAMPLE_COVERAGE, seed: int = 0,
                 progress: bool = True, replace: bool = False,
                 subgraph_type: Union[SubgraphType, str] = 'directional',
                 disjoint: bool = False, time_attr: Optional[str] = None,
                 weight_attr: Optional[str] = None,
                 temporal_strategy: str = 'uniform',
                 share_memory: bool = False, directed: bool = True,
                 device: Optional[Union[str, torch.device]] = None,
                 batch_size: int = SCRATCH_BATCH_SIZE):
        name = type(self).__name__
        if is_hetero(data):
            raise ValueError(f"'data' is a heterogeneous graph: {name} "
                             f"samples homogeneous ones (as PyG's GraphSAINT "
                             f"samplers, which take a Data); sample it with "
                             f"neighbor_sampler='neighbor' or 'labor'")
        for key, value, fix in (
                ('replace', replace, 'its subgraph holds each drawn node '
                 'once'),
                ('disjoint', disjoint, 'a batch is one subgraph'),
                ('time_attr', time_attr, 'GraphSAINT does not sample in '
                 "time (use neighbor_sampler='neighbor', 'labor' or "
                 "'random_walk')"),
                ('weight_attr', weight_attr, 'GraphSAINT draws by degree, '
                 'not by edge weights (an edge attribute still reaches '
                 'the batches)')):
            if value:
                raise ValueError(f"'{key}={value!r}' with {name}: {fix}: "
                                 f"leave it out")
        if subgraph_type not in ('directional', 'induced',
                                 SubgraphType.directional,
                                 SubgraphType.induced):
            raise ValueError(f"'subgraph_type={subgraph_type!r}' with "
                             f"{name}: its subgraph is induced (every edge "
                             f"between its nodes): leave it out")
        if isinstance(sample_coverage, bool) or not isinstance(
                sample_coverage, int) or sample_coverage < 0:
            raise ValueError(f"'sample_coverage' must be an int >= 0 (nodes "
                             f"drawn per node to estimate the "
                             f"normalisation; 0: none), got "
                             f"{sample_coverage!r}")
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ValueError(f"'seed' must be an int, got {seed!r}")
        if not isinstance(progress, bool):
            raise ValueError(f"'progress' must be True or False, got "
                             f"{progress!r}")
        del directed, temporal_strategy  # (induced; no time)
        super().__init__(data, num_neighbors, 'induced', False, None,
                         share_memory, device, batch_size)
        self.sample_coverage = sample_coverage
        self.seed = seed
        self.progress = progress
        #: Where each node is among the loader's seeds (-1: not one), the
        #: seeds, batch size and drop_last prepared for, the seeds' share
        #: of the nodes (after prepare).
        self._position: Optional[Tensor] = None
        self._prepared: Optional[Tuple[Tensor, int, bool]] = None
        self.loss_norm = 1.0
        #: Per batch size drawn (the full batches', the last one's):
        #: per node, and per edge (CSC position), the normalisation.
        self.norms: Dict[int, Tuple[Tensor, Tensor]] = {}

    @property
    def node_norm(self) -> Optional[Tensor]:
        r"""The full batches' normalisation per node (after prepare)."""
        return self._full_norms()[0]

    @property
    def edge_norm(self) -> Optional[Tensor]:
        r"""The full batches' normalisation per edge (CSC position)."""
        return self._full_norms()[1]

    def _full_norms(self) -> Tuple[Optional[Tensor], Optional[Tensor]]:
        if self._prepared is None or not self.norms:
            return None, None
        seeds, batch_size, _ = self._prepared
        return self.norms[min(batch_size, seeds.numel())]

    def _take_fanouts(self, fanouts: Any) -> int:
        self.num_neighbors = check_fanouts(fanouts, zero_hops=True)
        return len(self.num_neighbors)

    def _hop_edges(self, hop: int, frontier: int, in_edges: int) -> int:
        return in_edges  # (a bound: the subgraph's edges are induced)

    @classmethod
    def gives_edge_weight(cls, **options: Any) -> bool:
        r"""With the normalisation, batches carry ``edge_norm``, which a
        model's aggregation weighs by."""
        return options.get('sample_coverage', SAMPLE_COVERAGE) > 0

    @classmethod
    def reach(cls, num_hops: int, **options: Any) -> Optional[int]:
        return None  # drawn over the whole graph

    def subgraph_nodes(self, seeds: Tensor,
                       generator: torch.Generator) -> Tensor:
        r"""The node ids GraphSAINT draws for a batch of :obj:`seeds` (a
        node may repeat)."""
        raise NotImplementedError

    # The loader's seeds and the normalisation ################################

    def prepare(self, inputs: Any, batch_size: int,
                drop_last: bool = False) -> None:
        r"""Takes the loader's seeds (:obj:`inputs`, a
        ``NodeSamplerInput``) and :obj:`batch_size`, and estimates the
        normalisation for them (``sample_coverage``); a loader calls it
        once, before its first batch.

        Args:
            inputs (NodeSamplerInput): the loader's seeds.
            batch_size (int): the seeds per batch.
            drop_last (bool): whether the loader drops its last, smaller
                batch (then no estimate is drawn for that batch's size).
        """
        name = type(self).__name__
        if not isinstance(inputs, NodeSamplerInput):
            raise self._links_refused()
        seeds = inputs.node.reshape(-1).long().to(self.device)
        if self._prepared is not None:
            done, size, dropped = self._prepared
            if size == batch_size and torch.equal(done, seeds) and \
                    (drop_last or not dropped):
                return
            raise ValueError(
                f"'neighbor_sampler' ({name}) estimated its normalisation "
                f"for another loader's seeds, batch size or drop_last: "
                f"give each loader its own (pass the sampler's name, which "
                f"each loader builds anew)")
        num_nodes = self.num_nodes
        position = torch.full((num_nodes, ), -1, dtype=torch.long,
                              device=self.device)
        position[seeds] = torch.arange(seeds.numel(), device=self.device)
        self._position = position
        self.loss_norm = seeds.numel() / max(num_nodes, 1)
        if self.sample_coverage and seeds.numel():
            generator = torch.Generator(self.device).manual_seed(self.seed)
            full = min(batch_size, seeds.numel())
            node_norm, edge_norm, drawn = self._estimate(seeds, full,
                                                         generator)
            self.norms[full] = (node_norm, edge_norm)
            last = seeds.numel() % batch_size
            if last and last != full and not drop_last:
                # from at most as many subgraphs as the full batches'
                node_norm, edge_norm, _ = self._estimate(seeds, last,
                                                         generator, drawn)
                self.norms[last] = (node_norm, edge_norm)
        self._prepared = (seeds, batch_size, drop_last)

    def _estimate(self, seeds: Tensor, size: int,
                  generator: torch.Generator, limit: Optional[int] = None
                  ) -> Tuple[Tensor, Tensor, int]:
        r"""``(node_norm, edge_norm, subgraphs drawn)`` (PyG's formulas)
        from subgraphs of batches of :obj:`size` of :obj:`seeds` (drawn
        from :obj:`generator`, at most :obj:`limit` of them: a small last
        batch's estimate costs no more than the full batches'), each drawn
        in random order as a shuffling loader draws them, one subgraph at
        a time: the counts (4 bytes per node and per edge) and one
        subgraph are all it holds."""
        device = self.device
        topo = self.topology
        num_nodes = self.num_nodes
        node_count = torch.zeros(num_nodes, dtype=torch.int32, device=device)
        edge_count = torch.zeros(topo.num_edges, dtype=torch.int32,
                                 device=device)
        per_pass = seeds.numel() // size
        target = num_nodes * self.sample_coverage
        drawn = samples = 0
        bar = tqdm(total=target, desc='GraphSAINT normalisation',
                   unit='node', disable=not self.progress, delay=1.0,
                   leave=False)
        while drawn < target and samples != limit:
            order = seeds.index_select(0, torch.randperm(
                seeds.numel(), generator=generator, device=device))
            for batch in order[:per_pass * size].view(per_pass, size):
                node = self.subgraph_nodes(batch, generator).unique()
                pos = self._induced_edges(node)[2]
                node_count[node] += 1
                edge_count[pos] += 1
                drawn += node.numel()
                samples += 1
                bar.update(node.numel())
                if drawn >= target or samples == limit:
                    break
        bar.close()
        count = node_count.float()
        edges = edge_count.float()
        edge_norm = (count[topo.indices.long()] / edges).clamp_(
            0, _EDGE_NORM_MAX)
        edge_norm[torch.isnan(edge_norm)] = _UNSEEN
        count[node_count == 0] = _UNSEEN
        return samples / count / num_nodes, edge_norm, samples

    # PyG's BaseSampler contract ##############################################

    def sample_from_nodes(self, inputs: NodeSamplerInput,
                          **kwargs: Any) -> SamplerOutput:
        r"""The subgraph of a batch of seeds (see the class), its draws from
        ``generator`` and the seeds (ranks sharing a generator's seed, but
        not their seeds, draw different subgraphs)."""
        if self._position is None:
            raise RuntimeError(f"{type(self).__name__} has no seeds yet: a "
                               f"loader calls prepare(inputs, batch_size) "
                               f"first")
        seeds = inputs.node.reshape(-1).long().to(self.device)
        generator = self._batch_generator(kwargs.get('generator'), seeds)
        node = self.subgraph_nodes(seeds, generator).unique()
        position = self._position.index_select(0, node)
        member = position >= 0
        node = torch.cat([node[member], node[~member]])
        row, col, pos = self._induced_edges(node)
        extra = {}
        if self.norms:  # a size of its own, else the full batches'
            node_norm, edge_norm = self.norms.get(seeds.numel(),
                                                  self._full_norms())
            extra = {'node_norm': node_norm.index_select(0, node),
                     'edge_norm': edge_norm.index_select(0, pos),
                     'loss_norm': self.loss_norm}
        return SamplerOutput(node=node, row=row, col=col,
                             edge=self._edge_ids(pos),
                             metadata=(position[member], None, extra))

    def sample_from_edges(self, inputs: Any, neg_sampling: Any = None,
                          **kwargs: Any) -> SamplerOutput:
        raise self._links_refused()

    def _links_refused(self) -> ValueError:
        return ValueError(
            f"'neighbor_sampler' ({type(self).__name__}) draws subgraphs "
            f"whose nodes carry the loss (node_norm), not the "
            f"neighbourhoods of label edges: sample links with "
            f"neighbor_sampler='neighbor', 'labor' or 'random_walk'")

    def _batch_generator(self, generator: Optional[torch.Generator],
                         seeds: Tensor) -> torch.Generator:
        r"""The batch's generator: seeded from a draw of :obj:`generator`
        (torch's global RNG without one) and the :obj:`seeds`."""
        draw = int(torch.randint(0, 2**62, (1, ), generator=generator,
                                 device=_device_of(generator)))
        mix = int((seeds * _GOLDEN).sum())  # (wraps around)
        return torch.Generator(self.device).manual_seed(
            labor_key(draw, mix) & (2**63 - 1))

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}(sample_coverage='
                f'{self.sample_coverage})')


class SaintNodeSampler(SaintSampler):
    r"""GraphSAINT's node sampler (PyG's ``GraphSAINTNodeSampler``): a
    batch of ``n`` seeds draws ``n`` nodes with replacement in proportion
    to their out-degree (the sources of ``n`` uniformly drawn edges) and is
    the subgraph they induce. See :class:`SaintSampler` for the arguments.

    Example:
        >>> import torch
        >>> from torch_geometric.data import Data
        >>> from pyg_fastload import FastNeighborLoader
        >>> star = Data(x=torch.randn(5, 4), edge_index=torch.tensor(
        ...     [[0, 0, 0, 0], [1, 2, 3, 4]]))  # 0 -> 1, 2, 3, 4
        >>> loader = FastNeighborLoader(star, [1], batch_size=3,
        ...                             neighbor_sampler='saint_node')
        >>> batch = next(iter(loader))  # 3 draws: 0, the only source
        >>> batch.n_id.tolist(), batch.num_edges, batch.node_norm.numel()
        ([0], 0, 1)
    """
    def __init__(self, data: Any, num_neighbors: Any, **options: Any):
        super().__init__(data, num_neighbors, **options)
        if self.topology.num_edges == 0:
            raise ValueError("'data' has no edges: GraphSAINT's node sampler "
                             "draws nodes by their edges")

    def subgraph_nodes(self, seeds: Tensor,
                       generator: torch.Generator) -> Tensor:
        edge = torch.randint(0, self.topology.num_edges, (seeds.numel(), ),
                             generator=generator, device=self.device)
        return self.topology.indices.index_select(0, edge).long()


class SaintEdgeSampler(SaintSampler):
    r"""GraphSAINT's edge sampler: a batch of ``n`` seeds draws ``n`` edges
    with replacement, edge ``(u, v)`` in proportion to ``1 / deg_out(u) + 1
    / deg_in(v)`` (the paper's; PyG's ``GraphSAINTEdgeSampler`` computes
    ``deg_in(u) + deg_out(v)``), and is the subgraph their endpoints
    induce. Keeps the edges' cumulative probabilities (8 bytes per edge).
    See :class:`SaintSampler` for the arguments.

    Example:
        >>> import torch
        >>> from torch_geometric.data import Data
        >>> from pyg_fastload.sampling.saint import SaintEdgeSampler
        >>> ring = Data(num_nodes=4, edge_index=torch.tensor(
        ...     [[0, 1, 2, 3], [1, 2, 3, 0]]))
        >>> sampler = SaintEdgeSampler(ring, [1], sample_coverage=0)
        >>> gen = torch.Generator().manual_seed(0)
        >>> sampler.subgraph_nodes(torch.arange(2), gen).numel()  # 2 edges
        4
    """
    def __init__(self, data: Any, num_neighbors: Any, **options: Any):
        super().__init__(data, num_neighbors, **options)
        topo = self.topology
        if topo.num_edges == 0:
            raise ValueError("'data' has no edges: GraphSAINT's edge sampler "
                             "draws edges")
        source = topo.indices.long()
        deg_in = topo.indptr.diff().double()
        deg_out = torch.bincount(source, minlength=self.num_nodes).double()
        prob = torch.repeat_interleave(1.0 / deg_in, topo.indptr.diff())
        prob += 1.0 / deg_out.index_select(0, source)
        #: Every edge's (CSC position's) cumulative probability.
        self.cum_prob = torch.cumsum(prob, 0)

    def subgraph_nodes(self, seeds: Tensor,
                       generator: torch.Generator) -> Tensor:
        topo = self.topology
        u = torch.rand(seeds.numel(), dtype=torch.float64,
                       generator=generator, device=self.device)
        pos = torch.searchsorted(self.cum_prob, u * self.cum_prob[-1],
                                 right=True).clamp_(max=topo.num_edges - 1)
        target = torch.searchsorted(topo.indptr, pos, right=True) - 1
        return torch.cat([topo.indices.index_select(0, pos).long(), target])


class SaintRandomWalkSampler(SaintSampler):
    r"""GraphSAINT's random-walk sampler (PyG's
    ``GraphSAINTRandomWalkSampler``): every seed of a batch starts a random
    walk of :obj:`walk_length` steps along in-edges (a dead end ends it,
    :class:`~pyg_fastload.sampling.RandomWalkSampler`), and the batch is
    the subgraph the walks' nodes induce.

    Args:
        walk_length (int, optional): steps per walk (default: the number
            of hops, ``len(num_neighbors)``).
        **options: :class:`SaintSampler`'s.

    Example:
        >>> import torch
        >>> from torch_geometric.data import Data
        >>> from pyg_fastload import FastNeighborLoader
        >>> ring = Data(x=torch.randn(8, 4), edge_index=torch.tensor(
        ...     [[1, 2, 3, 4, 5, 6, 7, 0], [0, 1, 2, 3, 4, 5, 6, 7]]))
        >>> loader = FastNeighborLoader(  # walks 0 <- 1 <- 2, 4 <- 5 <- 6
        ...     ring, [1, 1], batch_size=2, input_nodes=torch.tensor([0, 4]),
        ...     neighbor_sampler={'class_path': 'saint_rw', 'init_args': {
        ...         'sample_coverage': 10, 'progress': False}})
        >>> batch = next(iter(loader))  # the loader's seeds first
        >>> batch.n_id.tolist(), batch.batch_size, batch.num_edges
        ([0, 4, 1, 2, 5, 6], 2, 4)
    """
    from_seeds = True

    def __init__(self, data: Any, num_neighbors: Any, *,
                 walk_length: Optional[int] = None, **options: Any):
        super().__init__(data, num_neighbors, **options)
        length = self.num_hops if walk_length is None else walk_length
        if isinstance(length, bool) or not isinstance(length, int) or \
                length < 1:
            raise ValueError(f"'walk_length' must be a positive int (steps "
                             f"per walk; default: the number of hops), got "
                             f"{length!r}")
        self.walk_length = length
        self.walker = RandomWalkSampler(self.topology, [1] * length)

    @classmethod
    def reach(cls, num_hops: int, **options: Any) -> Optional[int]:
        r"""A walk's nodes and the in-edges between them: one hop beyond
        the walk."""
        length = options.get('walk_length')
        return (num_hops if length is None else length) + 1

    def subgraph_nodes(self, seeds: Tensor,
                       generator: torch.Generator) -> Tensor:
        return self.walker.sample(seeds, generator).node

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}(walk_length={self.walk_length}, '
                f'sample_coverage={self.sample_coverage})')
