r"""Synthetic graphs written straight to disk in bounded memory, for
features larger than memory, by one function for both kinds
(:func:`prepare_disk_synthetic`):

* ``papers-like``, shaped like ``ogbn-papers100M`` (128 float32 features,
  172 classes, about 14.5 in-edges per node, about 1.4% of the nodes
  labelled) at a size whose features exceed this 24 GiB machine's memory
  (56M nodes: 28.7 GB of features), and ``scale`` to grow it (``scale=2``:
  112M nodes, the real size);
* ``mag240m-like``, heterogeneous, shaped like OGB-LSC ``MAG240M``
  (121,751,666 papers with 768 float16 features and 153 classes, the only
  type with features, labels and masks; 122,383,112 authors; 25,721
  institutions; 386M authorships, 1.30B citations, 44.6M affiliations),
  every relation also stored reversed (``rev_...``) as the ``mag-like``
  preset does (PyG's ``ToUndirected``): 3.46B edges and about 235 GB at
  ``scale=1``, hence ``scale`` (times every node and edge count; default
  :data:`DEFAULT_SCALE`, about 2.4 GB).

``papers-like``: every chunk of destination nodes is generated on its own
from the seed, so memory stays at one chunk plus the ``indptr`` counts, and
the topology comes out in CSC order without an external sort. The model (a
directed, degree-skewed community graph) is described in
``docs/guide/storage-tiers.md``.

``mag240m-like`` is ``mag-like``'s graph
(:mod:`~pyg_fastload.datasets.hetero_synthetic`: power-law expected degrees
on both ends of every relation, drawn by inverse CDF; citations
homophilous) drawn chunk by chunk, every chunk of edges from its own seeded
generator, so that each pass of the out-of-core sort of
:func:`~pyg_fastload.io.write_dataset_dir` draws a relation again rather
than holding it; the papers' labels, features and masks are
``papers-like``'s (:class:`NodeChunks`). Memory: one chunk of edges or of
papers, plus 8 bytes per node (its type's CDF) and 24 per node of the
destination type of the relation being sorted.

The same preset, scale and seed give the same files.
"""
from __future__ import annotations

import math
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, Tuple, Union

import numpy as np
import torch
from torch import Tensor

from ..config import format_bytes
from ..io import open_dataset_dir, write_dataset_dir
from ..io.csc_sort import EdgeChunks
from ..io.format import build_meta
from ..io.reader import OnDiskDataset, OnDiskHeteroDataset
from ..io.staging import Staging, check_target
from .hetero_synthetic import HeteroGraphConfig, _draw, _power_law
from .synthetic import _generator

__all__ = ['DiskGraphConfig', 'HeteroDiskConfig', 'DISK_PRESETS',
           'DEFAULT_SCALE', 'NodeChunks', 'prepare_disk_synthetic']

EdgeType = Tuple[str, str, str]

#: Destination nodes generated per chunk (about 15M edges at papers-like's
#: mean degree; the chunk's arrays take a few hundred MB).
CHUNK_NODES = 1 << 20
#: Edges drawn per chunk of a heterogeneous graph (a few hundred MB of
#: temporaries).
CHUNK_EDGES = 1 << 22
#: Nodes per chunk of a heterogeneous graph's node arrays (768 features:
#: 100 MB of float32).
TYPED_CHUNK_NODES = 1 << 15
#: ``--scale`` of a heterogeneous preset (``mag240m-like``): 2.4 GB and
#: about a minute on 2 cores, so it fits beside other datasets on this
#: machine's disk (0.1: 24 GB; 1: 235 GB).
DEFAULT_SCALE = 0.01
_STAGE_WEIGHTS, _STAGE_EDGES = 4, 5

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


@dataclass(frozen=True)
class HeteroDiskConfig(HeteroGraphConfig):
    r"""A :class:`~pyg_fastload.datasets.HeteroGraphConfig` generated to
    disk chunk by chunk (see the module), every relation stored with its
    reverse.

    Args:
        feature_dtype (str): dtype of the labelled type's ``x``.
        train_fraction, val_fraction, test_fraction (float): the shares of
            the labelled type's nodes in its masks.
        others: as :class:`~pyg_fastload.datasets.HeteroGraphConfig`.
    """
    feature_dtype: str = 'float16'
    train_fraction: float = 0.0091
    val_fraction: float = 0.0011
    test_fraction: float = 0.0012

    def __post_init__(self) -> None:
        where = 'of HeteroDiskConfig'
        if self.labelled not in self.num_nodes:
            raise ValueError(f"invalid 'labelled' = {self.labelled!r} "
                             f"{where}: pass one of the node types "
                             f"({', '.join(self.num_nodes)})")
        for edge_type, count in self.num_edges.items():
            for end in (edge_type[0], edge_type[2]):
                if end not in self.num_nodes:
                    raise ValueError(
                        f"invalid 'num_edges' {where}: edge type "
                        f"{edge_type} names node type {end!r}, which is not "
                        f"in 'num_nodes' ({', '.join(self.num_nodes)}); add "
                        f"it with its node count or drop the edge type")
            if count < 0:
                raise ValueError(f"invalid 'num_edges' {where}: edge type "
                                 f"{edge_type} has {count} edges; pass >= 0")
        if not torch.empty(0, dtype=getattr(
                torch, self.feature_dtype, torch.int8)).is_floating_point():
            raise ValueError(f"invalid 'feature_dtype' = "
                             f"{self.feature_dtype!r} {where}: pass a float "
                             f"dtype such as 'float16' or 'float32'")
        fractions = (self.train_fraction, self.val_fraction,
                     self.test_fraction)
        if min(fractions) < 0 or sum(fractions) > 1:
            raise ValueError(f"invalid 'train_fraction', 'val_fraction', "
                             f"'test_fraction' = {fractions} {where}: each "
                             f">= 0, summing to at most 1")

    def check_scale(self, scale: float) -> None:
        r"""Refuses a :obj:`scale` that is not a finite number > 0 (a graph
        generated to disk may grow past its preset)."""
        if isinstance(scale, bool) or not isinstance(scale, (int, float)) \
                or not (scale > 0 and math.isfinite(scale)):
            raise ValueError(f"invalid 'scale' = {scale!r} (--scale): pass "
                             f"a number > 0, times the preset's node and "
                             f"edge counts (e.g. {DEFAULT_SCALE})")

    def nbytes(self) -> int:
        r"""The bytes of its dataset directory."""
        papers = self.num_nodes[self.labelled]
        row = self.num_features * torch.empty(0, dtype=getattr(
            torch, self.feature_dtype)).element_size() + 8 + 3  # x, y, masks
        index = 4 if sum(self.num_nodes.values()) <= 2**31 else 8
        segments = sum(self.num_nodes[s] + self.num_nodes[d]
                       for s, _, d in self.num_edges)
        return (papers * row + 2 * sum(self.num_edges.values()) * (index + 8)
                + 8 * (segments + 1))


#: Presets generated to disk chunk by chunk (``pyg-fastload prepare --preset
#: NAME [--scale S] OUT_DIR``): ``papers-like`` homogeneous, ``mag240m-like``
#: heterogeneous (scale 1 is the real size of both).
DISK_PRESETS: Dict[str, Union[DiskGraphConfig, HeteroDiskConfig]] = {
    'papers-like': DiskGraphConfig(num_nodes=56_000_000, mean_degree=14.5,
                                   num_features=128, num_classes=172),
    'mag240m-like': HeteroDiskConfig(
        num_nodes={'paper': 121_751_666, 'author': 122_383_112,
                   'institution': 25_721},
        num_edges={('author', 'affiliated_with', 'institution'): 44_592_586,
                   ('author', 'writes', 'paper'): 386_022_720,
                   ('paper', 'cites', 'paper'): 1_297_748_926},
        num_features=768, num_classes=153),
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


def _relation(cfg: HeteroDiskConfig, cdfs: Dict[str, Tensor], layout: Layout,
              seed: int, r: int, reverse: bool) -> EdgeChunks:
    r"""The edge chunks of relation :obj:`r` of :obj:`cfg` (reversed: its
    ``rev_`` relation), drawn again on every call."""
    edge_type = list(cfg.num_edges)[r]
    src_type, _, dst_type = edge_type
    count = cfg.num_edges[edge_type]
    homophilous = src_type == dst_type == cfg.labelled

    def chunks() -> Iterator[Tuple[Tensor, Tensor]]:
        for i, start in enumerate(range(0, count, CHUNK_EDGES)):
            size = min(CHUNK_EDGES, count - start)
            gen = _generator(seed, _STAGE_EDGES, r, i)
            dst = _draw(cdfs[dst_type], size, gen)
            src = _draw(cdfs[src_type], size, gen)
            if homophilous:  # a uniform node of the class of dst
                same = torch.rand(size, generator=gen) < cfg.homophily
                cls = layout.position(dst[same]) % layout.k
                rank = (layout.members(cls).double() * torch.rand(
                    cls.numel(), generator=gen, dtype=torch.float64)).long()
                src[same] = layout.node(cls + layout.k * rank)
            yield (dst, src) if reverse else (src, dst)
    return chunks


def _write_csc(cfg: DiskGraphConfig, name: str, out_dir: Path, seed: int,
               progress: bool, overwrite: bool, command: str,
               synthetic: Dict[str, Any]) -> OnDiskDataset:
    r"""Generates a homogeneous graph chunk by chunk into :obj:`out_dir`
    (memory: one chunk of nodes and their edges, plus 8 bytes per node for
    the CSC offsets)."""
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
        st.commit(build_meta(
            name, n, num_edges, cfg.num_classes,
            f"synthetic graph '{name}' generated chunk by chunk to disk "
            f"(pyg_fastload.datasets.disk_synthetic; directed, "
            f"degree-skewed communities, in-edges in CSC order)",
            {'command': command,
             'synthetic': {**synthetic,
                           'seconds': round(time.perf_counter() - started,
                                            1)}}))
    return open_dataset_dir(out_dir, verify='size')


def _write_typed(cfg: HeteroDiskConfig, name: str, out_dir: Path,
                 seed: int, scale: float, progress: bool, overwrite: bool,
                 command: str, synthetic: Dict[str, Any]
                 ) -> OnDiskHeteroDataset:
    r"""Generates a heterogeneous graph chunk by chunk into :obj:`out_dir`
    (see the module for the memory), refusing a scale that would not fit
    on its disk."""
    probe = out_dir.resolve().parent
    while not probe.exists():
        probe = probe.parent
    need, free = cfg.nbytes(), shutil.disk_usage(probe).free
    if need > free:
        raise ValueError(
            f"invalid 'scale' = {scale:g} (--scale): it writes about "
            f"{format_bytes(need)}, more than the {format_bytes(free)} free "
            f"in '{probe}'; pass a scale of at most about "
            f"{scale * free / need:.2g}, or another OUT_DIR")
    papers = cfg.num_nodes[cfg.labelled]
    layout = Layout(papers, cfg.num_classes, seed)
    cdfs = {t: torch.cumsum(_power_law(n, cfg.degree_exponent, _generator(
        seed, _STAGE_WEIGHTS, i)), 0)
        for i, (t, n) in enumerate(cfg.num_nodes.items())}
    relations: Dict[EdgeType, EdgeChunks] = {}
    for r, (src, rel, dst) in enumerate(cfg.num_edges):
        relations[src, rel, dst] = _relation(cfg, cdfs, layout, seed, r, False)
        relations[dst, f'rev_{rel}', src] = _relation(cfg, cdfs, layout, seed,
                                                      r, True)
    nodes = NodeChunks(layout, cfg.num_classes, cfg.num_features,
                       cfg.feature_signal, seed, TYPED_CHUNK_NODES)
    arrays = nodes.arrays((cfg.train_fraction, cfg.val_fraction,
                           cfg.test_fraction),
                          getattr(torch, cfg.feature_dtype))
    extra: Dict[str, Any] = {'command': command, 'synthetic': synthetic}
    return write_dataset_dir(
        out_dir, num_nodes=cfg.num_nodes, relations=relations,
        node_arrays={cfg.labelled: arrays}, name=name,
        source=(f"synthetic heterogeneous graph '{name}', seed {seed}, "
                f"scale {scale:g}, generated chunk by chunk to disk "
                f"(pyg_fastload.datasets.disk_synthetic; every "
                f"relation also stored reversed)"),
        num_classes=cfg.num_classes, target=cfg.labelled,
        overwrite=overwrite, progress=progress, extra_meta=extra,
        verify='size')


def prepare_disk_synthetic(
    preset_or_config: Union[str, DiskGraphConfig, HeteroDiskConfig],
    out_dir: Union[str, Path],
    seed: int = 0,
    scale: float | None = None,
    progress: bool = True,
    overwrite: bool = False,
) -> Union[OnDiskDataset, OnDiskHeteroDataset]:
    r"""Generates a graph chunk by chunk straight into the dataset directory
    :obj:`out_dir`: a homogeneous one of a :class:`DiskGraphConfig`, a
    heterogeneous one of a :class:`HeteroDiskConfig` (see the module for
    the memory).

    Args:
        preset_or_config (str or DiskGraphConfig or HeteroDiskConfig): a
            name of :data:`DISK_PRESETS` or a configuration.
        out_dir (str or pathlib.Path): the directory to create.
        seed (int): the random seed. (default: :obj:`0`)
        scale (float, optional): times the node count (of a heterogeneous
            graph, every node and edge count), > 0. (default: :obj:`1`, or
            :data:`DEFAULT_SCALE` for a heterogeneous graph)
        progress (bool): show progress bars. (default: :obj:`True`)
        overwrite (bool): replace an existing :obj:`out_dir`.
            (default: :obj:`False`)

    Example:
        >>> from pyg_fastload.datasets import prepare_disk_synthetic
        >>> ds = prepare_disk_synthetic('mag240m-like', 'mag-dir',
        ...                             scale=0.0002)  # doctest: +SKIP
    """
    if isinstance(preset_or_config, str):
        if preset_or_config not in DISK_PRESETS:
            raise ValueError(f"unknown disk preset {preset_or_config!r}: "
                             f"pass one of {', '.join(DISK_PRESETS)}")
        name, cfg = preset_or_config, DISK_PRESETS[preset_or_config]
    else:
        cfg, name = preset_or_config, None
    typed = isinstance(cfg, HeteroDiskConfig)
    if name is None:
        name = 'hetero-disk-synthetic-custom' if typed else \
            'disk-synthetic-custom'
    if scale is None:
        scale = DEFAULT_SCALE if typed else 1.0
    cfg = cfg.scaled(scale)
    out_dir = Path(out_dir).expanduser()
    check_target(out_dir, overwrite)
    command = (f'pyg-fastload prepare --preset {name} --seed {seed}'
               + (f' --scale {scale:g}' if typed or scale != 1.0 else '')
               + f' --overwrite {out_dir}')
    synthetic = {'config': cfg.to_json() if typed else asdict(cfg),
                 'seed': int(seed), 'scale': scale}
    if typed:
        return _write_typed(cfg, name, out_dir, seed, scale, progress,
                            overwrite, command, synthetic)
    return _write_csc(cfg, name, out_dir, seed, progress, overwrite, command,
                      synthetic)
