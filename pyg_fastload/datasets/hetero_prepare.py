r"""Writing a :class:`~torch_geometric.data.HeteroData` (in memory, from a
``.pt`` file, or a heterogeneous synthetic preset) into a heterogeneous
dataset directory."""
from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, Union

import torch
from torch import Tensor
from torch_geometric.data import HeteroData

from ..graph.convert import check_edge_rows
from ..graph.kind import is_data
from ..graph.topology import CSCTopology
from ..io.csc_sort import check_node_count
from ..io.format import DatasetFormatError, flat_labels, int_arg
from ..io import OnDiskHeteroDataset, write_dataset_dir
from ..io.staging import check_target
from ..io.writer import label_classes
from .hetero_synthetic import HETERO_PRESETS, generate_hetero

__all__ = ['write_hetero_data', 'prepare_hetero_preset', 'attribute_level']

PathLike = Union[str, 'os.PathLike[str]']


def attribute_level(store: Any, key: str, value: Any,
                    num_nodes: Optional[int], num_edges: Optional[int],
                    where: str, attr: str) -> Optional[str]:
    r"""Whether attribute :obj:`key` of :obj:`store` (a ``Data``, or a
    ``HeteroData``'s node or edge store) is stored, and as what:
    ``'node'`` for a node-level tensor (:obj:`num_nodes` rows,
    ``is_node_attr``), ``'edge'`` for an edge-level one (:obj:`num_edges`
    rows, one per column of ``edge_index``, ``is_edge_attr``), else
    :obj:`None` (not stored). A sparse tensor of either length is refused
    naming :obj:`where` (the file) and :obj:`attr` (how to reach it, e.g.
    ``data.time``)."""
    if not isinstance(value, Tensor) or value.dim() == 0:
        return None
    rows = value.size(0)
    if value.layout != torch.strided and rows in (num_nodes, num_edges):
        raise DatasetFormatError(
            f"{where}: '{key}' is a sparse tensor ({value.layout}); store it "
            f"dense ({attr} = {attr}.to_dense()) and save the file again")
    if rows == num_nodes and store.is_node_attr(key):
        return 'node'
    if rows == num_edges and store.is_edge_attr(key):
        return 'edge'
    return None


def _node_arrays(data: HeteroData, num_nodes: Dict[str, int], where: str,
                 skipped: List[str]) -> Dict[str, Dict[str, Tensor]]:
    arrays: Dict[str, Dict[str, Tensor]] = {}
    for node_type in data.node_types:
        store, count = data[node_type], num_nodes[node_type]
        arrays[node_type] = {}
        for key, value in store.items():
            if key == 'num_nodes':
                continue
            if not (isinstance(value, Tensor) and value.dim() >= 1):
                skipped.append(f'{node_type}.{key}')
                continue
            if value.size(0) != count:
                raise DatasetFormatError(
                    f"{where}: data[{node_type!r}].{key} has "
                    f"{value.size(0)} rows but node type {node_type!r} has "
                    f"{count} nodes; give every node one row (or fix "
                    f"data[{node_type!r}].num_nodes)")
            value = flat_labels(key, value)
            arrays[node_type][key] = value
    return arrays


def _relations(data: HeteroData, num_nodes: Dict[str, int], where: str,
               skipped: List[str]
               ) -> Tuple[Dict[Any, CSCTopology],
                          Dict[Any, Dict[str, Tensor]]]:
    r"""Every relation's CSC, and its edge-level tensors (one row per
    column of its ``edge_index``, :func:`attribute_level`) permuted into
    its CSC order."""
    relations, edge_arrays = {}, {}
    for edge_type in data.edge_types:
        src, _, dst = edge_type
        store = data[edge_type]
        if 'edge_index' not in store:
            raise DatasetFormatError(
                f"{where}: edge type {edge_type} has no 'edge_index' (an "
                f"adj_t or other layout); give it an edge_index")
        try:
            check_edge_rows(store, edge_type)
        except ValueError as error:
            raise DatasetFormatError(f'{where}: {error}') from None
        for end in (src, dst):
            if end not in num_nodes:
                raise DatasetFormatError(
                    f"{where}: edge type {edge_type} names node type "
                    f"{end!r}, which has no nodes; set "
                    f"data[{end!r}].num_nodes or drop the edge type")
        try:
            relations[edge_type] = csc = CSCTopology.from_edge_index(
                store.edge_index, num_nodes[dst],
                num_sources=num_nodes[src])
        except (TypeError, ValueError) as error:
            raise DatasetFormatError(f"{where}: edge type {edge_type}: "
                                     f"{error}") from None
        edge_arrays[edge_type] = {}
        for key, value in store.items():
            if key == 'edge_index':
                continue
            if attribute_level(store, key, value, None, csc.num_edges,
                               f'{where}: edge type {edge_type}',
                               f'data[{edge_type!r}].{key}') == 'edge':
                edge_arrays[edge_type][key] = csc.csc_order(value)
            else:
                skipped.append(f"{'__'.join(edge_type)}.{key}")
    return relations, edge_arrays


def write_hetero_data(
    data: HeteroData,
    out_dir: PathLike,
    *,
    name: str,
    source: str,
    overwrite: bool = False,
    progress: bool = True,
    extra_meta: Optional[Dict[str, Any]] = None,
    where: Optional[str] = None,
) -> OnDiskHeteroDataset:
    r"""Writes :obj:`data` as a heterogeneous dataset directory: every node
    type with its node-level tensors (``x``, ``y``, masks, ...; a type
    without any is declared by its node count), every edge type's
    ``edge_index`` as a CSC with ``edge_id`` mapping back to its columns,
    and its edge-level tensors (one row per column of its ``edge_index``:
    ``time``, ``edge_attr``, ...; :func:`attribute_level`) as its edge
    arrays, their rows permuted into its CSC order
    (:meth:`CSCTopology.csc_order`). Anything else is not stored (warned
    about; an ``edge_*`` tensor must still have one row per edge). The one
    node type with labels ``y`` is the ``target``; an integer ``y`` gives
    ``num_classes``. Errors name :obj:`where` (default: :obj:`name`)."""
    if not is_data(data, hetero=True):
        raise TypeError(f"'data' must be a HeteroData, got "
                        f"{type(data).__name__}")
    where = name if where is None else where
    num_nodes = {}
    for node_type in data.node_types:
        count = data[node_type].num_nodes
        if count is None:
            raise DatasetFormatError(
                f"{where}: node type {node_type!r} has no node count (no "
                f"'num_nodes' and no 'x'); set data[{node_type!r}].num_nodes")
        try:
            num_nodes[node_type] = int_arg(int(count), 'num_nodes')
        except ValueError as error:
            raise DatasetFormatError(f'{where}: node type {node_type!r}: '
                                     f'{error}') from None
    try:  # before anything is allocated for that many nodes
        check_node_count(sum(num_nodes.values()), Path(out_dir))
    except ValueError as error:
        raise DatasetFormatError(f'{where}: node counts {num_nodes}: '
                                 f'{error}') from None
    skipped: List[str] = []
    arrays = _node_arrays(data, num_nodes, where, skipped)
    labelled = [t for t, a in arrays.items() if 'y' in a]
    target = labelled[0] if len(labelled) == 1 else None
    num_classes = None
    if target is not None:
        y = arrays[target]['y']
        if y.dim() == 1 and not y.is_floating_point() and \
                y.dtype != torch.bool and y.numel():
            num_classes = label_classes(int(y.min()), int(y.max()),
                                        num_nodes[target],
                                        f'{where}: data[{target!r}].y')
    relations, edge_arrays = _relations(data, num_nodes, where, skipped)
    if skipped:
        warnings.warn(f"{where}: {', '.join(map(repr, skipped))} are "
                      f"neither node-level tensors nor edge-level tensors "
                      f"of their edge type's edge_index and are not stored",
                      UserWarning, stacklevel=2)
    extra = dict(extra_meta or {})
    extra['skipped_attributes'] = skipped
    return write_dataset_dir(
        out_dir, num_nodes=num_nodes, relations=relations, node_arrays=arrays,
        edge_arrays=edge_arrays, name=name, source=source,
        num_classes=num_classes, target=target,
        overwrite=overwrite, progress=progress, extra_meta=extra)


def prepare_hetero_preset(preset: str, out_dir: PathLike, seed: int = 0,
                          scale: float = 1.0, progress: bool = True,
                          overwrite: bool = False) -> OnDiskHeteroDataset:
    r"""Generates a heterogeneous preset (:data:`HETERO_PRESETS`,
    :func:`generate_hetero`) and writes it as a dataset directory.

    Args:
        preset (str): ``'mag-like'`` or ``'hetero-tiny'``.
        out_dir: the directory to create.
        seed (int): the random seed. (default: :obj:`0`)
        scale (float): every node and edge count times this, in (0, 1].
    """
    if preset not in HETERO_PRESETS:
        raise ValueError(f"invalid 'preset' = {preset!r}: pass one of "
                         f"{', '.join(HETERO_PRESETS)}")
    out_dir = Path(out_dir).expanduser()
    check_target(out_dir, overwrite)
    data = generate_hetero(preset, seed=seed, scale=scale)
    config = HETERO_PRESETS[preset]
    scaled = f' --scale {scale}' if scale != 1.0 else ''
    return write_hetero_data(
        data, out_dir, name=preset,
        source=(f"synthetic heterogeneous graph, preset '{preset}', seed "
                f"{seed}, scale {scale} (pyg_fastload.datasets."
                f"generate_hetero; every relation also stored reversed)"),
        overwrite=overwrite, progress=progress,
        extra_meta={
            'command': f'pyg-fastload prepare --preset {preset} --seed '
                       f'{seed}{scaled} --overwrite {out_dir}',
            'synthetic': {'config': config.to_json(), 'seed': int(seed),
                          'scale': scale}})
