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
from typing import Callable, Dict, Iterator, Tuple, Union

import numpy as np
import torch
from torch import Tensor

from ..io import open_dataset_dir
from ..io.format import build_meta
from ..io.reader import OnDiskDataset
from ..io.staging import Staging, check_target
from .synthetic import _generator

__all__ = ['DiskGraphConfig', 'DISK_PRESETS', 'NodeChunks',
           'prepare_disk_synthetic']

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


class Layout:
    r"""Positions, communities and ranks of :obj:`n` nodes in :obj:`k`
    communities (module docstring)."""
    def __init__(self, n: int, k: int, seed: int):
        self.n = n
        self.k = k
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


class NodeChunks:
    r"""The node arrays of a graph generated chunk by chunk: labels (the
    class of the node's community in :obj:`layout`), features (a noisy
    class centroid of length :obj:`feature_signal`) and train/val/test
    masks; every chunk of :obj:`chunk` nodes from its own seeded
    generator, so memory holds one chunk."""
    def __init__(self, layout: Layout, num_classes: int, num_features: int,
                 feature_signal: float, seed: int, chunk: int):
        self.layout, self.num_classes, self.seed = layout, num_classes, seed
        self.num_features, self.chunk = num_features, chunk
        self.starts = range(0, layout.n, chunk)
        centroid = torch.randn(num_classes, num_features,
                               generator=_generator(seed, 1, 0))
        self.centroid = centroid * (feature_signal / centroid.norm(
            dim=1, keepdim=True))

    def labels(self, start: int) -> Tensor:
        r"""The labels of the chunk of nodes from :obj:`start`."""
        v = torch.arange(start, min(start + self.chunk, self.layout.n))
        return self.layout.position(v) % self.layout.k % self.num_classes

    def features(self, dtype: torch.dtype = torch.float32
                 ) -> Iterator[np.ndarray]:
        for start in self.starts:
            y = self.labels(start)
            x = torch.randn(y.numel(), self.num_features, generator=_generator(
                self.seed, 2, start // self.chunk))
            yield x.add_(self.centroid[y]).to(dtype).numpy()

    def _mask(self, low: float, high: float) -> Iterator[np.ndarray]:
        for start in self.starts:
            u = torch.rand(min(self.chunk, self.layout.n - start),
                           generator=_generator(self.seed, 3,
                                                start // self.chunk))
            yield ((u >= low) & (u < high)).numpy()

    def arrays(self, fractions: Tuple[float, float, float],
               dtype: torch.dtype = torch.float32
               ) -> Dict[str, Callable[[], Iterator[np.ndarray]]]:
        r"""``x`` (of :obj:`dtype`), ``y`` and the masks of the train, val
        and test :obj:`fractions`, as callables returning row chunks."""
        train, val, test = fractions
        return {
            'x': lambda: self.features(dtype),
            'y': lambda: (self.labels(s).numpy() for s in self.starts),
            'train_mask': lambda: self._mask(0.0, train),
            'val_mask': lambda: self._mask(train, train + val),
            'test_mask': lambda: self._mask(train + val, train + val + test)}


def _in_edges(cfg: DiskGraphConfig, layout: Layout, seed: int, start: int,
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
    layout = Layout(n, cfg.num_classes * cfg.communities_per_class, seed)
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

    nodes = NodeChunks(layout, cfg.num_classes, cfg.num_features,
                       cfg.feature_signal, seed, CHUNK_NODES)
    with Staging(out_dir, overwrite, progress) as st:
        st.write_array('indices', indices, default_dtype='int32')
        st.write_array('indptr', indptr, expect_rows=n + 1)
        for key, source in nodes.arrays((cfg.train_fraction,
                                         cfg.val_fraction,
                                         cfg.test_fraction)).items():
            st.write_array(key, source, expect_rows=n)
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
