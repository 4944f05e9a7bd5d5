r"""Link prediction as a loading task (``task: link``): the options
(:class:`LinkOptions`), the split of a graph's edges into training,
validation and test edges with PyG's ``RandomLinkSplit`` semantics
(:class:`LinkSplit`: evaluation edges never carry messages where they are
scored), and the fixed negatives every evaluation edge is ranked against,
as ogbl-citation2 evaluates (MRR, Hits@K)."""
from __future__ import annotations

import math

from dataclasses import dataclass
from typing import Any, Dict, List, Literal, Optional, Tuple

import torch
from torch import Tensor

from ..config import SettingError
from ..graph.convert import topology_of
from ..graph.kind import graph_input, stores_of
from ..graph.topology import CSCTopology
from ..graph.view import GraphView
from ..sampling.link import EdgeKeys
from ..graph.hetero_topology import EdgeType
from ..sampling.temporal import check_times, read_time
from ..storage import CSCGraphStore
from .link_relation import Relation, hetero_with, relation_of

__all__ = ['LinkOptions', 'LinkSplit', 'is_undirected', 'put_edge_times',
           'link_split']

#: Offset of the evaluation negatives' seed from the run's seed.
_NEGATIVE_SEED = 7919
#: Most label edges (evaluation edges with their negatives) one split's
#: evaluation holds in memory.
MAX_EVAL_LABELS = 50_000_000


@dataclass(frozen=True)
class LinkOptions:
    r"""Link prediction settings (``data.link``).

    Args:
        neg_sampling (str): training negatives: ``'binary'`` (pairs
            labelled 0, for a BCE loss) or ``'triplet'`` (negative
            destinations per positive, for BPR).
        neg_ratio (float): training negatives per positive edge (an int
            for ``'triplet'``).
        strict_negatives (bool): training negatives are never edges.
        val_ratio (float): share of the edges held out for validation.
        test_ratio (float): share held out for testing.
        eval_edges (int): validation / test edges scored per evaluation (a
            fixed random subset; 0: all of them). All held-out edges stay
            out of message passing either way.
        eval_negatives (int): fixed negative destinations each evaluation
            edge is ranked against (ogbl-citation2: 1000), drawn once among
            its source's non-neighbours in the whole graph.
        undirected (bool, optional): treat ``u -> v`` and ``v -> u`` as one
            link, split together (default: detected, true when every edge's
            reverse exists; homogeneous graphs).
        edge_type (List[str], optional): the relation to predict on a
            heterogeneous graph, e.g. ``[author, writes, paper]``; its
            negatives are nodes of its destination type.
        rev_edge_type (List[str], optional): the relation holding its
            reversed edges, held out with it (PyG's ``rev_edge_types``;
            default: the relation from the destination to the source type
            whose edges are exactly the flipped ones, if any).

    Example:
        >>> from pyg_fastload.modes import LinkOptions
        >>> options = LinkOptions(neg_sampling='triplet', eval_negatives=50)
        >>> options.neg_sampling, options.val_ratio, options.eval_negatives
        ('triplet', 0.05, 50)
    """
    neg_sampling: Literal['binary', 'triplet'] = 'binary'
    neg_ratio: float = 1.0
    strict_negatives: bool = False
    val_ratio: float = 0.05
    test_ratio: float = 0.1
    eval_edges: int = 2000
    eval_negatives: int = 100
    undirected: Optional[bool] = None
    edge_type: Optional[List[str]] = None
    rev_edge_type: Optional[List[str]] = None

    def __post_init__(self) -> None:
        if self.neg_sampling not in ('binary', 'triplet'):
            raise SettingError('link.neg_sampling', f"{self.neg_sampling!r} "
                               f"is not one of 'binary', 'triplet'")
        ratio = self.neg_ratio
        if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) \
                or not math.isfinite(ratio) or ratio <= 0 or (
                    self.neg_sampling == 'triplet' and ratio != int(ratio)):
            raise SettingError('link.neg_ratio', f"{ratio!r} must be a "
                               f"finite number > 0 (an integer for "
                               f"'triplet')")
        for key in ('val_ratio', 'test_ratio'):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(
                    value, (int, float)) or not 0 < value < 1:
                raise SettingError(f'link.{key}', f"{value!r} must lie in "
                                   f"(0, 1)")
        if self.val_ratio + self.test_ratio >= 1:
            raise SettingError('link.test_ratio', f"val_ratio + test_ratio "
                               f"= {self.val_ratio + self.test_ratio} leaves "
                               f"no training edges")
        for key, low in (('eval_edges', 0), ('eval_negatives', 1)):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or \
                    value < low:
                raise SettingError(f'link.{key}', f"{value!r} must be an int "
                                   f">= {low}")
        for key in ('strict_negatives', 'undirected'):
            value = getattr(self, key)
            if value is not None and not isinstance(value, bool):
                raise SettingError(f'link.{key}', f"{value!r} must be true "
                                   f"or false")
        for key in ('edge_type', 'rev_edge_type'):
            value = getattr(self, key)
            if value is not None and (
                    not isinstance(value, (list, tuple)) or len(value) != 3
                    or not all(isinstance(v, str) for v in value)):
                raise SettingError(f'link.{key}', f"{value!r} must be a "
                                   f"[source, relation, destination] list "
                                   f"of node and relation names")
            if value is not None:
                object.__setattr__(self, key, tuple(value))

    def loader_kwargs(self, weight: Optional[Tuple[Tensor, Tensor]] = None
                      ) -> Dict[str, Any]:
        r"""The training loader's negative sampling arguments, negatives
        drawn by :obj:`weight` where given (the weight of every node of
        the label edges' source and destination types; else
        uniformly)."""
        amount = int(self.neg_ratio) if self.neg_sampling == 'triplet' \
            else float(self.neg_ratio)
        sampling: Dict[str, Any] = dict(mode=self.neg_sampling, amount=amount)
        if weight is not None:
            sampling.update(src_weight=weight[0], dst_weight=weight[1])
        return dict(neg_sampling=sampling,
                    strict_negatives=self.strict_negatives)


def is_undirected(edge_index: Tensor, num_nodes: int) -> bool:
    r"""Whether every edge's reverse is an edge too."""
    src, dst = edge_index.long()
    forward = torch.unique(src * num_nodes + dst)
    backward = torch.unique(dst * num_nodes + src)
    return torch.equal(forward, backward)


def link_split(data: Any, options: LinkOptions, seed: int,
               time_attr: Optional[str] = None) -> 'LinkSplit':
    r"""The :class:`LinkSplit` of :obj:`data`'s links: all its edges, or on
    a heterogeneous graph (``HeteroData`` or heterogeneous stores) the
    relation ``options.edge_type``; with :obj:`time_attr`, the edge times
    of that name go with the edges (a dataset directory's edge array: a
    homogeneous graph's read by
    :func:`~pyg_fastload.sampling.temporal.read_time`, a heterogeneous
    one's of the supervised relation)."""
    if not graph_input(data).hetero:
        if options.edge_type is not None or options.rev_edge_type is not \
                None:
            raise SettingError('link.edge_type', "applies to heterogeneous "
                               "graphs only: leave it out")
        if time_attr is not None:
            return _timed_split(data, options, seed, time_attr)
        view = GraphView.of(data)
        return LinkSplit(view.edges(), view.num_nodes(), options, seed)
    if options.undirected:
        raise SettingError('link.undirected', "a heterogeneous relation's "
                           "links are held out with their reverse relation "
                           "(link.rev_edge_type): leave it out")
    relation, edges, num_dst, num_src = relation_of(
        data, options.edge_type, options.rev_edge_type)
    if time_attr is None:
        return LinkSplit(edges, num_dst, options, seed, num_src, relation)
    return LinkSplit(edges, num_dst, options, seed, num_src, relation,
                     _relation_time(data, relation[0], time_attr),
                     time_attr)


def _relation_time(data: Any, edge_type: EdgeType, time_attr: str) -> Tensor:
    r"""The time of every edge of relation :obj:`edge_type` of the
    heterogeneous stores :obj:`data` (edge array :obj:`time_attr` of its
    graph store, in the relation's CSC order: the order of its edges
    there)."""
    graph_store = _graph_store(data, time_attr)
    time = graph_store.edge_array(time_attr, edge_type)
    if time is None:
        held = graph_store.edge_array_names_of(edge_type)
        raise SettingError('time_attr', f"{time_attr!r} is no edge array of "
                           f"relation {list(edge_type)} (it has {held}); "
                           f"task 'link' samples by the times of the "
                           f"supervised relation's edges: name one (a "
                           f"HeteroData's data[edge_type].time, kept by "
                           f"'pyg-fastload prepare --pyg-data FILE.pt "
                           f"DIR'), or leave time_attr out")
    try:
        return check_times(time.reshape(-1), f"'time_attr={time_attr!r}'")
    except (TypeError, ValueError) as error:
        raise SettingError('time_attr', str(error)) from None


def put_edge_times(graph: Any, times: Dict[Optional[EdgeType], Tensor],
                   time_attr: str) -> None:
    r"""Puts the time of every edge of each relation of :obj:`times`
    (:obj:`None`: a homogeneous graph's edges), given in the order of its
    edge list, into :obj:`graph`'s graph store as edge array
    :obj:`time_attr` (in the relation's CSC order)."""
    graph_store = _graph_store(graph, time_attr)
    for edge_type, time in times.items():
        topology = graph_store.topology if edge_type is None else \
            graph_store.topology.relation_topology(edge_type)
        graph_store.put_edge_array(time_attr, topology.csc_order(time),
                                   edge_type)


def _graph_store(data: Any, time_attr: str) -> Any:
    r"""The graph store of :obj:`data`, which holds edge arrays; else a
    :class:`SettingError` naming ``time_attr``."""
    stores = stores_of(data)
    if stores is None or not isinstance(stores[1], CSCGraphStore):
        raise SettingError('time_attr', f"{time_attr!r}: task 'link' samples "
                           f"in time from a dataset directory (its graph "
                           f"store holds the edge times); write the graph "
                           f"with 'pyg-fastload prepare --pyg-data FILE.pt "
                           f"DIR' and give DIR as the dataset, or leave "
                           f"time_attr out")
    return stores[1]


def _timed_split(data: Any, options: LinkOptions, seed: int,
                 time_attr: str) -> 'LinkSplit':
    r"""The split of a homogeneous graph's edges, each with its time
    :obj:`time_attr` (an edge array: node times are refused)."""
    topology = topology_of(data)
    try:
        time, level = read_time(data, time_attr, topology)
    except ValueError as error:
        time, level, why = None, None, str(error)
    if level != 'edge':
        why = why if level is None else 'it holds one time per node'
        raise SettingError('time_attr', f"{time_attr!r} is no edge array of "
                           f"the dataset ({why}); task 'link' samples by "
                           f"the times of the edges: name an edge array "
                           f"(e.g. a Data's edge-level 'time', kept by "
                           f"'pyg-fastload prepare --pyg-data FILE.pt "
                           f"DIR'), or leave time_attr out")
    return LinkSplit(topology.to_edge_index(), topology.num_nodes, options,
                     seed, edge_time=time, time_attr=time_attr)


class LinkSplit:
    r"""A graph's edges split into training, validation and test links
    (PyG's ``RandomLinkSplit`` semantics), the same on every rank under one
    seed.

    Message passing: training and validation batches see the training
    edges only, test batches the training and validation edges; an
    undirected link's two directions are held out together. Supervision:
    training batches use the training edges (with sampled negatives);
    evaluation batches score up to ``eval_edges`` held-out edges, each
    followed by its ``eval_negatives`` fixed negatives (label 0). In time,
    every edge follows its link with its own time; see "Link prediction"
    in ``docs/guide/lightning.md``.

    Args:
        edge_index (torch.Tensor): the edges (of a heterogeneous graph: the
            supervised relation's).
        num_nodes (int): the node count (of a heterogeneous graph: the
            destination type's).
        options (LinkOptions): ratios, negatives and evaluation sizes.
        seed (int): the seed of the split and the fixed negatives.
        num_sources (int, optional): the source type's node count on a
            heterogeneous graph.
        relation (Tuple[EdgeType, EdgeType], optional): the supervised
            edge type and its reverse, which holds the flipped edges of
            each split.
        edge_time (torch.Tensor, optional): the time of every edge of
            :obj:`edge_index` (the reverse relation takes its relation's).
        time_attr (str, optional): the edge array the message-passing
            graphs carry the times under (:meth:`graph`).
            (default: :obj:`'time'`)
    """

    def __init__(self, edge_index: Tensor, num_nodes: int,
                 options: LinkOptions, seed: int,
                 num_sources: Optional[int] = None,
                 relation: Optional[Relation] = None,
                 edge_time: Optional[Tensor] = None,
                 time_attr: str = 'time'):
        self.options = options
        self.num_nodes = num_nodes
        #: ``(edge_type, reverse)`` on a heterogeneous graph.
        self.relation = relation
        #: The name the message-passing graphs carry the edge times under.
        self.time_attr = time_attr
        edge_index = edge_index.long()
        undirected = options.undirected
        if relation is not None:  # two node types: one direction
            undirected = False
        elif undirected is None:
            undirected = is_undirected(edge_index, num_nodes)
        self.undirected = undirected
        links = edge_index
        if undirected:  # one direction per link (self-loops kept once)
            links = edge_index[:, edge_index[0] <= edge_index[1]]
        # a repeated edge is one link: its copies must not land in two
        # splits (a held-out link would carry messages)
        links = torch.unique(links, dim=1)
        gen = torch.Generator().manual_seed(seed)
        links = links[:, torch.randperm(links.size(1), generator=gen)]
        count = links.size(1)
        num_val = int(count * options.val_ratio)
        num_test = int(count * options.test_ratio)
        if min(num_val, num_test, count - num_val - num_test) < 1:
            raise SettingError('link.val_ratio', f"{count} links cannot be "
                               f"split {options.val_ratio} / "
                               f"{options.test_ratio} with an edge in each "
                               f"split")
        #: Positive links per split, ``[2, E]`` (one direction if
        #: undirected).
        self.edges = {'train': links[:, num_val + num_test:],
                      'val': links[:, :num_val],
                      'test': links[:, num_val:num_val + num_test]}
        #: Every edge with its time by its link's split (in time).
        self.timed: Optional[Dict[str, Tuple[Tensor, Tensor]]] = None
        if edge_time is not None:
            self.timed = self._timed_edges(edge_index, edge_time, links,
                                           num_val, num_test)
        self._keys = EdgeKeys(CSCTopology.from_edge_index(
            edge_index, num_nodes, num_sources=num_sources), num_sources)
        self._seed = seed + _NEGATIVE_SEED
        self._evaluation: Dict[str, Tuple[Tensor, Tensor,
                                          Optional[Tensor]]] = {}

    def _timed_edges(self, edge_index: Tensor, edge_time: Tensor,
                     links: Tensor, num_val: int, num_test: int
                     ) -> Dict[str, Tuple[Tensor, Tensor]]:
        r"""The edges of :obj:`edge_index` with their times, by the split
        of their link (:obj:`links` in split order: validation, test,
        training); an edge whose link is none (one direction of a graph
        declared undirected that lacks it) is dropped, as without times."""
        src, dst = edge_index
        if self.undirected:
            src, dst = torch.minimum(src, dst), torch.maximum(src, dst)
        keys = links[0] * self.num_nodes + links[1]
        order = torch.argsort(keys)
        found = torch.searchsorted(keys[order], src * self.num_nodes + dst)
        found = found.clamp(max=keys.numel() - 1)
        known = keys[order][found] == src * self.num_nodes + dst
        where = torch.bucketize(order[found], torch.tensor(
            [num_val, num_val + num_test]), right=True)
        return {name: (edge_index[:, known & (where == i)],
                       edge_time[known & (where == i)])
                for i, name in enumerate(('val', 'test', 'train'))}

    def _both_ways(self, edges: Tensor) -> Tensor:
        if not self.undirected:
            return edges
        return torch.cat([edges, edges.flip(0)], dim=1)

    def _passing(self, split: str) -> Tuple[Tensor, Optional[Tensor]]:
        r"""The message-passing edges of :obj:`split` and their times."""
        splits = ('train', 'val') if split == 'test' else ('train', )
        if self.timed is not None:  # the graph's own edges, timed
            edges, times = zip(*(self.timed[s] for s in splits))
            return torch.cat(edges, dim=1), torch.cat(times)
        edges = torch.cat([self.edges[s] for s in splits], dim=1)
        return self._both_ways(edges), None

    def message_passing(self, split: str) -> Tensor:
        r"""The edges batches of :obj:`split` sample from."""
        return self._passing(split)[0]

    def passing_time(self, split: str) -> Optional[Tensor]:
        r"""The times of :meth:`message_passing`'s edges (in time), else
        :obj:`None`."""
        return self._passing(split)[1]

    def supervision(self, split: str) -> Tuple[Tensor, Optional[Tensor]]:
        r"""``(edge_label_index, edge_label)`` of :obj:`split`: the
        training links (labels from the negative sampling), or the scored
        evaluation edges each followed by its fixed negatives."""
        if split == 'train':
            if self.timed is not None:
                return self.timed['train'][0], None
            return self._both_ways(self.edges['train']), None
        return self._evaluated(split)[:2]

    def label_time(self, split: str) -> Optional[Tensor]:
        r"""The time of every label edge of :obj:`split`
        (:meth:`supervision`'s): its edge's, an evaluation negative its
        edge's; :obj:`None` without times."""
        if self.timed is None:
            return None
        if split == 'train':
            return self.timed['train'][1]
        return self._evaluated(split)[2]

    def _evaluated(self, split: str) -> Tuple[Tensor, Tensor,
                                              Optional[Tensor]]:
        if split not in self._evaluation:
            self._evaluation[split] = self._candidates(split)
        return self._evaluation[split]

    def _scored(self, split: str) -> Tuple[Tensor, Optional[Tensor]]:
        r"""The held-out edges of :obj:`split` evaluation scores and their
        times: its links, or in time every distinct (link, time), one
        direction (source <= destination) if undirected."""
        if self.timed is None:
            return self.edges[split], None
        edges, time = self.timed[split]
        if self.undirected:
            edges = torch.stack([edges.min(0).values, edges.max(0).values])
        keys = edges[0] * self.num_nodes + edges[1]
        order = torch.argsort(time, stable=True)  # by link, then time
        order = order[torch.argsort(keys[order], stable=True)]
        keys, time = keys[order], time[order]
        first = torch.ones_like(keys, dtype=torch.bool)
        first[1:] = (keys[1:] != keys[:-1]) | (time[1:] != time[:-1])
        return edges[:, order[first]], time[first]

    @property
    def group(self) -> int:
        r"""Label edges per evaluation edge: it and its negatives."""
        return 1 + self.options.eval_negatives

    def _candidates(self, split: str) -> Tuple[Tensor, Tensor,
                                               Optional[Tensor]]:
        options = self.options
        edges, time = self._scored(split)
        gen = torch.Generator().manual_seed(
            self._seed + ('val', 'test').index(split))
        if options.eval_edges and edges.size(1) > options.eval_edges:
            pick = torch.randperm(edges.size(1), generator=gen)
            pick = pick[:options.eval_edges].sort().values
            edges = edges[:, pick]
            time = None if time is None else time[pick]
        k = options.eval_negatives
        if k >= self.num_nodes:
            raise SettingError('link.eval_negatives', f"{k} negatives per "
                               f"edge on a graph of {self.num_nodes} nodes: "
                               f"give fewer than the nodes")
        if edges.size(1) * (1 + k) > MAX_EVAL_LABELS:
            raise SettingError('link.eval_negatives', f"{edges.size(1):,} "
                               f"evaluation edges x {1 + k} candidates are "
                               f"more than {MAX_EVAL_LABELS:,} label edges "
                               f"(held in memory): lower link.eval_edges or "
                               f"link.eval_negatives")
        src, dst = edges
        full = self._keys.out_degree[src] >= self.num_nodes
        if bool(full.any()):
            raise SettingError('link.eval_negatives', f"node "
                               f"{int(src[full][0])} links to every node: "
                               f"it has no negative to rank against")
        negatives = self._keys.non_neighbours(src.repeat_interleave(k), gen)
        dst_all = torch.cat([dst.view(-1, 1), negatives.view(-1, k)], dim=1)
        label_index = torch.stack([src.repeat_interleave(1 + k),
                                   dst_all.reshape(-1)])
        label = torch.zeros(dst_all.shape)
        label[:, 0] = 1
        return label_index, label.view(-1), \
            None if time is None else time.repeat_interleave(1 + k)

    def graph(self, data: Any, split: str) -> Any:
        r""":obj:`data` (a ``Data``, ``HeteroData`` or a ``(FeatureStore,
        GraphStore)`` pair) with only the message-passing edges of
        :obj:`split` (in time: a pair whose graph store carries their
        times as edge array :attr:`time_attr`)."""
        edges, times = self._passing(split)
        if self.relation is not None:  # the relation and its reverse
            graph = hetero_with(data, self.relation, edges)
            timed = [e for e in self.relation if e is not None]
        else:
            graph = GraphView.of(data).with_edges({None: edges})
            timed = [None]
        if times is not None:  # (a reverse's edges: the same order)
            put_edge_times(graph, {e: times for e in timed}, self.time_attr)
        return graph

