r"""Converting OGB's heterogeneous node-property layout (``ogbn-mag``,
already unzipped on local disk; nothing is downloaded) into a
heterogeneous dataset directory.

The raw folder holds ``num-node-dict.csv.gz`` (a header of node types and
one row of counts), ``relations/<src>___<rel>___<dst>/edge.csv.gz`` (and
``num-edge-list.csv.gz``; the relations are listed in
``triplet-type-list.csv.gz``, else taken from the folder names),
``node-feat/<type>/node-feat.csv.gz`` and ``node_year.csv.gz`` beside it,
``node-label/<type>/node-label.csv.gz``; the split is
``split/<name>/<type>/{train,valid,test}.csv.gz`` beside ``raw/`` (OGB's
archive) or inside it (PyG's ``OGB_MAG`` raw folder)."""
from __future__ import annotations

import gzip
import os
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, Union

import numpy as np
import torch

from ..graph.hetero_topology import EdgeType
from ..graph.topology import CSCTopology
from ..io.csc_sort import check_node_count
from ..io.format import DatasetFormatError, check_name, int_arg
from ..io import OnDiskHeteroDataset, write_dataset_dir
from .ogb_raw import SPLITS, iter_csv, labels_chunk, read_scalar, split_mask

__all__ = ['prepare_ogb_hetero']

PathLike = Union[str, 'os.PathLike[str]']

#: Node files beside the features, stored under these names (PyG's).
_EXTRA_NODE_FILES = {'node_year': 'year'}


def _text_rows(file: Path) -> List[List[str]]:
    r"""The comma-separated text lines of a small (gzipped) CSV file."""
    if not file.is_file():
        raise DatasetFormatError(f'{file}: missing; it is part of every '
                                 f'heterogeneous OGB dataset: unzip the '
                                 f'archive again')
    opener = gzip.open if file.suffix == '.gz' else open
    try:
        with opener(file, 'rt') as f:
            text = f.read(1 << 20)
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise DatasetFormatError(f'{file}: unreadable ({exc}); unzip the '
                                 f'archive again') from None
    return [line.strip().split(',') for line in text.splitlines()
            if line.strip()]


def _node_counts(raw: Path) -> Dict[str, int]:
    file = raw / 'num-node-dict.csv.gz'
    rows = _text_rows(file)
    if len(rows) != 2 or len(rows[0]) != len(rows[1]):
        raise DatasetFormatError(f'{file}: expected a header of node types '
                                 f'and one row of counts')
    counts = {}
    for name, value in zip(*rows):
        try:
            check_name(name, 'node type', str(file))
            counts[name] = int_arg(int(value), f'num_nodes[{name!r}]')
        except ValueError as exc:
            raise DatasetFormatError(f'{file}: {exc}') from None
    return counts


def _relation(raw: Path, edge_type: EdgeType, counts: Dict[str, int]
              ) -> np.ndarray:
    r"""The ``[2, E]`` edge list of one relation, checked."""
    folder = raw / 'relations' / '___'.join(edge_type)
    file = folder / 'edge.csv.gz'
    if not file.is_file():
        raise DatasetFormatError(f'{file}: missing (edge type {edge_type}); '
                                 f'unzip the archive again')
    pairs = [p for p in iter_csv(file, np.int64, num_cols=2)]
    edges = np.concatenate(pairs) if pairs else np.zeros((0, 2), np.int64)
    listed = folder / 'num-edge-list.csv.gz'
    if listed.exists() and read_scalar(listed) != edges.shape[0]:
        raise DatasetFormatError(f'{file}: holds {edges.shape[0]} edges but '
                                 f'{listed.name} says {read_scalar(listed)};'
                                 f' the file is truncated: unzip it again')
    for col, end in ((0, edge_type[0]), (1, edge_type[2])):
        ids = edges[:, col]
        if ids.size and (ids.min() < 0 or ids.max() >= counts[end]):
            raise DatasetFormatError(
                f'{file}: edge type {edge_type} has {end!r} id '
                f'{int(ids.max() if ids.max() >= counts[end] else ids.min())}'
                f', outside [0, {counts[end]})')
    return np.ascontiguousarray(edges.T)


def _undirected(edge_index: torch.Tensor, num_nodes: int) -> torch.Tensor:
    r"""Both directions of every edge, duplicates removed (PyG's
    ``to_undirected``), sorted by destination then source."""
    both = torch.cat([edge_index, edge_index.flip(0)], dim=1)
    key = torch.unique(both[1] * num_nodes + both[0])
    return torch.stack([key % num_nodes, key // num_nodes])


def _node_arrays(raw: Path, counts: Dict[str, int],
                 split_dir: Optional[Path]
                 ) -> Tuple[Dict[str, Dict[str, Any]], Optional[int],
                            Optional[str]]:
    arrays: Dict[str, Dict[str, Any]] = {t: {} for t in counts}
    for node_type in counts:
        feat = raw / 'node-feat' / node_type / 'node-feat.csv.gz'
        if feat.is_file():
            arrays[node_type]['x'] = (
                lambda f=feat: (c.astype(np.float32)
                                for c in iter_csv(f, np.float32)))
        for extra, key in _EXTRA_NODE_FILES.items():
            file = raw / 'node-feat' / node_type / f'{extra}.csv.gz'
            if not file.is_file():
                file = raw / extra / node_type / f'{extra}.csv.gz'
            if file.is_file():
                arrays[node_type][key] = np.concatenate(
                    list(iter_csv(file, np.int64))).reshape(-1)
    num_classes, target = None, None
    for node_type in counts:
        file = raw / 'node-label' / node_type / 'node-label.csv.gz'
        if not file.is_file():
            continue
        state = {'missing': 0, 'max': -1, 'columns': 1}
        arrays[node_type]['y'] = np.concatenate(
            [labels_chunk(c, file, state, counts[node_type])
             for c in iter_csv(file, np.float64)])
        num_classes, target = state['max'] + 1, node_type
    if split_dir is None:
        return arrays, num_classes, target
    for node_type in sorted(p.name for p in split_dir.iterdir()
                            if p.is_dir()):
        if node_type not in counts:
            raise DatasetFormatError(f'{split_dir / node_type}: not a node '
                                     f'type of the dataset')
        for name, key in SPLITS:
            arrays[node_type][key] = split_mask(
                split_dir / node_type / f'{name}.csv.gz', counts[node_type])
    return arrays, num_classes, target


def prepare_ogb_hetero(root: Path, raw: Path, name: str, out_dir: Path,
                       progress: bool, overwrite: bool, symmetrize: bool,
                       split_dir: Optional[Path]) -> OnDiskHeteroDataset:
    r"""Converts a heterogeneous OGB dataset (``ogbn-mag``) at :obj:`root`
    (raw files in :obj:`raw`) into a heterogeneous dataset directory
    (:func:`~pyg_fastload.datasets.prepare_ogb` checked :obj:`out_dir` and
    chose :obj:`split_dir`).

    With :obj:`symmetrize` edges are made undirected as PyG's
    ``ToUndirected`` does on ``HeteroData``: a relation within one node type
    gets both directions (duplicates removed), every other relation
    ``(s, rel, d)`` a reverse relation ``(d, 'rev_' + rel, s)``.
    Features, labels (missing ones ``-1``), years and the split's masks
    are stored per node type; edge relation-type files are not.
    """
    counts = _node_counts(raw)
    try:  # before anything is allocated for that many nodes
        check_node_count(sum(counts.values()), out_dir)
    except ValueError as exc:
        raise DatasetFormatError(f"{raw / 'num-node-dict.csv.gz'}: node "
                                 f"counts {counts}: {exc}") from None
    relations: Dict[EdgeType, CSCTopology] = {}
    listed = raw / 'triplet-type-list.csv.gz'
    rows = _text_rows(listed) if listed.is_file() else [
        p.name.split('___') for p in sorted((raw / 'relations').iterdir())
        if p.is_dir()] if (raw / 'relations').is_dir() else []
    if not rows:
        raise DatasetFormatError(f"{raw / 'relations'}: no relations; "
                                 f"unzip the archive again")
    for row in rows:
        if len(row) != 3 or row[0] not in counts or row[2] not in counts:
            raise DatasetFormatError(
                f"{raw}: relation {','.join(row)!r} is "
                f"not a (source, relation, destination) of the node types "
                f"{', '.join(counts)}")
        edge_type = (row[0], row[1], row[2])
        edge_index = torch.from_numpy(_relation(raw, edge_type, counts))
        src, rel, dst = edge_type
        if symmetrize and src == dst:
            edge_index = _undirected(edge_index, counts[src])
        relations[edge_type] = CSCTopology.from_edge_index(
            edge_index, counts[dst], num_sources=counts[src])
        if symmetrize and src != dst:
            relations[(dst, f'rev_{rel}', src)] = \
                CSCTopology.from_edge_index(edge_index.flip(0), counts[src],
                                            num_sources=counts[dst])
    arrays, num_classes, target = _node_arrays(raw, counts, split_dir)
    how = ('made undirected like PyG ToUndirected' if symmetrize
           else 'as listed')
    return write_dataset_dir(
        out_dir, num_nodes=counts, relations=relations, node_arrays=arrays,
        name=name, source=f"OGB '{name}' from '{root.resolve()}' (edges "
        f"{how})", num_classes=num_classes, target=target,
        overwrite=overwrite, progress=progress,
        extra_meta={'command': f"pyg-fastload prepare --ogb {name} "
                               f"--raw-dir {root}"
                               f"{'' if symmetrize else ' --directed'} "
                               f"--overwrite {out_dir}"})
