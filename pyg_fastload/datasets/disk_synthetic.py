r"""Synthetic graphs written straight to disk in bounded memory, for
features larger than memory: the ``papers-like`` preset, shaped like
``ogbn-papers100M`` (128 float32 features, 172 classes, about 14.5 in-edges
per node, about 1.4% of the nodes labelled) at a size whose features exceed
this 24 GiB machine's memory (56M nodes: 28.7 GB of features), and
``scale`` to grow it (``scale=2``: 112M nodes, the real size).

Every chunk of destination nodes is generated on its own from the seed,
so memory stays at one chunk plus the ``indptr`` counts, and the topology
comes out in CSC order without an external sort. The model is a directed,
degree-skewed community graph:

* node ``v`` sits at position ``p = (a * v + b) mod N`` (a fixed affine
  permutation); its community is ``p mod K`` and its popularity rank within
  the community ``p // K``, so communities and popular nodes are spread over
  the whole id range (and the feature file) rather than clustered;
* a node's in-degree follows a power law (``degree_exponent``, capped at
  ``max_degree``); each in-edge comes from the node's own community with
  probability ``homophily``, else from a uniform community, and within a
  community from rank ``floor(M * U ** popularity)`` (low ranks are hot:
  the top 10% of a community draw ``0.1 ** (1 / popularity)`` of the edges);
* labels are the community's class, features a noisy class centroid.
"""
from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Dict, Iterator, Union

import numpy as np
import torch
from torch import Tensor

from ..io import open_dataset_dir
from ..io.format import build_meta
from ..io.reader import OnDiskDataset
from ..io.staging import Staging, check_target
from .synthetic import _generator

__all__ = ['DiskGraphConfig', 'DISK_PRESETS', 'prepare_disk_synthetic']

#: Destination nodes generated per chunk (about 15M edges at papers-like's
#: mean degree; the chunk's arrays take a few hundred MB).
CHUNK_NODES = 1 << 20


@dataclass(frozen=True)
class DiskGraphConfig:
    r"""A graph generated chunk by chunk to disk (see the module).

    Args:
        num_nodes (int): nodes ``N``.
        mean_degree (float): mean in-edges per node (before removing self
            loops and repeated edges).
        num_features (int): width of ``x`` (float32).
        num_classes (int): labels.
        communities_per_class (int): communities ``K = num_classes *
            communities_per_class``.
        degree_exponent (float): exponent ``> 2`` of the in-degree power law.
        max_degree (int): cap of the in-degree.
        popularity (float): skew ``>= 1`` of the source ranks (1: uniform).
        homophily (float): probability an in-edge stays in the community.
        feature_signal (float): length of the class centroid in ``x``.
        train_fraction, val_fraction, test_fraction (float): the masks.
    """
    num_nodes: int
    mean_degree: float
    num_features: int
    num_classes: int
    communities_per_class: int = 2
    degree_exponent: float = 2.5
    max_degree: int = 20_000
    popularity: float = 2.5
    homophily: float = 0.7
    feature_signal: float = 1.5
    train_fraction: float = 0.011
    val_fraction: float = 0.0011
    test_fraction: float = 0.0019

    def __post_init__(self) -> None:
        checks = [
            ('num_nodes', 2 <= self.num_nodes < 2**31, 'in [2, 2**31)'),
            ('mean_degree', 0 < self.mean_degree <= self.max_degree,
             'in (0, max_degree]'),
            ('num_features', self.num_features >= 1, '>= 1'),
            ('num_classes', self.num_classes >= 1, '>= 1'),
            ('communities_per_class', self.communities_per_class >= 1,
             '>= 1'),
            ('degree_exponent', self.degree_exponent > 2, '> 2 (a finite '
             'mean)'),
            ('popularity', self.popularity >= 1, '>= 1'),
            ('homophily', 0 <= self.homophily <= 1, 'in [0, 1]'),
            ('train_fraction + val_fraction + test_fraction',
             min(self.train_fraction, self.val_fraction,
                 self.test_fraction) >= 0 and self.train_fraction
             + self.val_fraction + self.test_fraction <= 1, 'in [0, 1]')]
        if self.num_classes * self.communities_per_class > self.num_nodes:
            checks.append(('communities_per_class', False, 'such that '
                           'every community has a node'))
        for name, ok, need in checks:
            if not ok:
                raise ValueError(f"invalid '{name}' of DiskGraphConfig: "
                                 f"must be {need}")

    def scaled(self, scale: float) -> 'DiskGraphConfig':
        r"""The same graph with ``scale`` times the nodes."""
        if not scale > 0:
            raise ValueError(f"'scale' = {scale!r} must be > 0")
        values = asdict(self)
        values['num_nodes'] = max(2, int(round(self.num_nodes * scale)))
        return DiskGraphConfig(**values)


#: Presets generated to disk chunk by chunk (``pyg-fastload prepare --preset
#: papers-like [--scale S] OUT_DIR``).
DISK_PRESETS: Dict[str, DiskGraphConfig] = {
    'papers-like': DiskGraphConfig(num_nodes=56_000_000, mean_degree=14.5,
                                   num_features=128, num_classes=172),
}


class _Layout:
    r"""Positions, communities and ranks of the nodes (module docstring)."""
    def __init__(self, cfg: DiskGraphConfig, seed: int):
        n = cfg.num_nodes
        self.n = n
        self.k = cfg.num_classes * cfg.communities_per_class
        a = int(n * (math.sqrt(5) - 1) / 2) | 1
        while math.gcd(a, n) != 1:
            a += 2
        self.a, self.b = a, (seed * 7919 + 104729) % n
        self.a_inv = pow(a, -1, n)

    def position(self, v: Tensor) -> Tensor:
        return (v * self.a + self.b) % self.n

    def node(self, p: Tensor) -> Tensor:
        return ((p - self.b) % self.n) * self.a_inv % self.n

    def members(self, c: Tensor) -> Tensor:
        r"""Nodes in community ``c``: positions ``c, c + K, ...`` below
        ``N``."""
        return (self.n - c + self.k - 1) // self.k


def _in_edges(cfg: DiskGraphConfig, layout: _Layout, seed: int, start: int,
              end: int) -> Tensor:
    r"""Sorted distinct keys ``(dst - start) * N + src`` of the in-edges of
    nodes ``[start, end)``."""
    gen = _generator(seed, 0, start // CHUNK_NODES)
    alpha = cfg.degree_exponent - 1.0
    scale = cfg.mean_degree * (alpha - 1.0) / alpha  # Pareto x_m
    u = torch.rand(end - start, generator=gen, dtype=torch.float64)
    degree = (scale * u.pow(-1.0 / alpha)).round().clamp_(
        max=cfg.max_degree).long()
    dst = torch.repeat_interleave(torch.arange(start, end), degree)
    m = dst.numel()
    own = layout.position(dst) % layout.k
    other = torch.randint(layout.k, (m, ), generator=gen)
    inside = torch.rand(m, generator=gen) < cfg.homophily
    community = torch.where(inside, own, other)
    rank = (layout.members(community).double() * torch.rand(
        m, generator=gen, dtype=torch.float64).pow(cfg.popularity)).long()
    src = layout.node(community + layout.k * rank)
    keep = src != dst
    return torch.unique((dst[keep] - start) * layout.n + src[keep])


def prepare_disk_synthetic(
    preset_or_config: Union[str, DiskGraphConfig],
    out_dir: Union[str, Path],
    seed: int = 0,
    scale: float = 1.0,
    progress: bool = True,
    overwrite: bool = False,
) -> OnDiskDataset:
    r"""Generates a graph chunk by chunk straight into the dataset directory
    :obj:`out_dir` (memory: one chunk of nodes and their edges, plus 8 bytes
    per node for the CSC offsets)."""
    if isinstance(preset_or_config, str):
        if preset_or_config not in DISK_PRESETS:
            raise ValueError(f"unknown disk preset {preset_or_config!r}: "
                             f"pass one of {', '.join(DISK_PRESETS)}")
        name = preset_or_config
        cfg = DISK_PRESETS[name]
    else:
        name, cfg = 'disk-synthetic-custom', preset_or_config
    cfg = cfg.scaled(scale) if scale != 1.0 else cfg
    out_dir = Path(out_dir).expanduser()
    check_target(out_dir, overwrite)
    n, started = cfg.num_nodes, time.perf_counter()
    layout = _Layout(cfg, seed)
    counts = np.zeros(n, dtype=np.int32)
    chunks = range(0, n, CHUNK_NODES)

    def indices() -> Iterator[np.ndarray]:
        for start in chunks:
            end = min(start + CHUNK_NODES, n)
            keys = _in_edges(cfg, layout, seed, start, end)
            counts[start:end] = torch.bincount(
                torch.div(keys, n, rounding_mode='floor'),
                minlength=end - start).numpy()
            yield (keys % n).to(torch.int32).numpy()

    def indptr() -> Iterator[np.ndarray]:
        yield np.zeros(1, dtype=np.int64)
        total = 0
        for start in chunks:
            part = np.cumsum(counts[start:start + CHUNK_NODES],
                             dtype=np.int64) + total
            total = int(part[-1])
            yield part

    centroid = torch.randn(cfg.num_classes, cfg.num_features,
                           generator=_generator(seed, 1, 0))
    centroid *= cfg.feature_signal / centroid.norm(dim=1, keepdim=True)

    def label(start: int) -> Tensor:
        v = torch.arange(start, min(start + CHUNK_NODES, n))
        return layout.position(v) % layout.k % cfg.num_classes

    def features() -> Iterator[np.ndarray]:
        for start in chunks:
            y = label(start)
            x = torch.randn(y.numel(), cfg.num_features,
                            generator=_generator(seed, 2, start // CHUNK_NODES))
            yield x.add_(centroid[y]).numpy()

    def mask(low: float, high: float) -> Iterator[np.ndarray]:
        for start in chunks:
            u = torch.rand(min(CHUNK_NODES, n - start),
                           generator=_generator(seed, 3, start // CHUNK_NODES))
            yield ((u >= low) & (u < high)).numpy()

    train, val = cfg.train_fraction, cfg.val_fraction
    with Staging(out_dir, overwrite, progress) as st:
        st.write_array('indices', indices, default_dtype='int32')
        st.write_array('indptr', indptr, expect_rows=n + 1)
        st.write_array('x', features, expect_rows=n)
        st.write_array('y', lambda: (label(s).numpy() for s in chunks),
                       expect_rows=n)
        for key, low, high in (('train_mask', 0.0, train),
                               ('val_mask', train, train + val),
                               ('test_mask', train + val,
                                train + val + cfg.test_fraction)):
            st.write_array(key, lambda lo=low, hi=high: mask(lo, hi),
                           expect_rows=n)
        num_edges = int(counts.sum(dtype=np.int64))
        command = (f'pyg-fastload prepare --preset {name} --seed {seed}'
                   + (f' --scale {scale:g}' if scale != 1.0 else '')
                   + f' --overwrite {out_dir}')
        st.commit(build_meta(
            name, n, num_edges, cfg.num_classes,
            f"synthetic graph '{name}' generated chunk by chunk to disk "
            f"(pyg_fastload.datasets.disk_synthetic; directed, "
            f"degree-skewed communities, in-edges in CSC order)",
            {'command': command,
             'synthetic': {'config': asdict(cfg), 'seed': int(seed),
                           'scale': scale,
                           'seconds': round(time.perf_counter() - started,
                                            1)}}))
    return open_dataset_dir(out_dir, verify='size')
