r"""Synthetic heterogeneous graphs shaped like ``ogbn-mag``: papers (the
only type with features, labels and masks) cite papers and have topics;
authors write papers and are affiliated with institutions; every relation
also stored reversed (``rev_...``), as PyG users do with ``ToUndirected``.

``'mag-like'`` has ogbn-mag's node and edge counts (736,389 papers,
1,134,649 authors, 8,740 institutions, 59,965 fields of study; 5.4M
citations, 7.1M authorships, 7.5M topics, 1.0M affiliations), power-law
degrees on both ends of every relation, 128 paper features and 349
classes; ``scale`` shrinks every count. ``'hetero-tiny'`` is a few hundred
nodes for tests. Generation is vectorized and seeded: the same preset,
scale and seed give the same graph."""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any, Dict, Tuple

import torch
from torch import Tensor
from torch_geometric.data import HeteroData

from .synthetic import power_law

__all__ = ['HeteroGraphConfig', 'HETERO_PRESETS', 'generate_hetero']

EdgeType = Tuple[str, str, str]


@dataclass(frozen=True)
class HeteroGraphConfig:
    r"""Node counts per type, edge counts per relation (stored with its
    reverse), the labelled type and its features and classes.

    Args:
        num_nodes (Dict[str, int]): nodes per type.
        num_edges (Dict[EdgeType, int]): edges per relation.
        labelled (str): the node type with features, labels and masks.
        num_features (int): its feature width.
        num_classes (int): its number of classes.
        degree_exponent (float): power-law exponent of the expected degrees
            of both ends of every relation.
        homophily (float): share of edges between two labelled nodes that
            join nodes of one class.
        feature_signal (float): length of the class centroids in the
            features.
    """
    num_nodes: Dict[str, int]
    num_edges: Dict[EdgeType, int]
    labelled: str = 'paper'
    num_features: int = 128
    num_classes: int = 349
    degree_exponent: float = 2.1
    homophily: float = 0.7
    feature_signal: float = 1.0

    def to_json(self) -> Dict[str, Any]:
        r"""The configuration as JSON (edge types as ``'src__rel__dst'``),
        for ``meta.json``."""
        values = asdict(self)
        values['num_edges'] = {'__'.join(e): n
                               for e, n in self.num_edges.items()}
        return values

    def check_scale(self, scale: float) -> None:
        r"""Refuses a :obj:`scale` outside (0, 1] (a graph generated in
        memory only shrinks)."""
        if not (isinstance(scale, (int, float)) and 0 < scale <= 1):
            raise ValueError(f"'scale' = {scale!r} must be in (0, 1]")

    def scaled(self, scale: float) -> 'HeteroGraphConfig':
        r"""Every node and edge count times :obj:`scale` (checked by
        :meth:`check_scale`; at least 2 nodes of a type, and classes never
        more than labelled nodes)."""
        self.check_scale(scale)
        nodes = {t: max(2, int(round(n * scale)))
                 for t, n in self.num_nodes.items()}
        return replace(self, num_nodes=nodes, num_edges={
            e: int(round(n * scale)) for e, n in self.num_edges.items()},
            num_classes=min(self.num_classes, nodes[self.labelled]))


HETERO_PRESETS: Dict[str, HeteroGraphConfig] = {
    'mag-like': HeteroGraphConfig(
        num_nodes={'paper': 736_389, 'author': 1_134_649,
                   'institution': 8_740, 'field_of_study': 59_965},
        num_edges={('author', 'affiliated_with', 'institution'): 1_043_998,
                   ('author', 'writes', 'paper'): 7_145_660,
                   ('paper', 'cites', 'paper'): 5_416_271,
                   ('paper', 'has_topic', 'field_of_study'): 7_505_078}),
    'hetero-tiny': HeteroGraphConfig(
        num_nodes={'paper': 400, 'author': 300, 'institution': 12,
                   'field_of_study': 30},
        num_edges={('author', 'affiliated_with', 'institution'): 300,
                   ('author', 'writes', 'paper'): 1_200,
                   ('paper', 'cites', 'paper'): 1_600,
                   ('paper', 'has_topic', 'field_of_study'): 800},
        num_features=16, num_classes=4, feature_signal=2.0, homophily=0.8),
}


def _power_law(n: int, exponent: float, gen: torch.Generator) -> Tensor:
    r"""Expected-degree weights of :obj:`n` nodes from a power law capped
    at 5% of :obj:`n` times the median weight."""
    u = torch.rand(n, generator=gen, dtype=torch.float64)
    return power_law(u, exponent - 1.0, max(0.05 * n, 1.0))


def _draw(cdf: Tensor, count: int, gen: torch.Generator) -> Tensor:
    r""":obj:`count` node ids drawn in proportion to weights of cumulative
    sum :obj:`cdf` (an inverse-CDF search: bounded memory at any count)."""
    u = torch.rand(count, generator=gen, dtype=torch.float64) * cdf[-1]
    return torch.searchsorted(cdf, u).clamp_(max=cdf.numel() - 1)


def _same_class(dst: Tensor, y: Tensor, gen: torch.Generator) -> Tensor:
    r"""For every node of :obj:`dst`, a uniformly drawn node of its class
    (every class has a node: classes are assigned round-robin)."""
    order = torch.argsort(y, stable=True)
    counts = torch.bincount(y)
    start = torch.cumsum(counts, 0) - counts
    cls = y[dst]
    pick = (torch.rand(dst.numel(), generator=gen, dtype=torch.float64)
            * counts[cls]).long().clamp_(max=counts[cls] - 1)
    return order[start[cls] + pick]


def generate_hetero(config: str | HeteroGraphConfig = 'hetero-tiny',
                    seed: int = 0, scale: float = 1.0) -> HeteroData:
    r"""The heterogeneous graph of :obj:`config` (a preset name of
    :data:`HETERO_PRESETS` or a :class:`HeteroGraphConfig`), every count
    times :obj:`scale`, seeded by :obj:`seed`.

    Args:
        config (str or HeteroGraphConfig, optional): the preset's name or
            the configuration. (default: :obj:`'hetero-tiny'`)
        seed (int, optional): the random seed. (default: :obj:`0`)
        scale (float, optional): every node and edge count times this.
            (default: :obj:`1.0`)

    Example:
        >>> from pyg_fastload.datasets import generate_hetero
        >>> data = generate_hetero('hetero-tiny')
        >>> data.node_types
        ['paper', 'author', 'institution', 'field_of_study']
    """
    if isinstance(config, str):
        if config not in HETERO_PRESETS:
            raise ValueError(f"unknown heterogeneous preset {config!r}: "
                             f"pass one of {', '.join(HETERO_PRESETS)}")
        config = HETERO_PRESETS[config]
    if scale != 1.0:
        config = config.scaled(scale)
    gen = torch.Generator().manual_seed(seed)
    data = HeteroData()
    for node_type, count in config.num_nodes.items():
        data[node_type].num_nodes = count
    labelled = config.labelled
    n = config.num_nodes[labelled]
    y = torch.randperm(n, generator=gen) % config.num_classes
    centroid = torch.randn(config.num_classes, config.num_features,
                           generator=gen)
    centroid *= config.feature_signal / centroid.norm(dim=1, keepdim=True)
    x = torch.randn(n, config.num_features, generator=gen) + centroid[y]
    split = torch.randperm(n, generator=gen)
    masks = {}
    for name, (lo, hi) in {'train': (0.0, 0.6), 'val': (0.6, 0.8),
                           'test': (0.8, 1.0)}.items():
        mask = torch.zeros(n, dtype=torch.bool)
        mask[split[int(lo * n):int(hi * n)]] = True
        masks[f'{name}_mask'] = mask
    store = data[labelled]
    store.x, store.y = x, y
    for key, mask in masks.items():
        store[key] = mask
    cdfs = {t: torch.cumsum(_power_law(c, config.degree_exponent, gen), 0)
            for t, c in config.num_nodes.items()}
    for edge_type, count in config.num_edges.items():
        src_type, rel, dst_type = edge_type
        dst = _draw(cdfs[dst_type], count, gen)
        src = _draw(cdfs[src_type], count, gen)
        if src_type == dst_type == labelled and count:
            same = torch.rand(count, generator=gen) < config.homophily
            src[same] = _same_class(dst[same], y, gen)
        edge_index = torch.stack([src, dst])
        data[edge_type].edge_index = edge_index
        data[dst_type, f'rev_{rel}', src_type].edge_index = \
            edge_index.flip(0)
    return data

