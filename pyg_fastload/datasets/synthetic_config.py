r"""The synthetic graphs' settings and the presets shaped like
``ogbn-arxiv`` and ``ogbn-products``."""
from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any, Dict, Union

import numpy as np

__all__ = ['SyntheticGraphConfig', 'PRESETS', 'resolve_config', 'preset_name']


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
#: ``degree_stats(generate(P).topology)`` gives (mean / median / max degree,
#: edge share of the top 20% nodes): ``'arxiv-like'`` 13.8 / 7 / 13,765 /
#: 0.64 (ogbn-arxiv symmetrised: mean 13.7, max 13,161) and
#: ``'products-like'`` 50.5 / 24 / 17,387 / 0.63 (ogbn-products: mean 50.5,
#: max 17,481). ``feature_signal`` is set so that an MLP on ``x`` alone is
#: far below a GNN (the quickstart's accuracies in ``docs/benchmarks.md``).
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


def resolve_config(config: Union[SyntheticGraphConfig, str],
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


def preset_name(config: SyntheticGraphConfig) -> str:
    for name, preset in PRESETS.items():
        if preset == config:
            return name
    return 'custom'
