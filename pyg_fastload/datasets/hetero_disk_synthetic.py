r"""Heterogeneous synthetic graphs generated straight to disk in bounded
memory: the ``mag240m-like`` preset, shaped like OGB-LSC ``MAG240M``
(121,751,666 papers with 768 float16 features and 153 classes, the only type
with features, labels and masks; 122,383,112 authors; 25,721 institutions;
386M authorships, 1.30B citations, 44.6M affiliations), every relation also
stored reversed (``rev_...``) as the ``mag-like`` preset does (PyG's
``ToUndirected``): 3.46B edges and about 235 GB at ``scale=1``, hence
``scale`` (times every node and edge count; default 0.01, about 2.4 GB).

The graph is ``mag-like``'s (:mod:`~pyg_fastload.datasets.hetero_synthetic`:
power-law expected degrees on both ends of every relation, drawn by inverse
CDF; citations homophilous) drawn chunk by chunk, every chunk of edges from
its own seeded generator, so that each pass of the out-of-core sort of
:func:`~pyg_fastload.io.write_dataset_dir` draws a relation again
rather than holding it; the papers' labels, features and masks are
``papers-like``'s (:class:`~pyg_fastload.datasets.disk_synthetic.NodeChunks`).
Memory: one chunk of edges or of papers, plus 8 bytes per node (its type's
CDF) and 24 per node of the destination type of the relation being sorted.
The same preset, scale and seed give the same files.
"""
from __future__ import annotations

import math
import shutil
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Dict, Iterator, Tuple, Union

import torch
from torch import Tensor

from ..config import format_bytes
from ..io.csc_sort import EdgeChunks
from ..io import OnDiskHeteroDataset, write_dataset_dir
from ..io.staging import check_target
from .disk_synthetic import Layout, NodeChunks
from .hetero_synthetic import HeteroGraphConfig, _draw, _power_law
from .synthetic import _generator

__all__ = ['HeteroDiskConfig', 'HETERO_DISK_PRESETS', 'DEFAULT_SCALE',
           'prepare_hetero_disk_synthetic']

EdgeType = Tuple[str, str, str]

#: Edges drawn per chunk (a few hundred MB of temporaries).
CHUNK_EDGES = 1 << 22
#: Papers per chunk of node arrays (768 features: 100 MB of float32).
CHUNK_NODES = 1 << 15
#: ``--scale`` of ``pyg-fastload prepare --preset mag240m-like``: 2.4 GB
#: and about a minute on 2 cores, so it fits beside other datasets on this
#: machine's disk (0.1: 24 GB; 1: 235 GB).
DEFAULT_SCALE = 0.01
_STAGE_WEIGHTS, _STAGE_EDGES = 4, 5


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

    def scaled(self, scale: float) -> 'HeteroDiskConfig':
        r"""Every node and edge count times :obj:`scale` (any positive
        number; at least 2 nodes of a type, and classes never more than
        labelled nodes)."""
        if isinstance(scale, bool) or not isinstance(scale, (int, float)) \
                or not (scale > 0 and math.isfinite(scale)):
            raise ValueError(f"invalid 'scale' = {scale!r} (--scale): pass "
                             f"a number > 0, times the preset's node and "
                             f"edge counts (e.g. {DEFAULT_SCALE})")
        nodes = {t: max(2, int(round(n * scale)))
                 for t, n in self.num_nodes.items()}
        return replace(self, num_nodes=nodes, num_edges={
            e: int(round(n * scale)) for e, n in self.num_edges.items()},
            num_classes=min(self.num_classes, nodes[self.labelled]))

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


#: Heterogeneous presets generated to disk (``pyg-fastload prepare --preset
#: mag240m-like [--scale S] OUT_DIR``; scale 1 is the real size).
HETERO_DISK_PRESETS: Dict[str, HeteroDiskConfig] = {
    'mag240m-like': HeteroDiskConfig(
        num_nodes={'paper': 121_751_666, 'author': 122_383_112,
                   'institution': 25_721},
        num_edges={('author', 'affiliated_with', 'institution'): 44_592_586,
                   ('author', 'writes', 'paper'): 386_022_720,
                   ('paper', 'cites', 'paper'): 1_297_748_926},
        num_features=768, num_classes=153),
}


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


def prepare_hetero_disk_synthetic(
    preset_or_config: Union[str, HeteroDiskConfig],
    out_dir: Union[str, Path],
    seed: int = 0,
    scale: float = DEFAULT_SCALE,
    progress: bool = True,
    overwrite: bool = False,
) -> OnDiskHeteroDataset:
    r"""Generates a heterogeneous graph chunk by chunk straight into the
    dataset directory :obj:`out_dir` (see the module for the memory).

    Args:
        preset_or_config (str or HeteroDiskConfig): ``'mag240m-like'`` or a
            configuration.
        out_dir: the directory to create.
        seed (int): the random seed. (default: :obj:`0`)
        scale (float): every node and edge count times this, > 0.
            (default: :obj:`DEFAULT_SCALE`)
    """
    if isinstance(preset_or_config, str):
        if preset_or_config not in HETERO_DISK_PRESETS:
            raise ValueError(f"invalid 'preset' = {preset_or_config!r}: "
                             f"pass one of {', '.join(HETERO_DISK_PRESETS)}")
        name, cfg = preset_or_config, HETERO_DISK_PRESETS[preset_or_config]
    else:
        name, cfg = 'hetero-disk-synthetic-custom', preset_or_config
    cfg = cfg.scaled(scale)
    out_dir = Path(out_dir).expanduser()
    check_target(out_dir, overwrite)
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
                       cfg.feature_signal, seed, CHUNK_NODES)
    arrays = nodes.arrays((cfg.train_fraction, cfg.val_fraction,
                           cfg.test_fraction),
                          getattr(torch, cfg.feature_dtype))
    extra: Dict[str, Any] = {
        'command': f'pyg-fastload prepare --preset {name} --seed {seed} '
                   f'--scale {scale:g} --overwrite {out_dir}',
        'synthetic': {'config': cfg.to_json(), 'seed': int(seed),
                      'scale': scale}}
    return write_dataset_dir(
        out_dir, num_nodes=cfg.num_nodes, relations=relations,
        node_arrays={cfg.labelled: arrays}, name=name,
        source=(f"synthetic heterogeneous graph '{name}', seed {seed}, "
                f"scale {scale:g}, generated chunk by chunk to disk "
                f"(pyg_fastload.datasets.hetero_disk_synthetic; every "
                f"relation also stored reversed)"),
        num_classes=cfg.num_classes, target=cfg.labelled,
        overwrite=overwrite, progress=progress, extra_meta=extra,
        verify='size')

