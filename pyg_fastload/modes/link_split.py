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
from ..graph.kind import graph_input
from ..graph.topology import CSCTopology
from ..graph.view import GraphView
from ..sampling.link import EdgeKeys
from .link_relation import Relation, hetero_with, relation_of

__all__ = ['LinkOptions', 'LinkSplit', 'is_undirected',
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

    def loader_kwargs(self) -> Dict[str, Any]:
        r"""The training loader's negative sampling arguments."""
        amount = int(self.neg_ratio) if self.neg_sampling == 'triplet' \
            else float(self.neg_ratio)
        return dict(neg_sampling=dict(mode=self.neg_sampling, amount=amount),
                    strict_negatives=self.strict_negatives)


def is_undirected(edge_index: Tensor, num_nodes: int) -> bool:
    r"""Whether every edge's reverse is an edge too."""
    src, dst = edge_index.long()
    forward = torch.unique(src * num_nodes + dst)
    backward = torch.unique(dst * num_nodes + src)
    return torch.equal(forward, backward)


def link_split(data: Any, options: LinkOptions, seed: int) -> 'LinkSplit':
    r"""The :class:`LinkSplit` of :obj:`data`'s links: all its edges, or on
    a heterogeneous graph (``HeteroData`` or heterogeneous stores) the
    relation ``options.edge_type``."""
    if not graph_input(data).hetero:
        if options.edge_type is not None or options.rev_edge_type is not \
                None:
            raise SettingError('link.edge_type', "applies to heterogeneous "
                               "graphs only: leave it out")
        view = GraphView.of(data)
        return LinkSplit(view.edges(), view.num_nodes(), options, seed)
    if options.undirected:
        raise SettingError('link.undirected', "a heterogeneous relation's "
                           "links are held out with their reverse relation "
                           "(link.rev_edge_type): leave it out")
    relation, edges, num_dst, num_src = relation_of(
        data, options.edge_type, options.rev_edge_type)
    return LinkSplit(edges, num_dst, options, seed, num_src, relation)


class LinkSplit:
    r"""A graph's edges split into training, validation and test links
    (PyG's ``RandomLinkSplit`` semantics), the same on every rank under one
    seed.

    Message passing: training and validation batches see the training
    edges only, test batches the training and validation edges; an
    undirected link's two directions are held out together. Supervision:
    training batches use the training edges (with sampled negatives);
    evaluation batches score up to ``eval_edges`` held-out edges, each
    followed by its ``eval_negatives`` fixed negatives (label 0).

    On a heterogeneous graph (:obj:`relation`: the supervised edge type and
    its reverse) :obj:`edge_index` is that relation's, :obj:`num_nodes`
    its destination type's node count and :obj:`num_sources` its source
    type's; the reverse relation holds the flipped edges of each split.
    """

    def __init__(self, edge_index: Tensor, num_nodes: int,
                 options: LinkOptions, seed: int,
                 num_sources: Optional[int] = None,
                 relation: Optional[Relation] = None):
        self.options = options
        self.num_nodes = num_nodes
        #: ``(edge_type, reverse)`` on a heterogeneous graph.
        self.relation = relation
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
        self._keys = EdgeKeys(CSCTopology.from_edge_index(
            edge_index, num_nodes, num_sources=num_sources), num_sources)
        self._seed = seed + _NEGATIVE_SEED
        self._evaluation: Dict[str, Tuple[Tensor, Tensor]] = {}

    def _both_ways(self, edges: Tensor) -> Tensor:
        if not self.undirected:
            return edges
        return torch.cat([edges, edges.flip(0)], dim=1)

    def message_passing(self, split: str) -> Tensor:
        r"""The edges batches of :obj:`split` sample from."""
        edges = self.edges['train']
        if split == 'test':
            edges = torch.cat([edges, self.edges['val']], dim=1)
        return self._both_ways(edges)

    def supervision(self, split: str) -> Tuple[Tensor, Optional[Tensor]]:
        r"""``(edge_label_index, edge_label)`` of :obj:`split`: the
        training links (labels from the negative sampling), or the scored
        evaluation edges each followed by its fixed negatives."""
        if split == 'train':
            return self._both_ways(self.edges['train']), None
        if split not in self._evaluation:
            self._evaluation[split] = self._candidates(split)
        return self._evaluation[split]

    @property
    def group(self) -> int:
        r"""Label edges per evaluation edge: it and its negatives."""
        return 1 + self.options.eval_negatives

    def _candidates(self, split: str) -> Tuple[Tensor, Tensor]:
        options = self.options
        edges = self.edges[split]
        gen = torch.Generator().manual_seed(
            self._seed + ('val', 'test').index(split))
        if options.eval_edges and edges.size(1) > options.eval_edges:
            pick = torch.randperm(edges.size(1), generator=gen)
            edges = edges[:, pick[:options.eval_edges].sort().values]
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
        return label_index, label.view(-1)

    def graph(self, data: Any, split: str) -> Any:
        r""":obj:`data` (a ``Data``, ``HeteroData`` or a ``(FeatureStore,
        GraphStore)`` pair) with only the message-passing edges of
        :obj:`split`."""
        edges = self.message_passing(split)
        if self.relation is not None:
            return hetero_with(data, self.relation, edges)
        return GraphView.of(data).with_edges({None: edges})

