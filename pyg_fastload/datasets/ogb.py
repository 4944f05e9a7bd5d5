r"""Converting a local OGB node-property dataset (its unzipped folder; nothing
is downloaded) into a dataset directory."""
from __future__ import annotations

import os
import time
import zipfile
from pathlib import Path
from typing import Any, Dict, Iterator, Optional, Tuple, Union

import numpy as np
import torch

from ..graph.topology import index_dtype_for
from ..io import format as fmt
from ..io.arrays import Source
from ..io.csc_sort import check_node_count, coalesce_csc, csc_from_edge_chunks
from ..io.format import DatasetFormatError, build_meta
from ..io.reader import OnDiskDataset, OnDiskHeteroDataset, open_dataset_dir
from ..io.staging import Staging, check_target
from .ogb_hetero import prepare_ogb_hetero
from .ogb_raw import (SPLITS, NpyMember, choose_split, iter_csv,
                      labels_chunk, read_scalar, split_mask)

__all__ = ['prepare_ogb']

PathLike = Union[str, 'os.PathLike[str]']


# ----------------------------------------------------------------- OGB -----
#: Known OGB node-property datasets: default split and whether the edges
#: are symmetrised (reverse edges added, duplicates removed).
_OGB_KNOWN: Dict[str, Dict[str, Any]] = {
    'ogbn-arxiv': {'split': 'time', 'symmetrize': True,
                   'why': 'arxiv lists directed citations; PyG users '
                          'symmetrise them (ToUndirected)'},
    'ogbn-products': {'split': 'sales_ranking', 'symmetrize': True,
                      'why': 'co-purchase edges are undirected and stored '
                             'once'},
    'ogbn-proteins': {'split': 'species', 'symmetrize': True,
                      'why': 'protein associations are undirected and '
                             'stored once'},
    'ogbn-papers100M': {'split': 'time', 'symmetrize': True,
                        'why': 'papers100M lists directed citations; they '
                               'are usually symmetrised'},
    'ogbn-mag': {'split': 'time', 'symmetrize': True,
                 'why': 'PyG users add reverse relations (ToUndirected)'},
}
#: Extra integer node files of the OGB raw folder, stored under these names.
_OGB_EXTRA_NODE_FILES = ('node_year', 'node_species')


def _ogb_name(name: str) -> str:
    if not isinstance(name, str) or not name:
        raise ValueError(f"invalid 'name' = {name!r}: pass an OGB dataset "
                         f"name such as 'ogbn-arxiv'")
    key = name.strip().lower().replace('_', '-')
    if not key.startswith('ogbn-'):
        key = 'ogbn-' + key
    for known in _OGB_KNOWN:
        if known.lower() == key:
            return known
    return key


def prepare_ogb(
    raw_dir: PathLike,
    name: str,
    out_dir: PathLike,
    progress: bool = True,
    overwrite: bool = False,
    symmetrize: Optional[bool] = None,
    split: Optional[str] = None,
) -> Union[OnDiskDataset, OnDiskHeteroDataset]:
    r"""Converts an OGB node-property dataset already on local disk (the
    unzipped OGB archive; nothing is downloaded and the ``ogb`` package is
    not used) into a dataset directory; ``ogbn-mag`` (OGB's heterogeneous
    layout) into a heterogeneous one (:func:`prepare_ogb_hetero`).

    Reads ``raw/edge.csv.gz``, ``raw/node-feat.csv.gz``,
    ``raw/node-label.csv.gz``, ``raw/num-node-list.csv.gz``,
    ``raw/num-edge-list.csv.gz`` (or ``raw/data.npz`` and
    ``raw/node-label.npz`` for ``ogbn-papers100M``) and
    ``split/<split>/{train,valid,test}.csv.gz``, all streamed in chunks.
    Missing labels (NaN) become ``-1``.

    Args:
        raw_dir (str or os.PathLike): the dataset root (holding ``raw/`` and
            ``split/``) or its ``raw/`` folder.
        name (str): the dataset, e.g. ``'ogbn-arxiv'``, ``'ogbn-products'``,
            ``'ogbn-papers100M'``, ``'ogbn-mag'`` (``'arxiv'`` works too).
        out_dir (str or os.PathLike): the dataset directory to create.
        progress (bool, optional): show progress bars. (default: :obj:`True`)
        overwrite (bool, optional): replace an existing :obj:`out_dir`.
            (default: :obj:`False`)
        symmetrize (bool, optional): add reverse edges and remove duplicate
            edges (like :class:`torch_geometric.transforms.ToUndirected`);
            :obj:`None` does so for ``ogbn-arxiv``, ``-products``,
            ``-proteins``, ``-papers100M`` and ``-mag`` (reverse relations).
            (default: :obj:`None`)
        split (str, optional): the folder under ``split/``; :obj:`None`
            takes the dataset's standard split (or the only one there).
            (default: :obj:`None`)
    """
    start_time = time.perf_counter()
    name = _ogb_name(name)
    known = _OGB_KNOWN.get(name, {})
    if symmetrize is None:
        symmetrize = bool(known.get('symmetrize', False))
    raw_dir = Path(raw_dir).expanduser()
    out_dir = Path(out_dir).expanduser()
    if (raw_dir / 'raw').is_dir():
        root, raw = raw_dir, raw_dir / 'raw'
    elif any((raw_dir / f).exists() for f in
             ('edge.csv.gz', 'data.npz', 'num-node-list.csv.gz',
              'num-node-dict.csv.gz')):
        root, raw = raw_dir.parent, raw_dir
    else:
        raise DatasetFormatError(
            f"{raw_dir}: neither an OGB dataset root (holding raw/ and "
            f"split/) nor its raw/ folder (no edge.csv.gz or data.npz); "
            f"download and unzip the OGB archive for '{name}' and pass its "
            f'folder as --raw-dir')
    check_target(out_dir, overwrite)
    split_dir = choose_split(root, raw, split, known.get('split'))
    if (raw / 'relations').is_dir() or (raw / 'num-node-dict.csv.gz').exists():
        return prepare_ogb_hetero(root, raw, name, out_dir, progress,
                                  overwrite, symmetrize, split_dir)
    npz = raw / 'data.npz'
    use_npz = npz.is_file() and not (raw / 'edge.csv.gz').is_file()

    # --- sizes
    if use_npz:
        with np.load(npz, allow_pickle=False) as z:
            if 'num_nodes_list' not in z.files:
                raise DatasetFormatError(f'{npz}: no num_nodes_list; not an '
                                         f'OGB data.npz: unzip it again')
            num_nodes = int(np.asarray(z['num_nodes_list']).reshape(-1)[0])
            raw_edges = int(np.asarray(z['num_edges_list']).reshape(-1)[0]) \
                if 'num_edges_list' in z.files else None
        edge_member = NpyMember(npz, 'edge_index')
        shape = tuple(edge_member.shape)
        if len(shape) != 2 or 2 not in shape:
            raise DatasetFormatError(f"{npz}: 'edge_index' has shape "
                                     f'{list(shape)}, expected [2, E]')
        # OGB stores [2, E] in C order (all sources, then all destinations);
        # [E, 2] (or Fortran order) holds (src, dst) pairs instead.
        if shape[0] == 2:
            pairs_layout, file_edges = edge_member.fortran, shape[1]
        else:
            pairs_layout, file_edges = not edge_member.fortran, shape[0]
        edge_file = npz
    else:
        num_nodes = read_scalar(raw / 'num-node-list.csv.gz')
        edge_list = raw / 'num-edge-list.csv.gz'
        raw_edges = read_scalar(edge_list) if edge_list.exists() else None
        edge_file = raw / 'edge.csv.gz'
        if not edge_file.is_file():
            raise DatasetFormatError(f'{edge_file}: missing; unzip the OGB '
                                     f'archive again')
    if raw_edges is None and use_npz:
        raw_edges = file_edges
    try:  # before anything is allocated for that many nodes
        check_node_count(num_nodes, out_dir.parent)
    except ValueError as exc:
        where = npz if use_npz else raw / 'num-node-list.csv.gz'
        raise DatasetFormatError(f'{where}: {exc}') from None

    def file_chunks() -> Iterator[Tuple[np.ndarray, np.ndarray]]:
        if not use_npz:
            for pairs in iter_csv(edge_file, np.int64, num_cols=2):
                yield (np.ascontiguousarray(pairs[:, 0]),
                       np.ascontiguousarray(pairs[:, 1]))
        elif pairs_layout:
            for flat in edge_member.stream(0, 2 * file_edges,
                                           2 * fmt.EDGE_CHUNK):
                pairs = flat.reshape(-1, 2)
                yield (np.ascontiguousarray(pairs[:, 0]),
                       np.ascontiguousarray(pairs[:, 1]))
        else:
            yield from zip(
                edge_member.stream(0, file_edges, fmt.EDGE_CHUNK),
                edge_member.stream(file_edges, file_edges, fmt.EDGE_CHUNK))

    def edge_chunks() -> Iterator[Tuple[np.ndarray, np.ndarray]]:
        for src, dst in file_chunks():
            yield src, dst
            if symmetrize:
                yield dst, src

    with Staging(out_dir, overwrite, progress) as st:
        # --- topology
        try:
            csc_from_edge_chunks(edge_chunks, num_nodes, st.dir, progress)
        except ValueError as exc:
            raise DatasetFormatError(f'{edge_file}: {exc}') from None
        indptr_file = st.dir / 'indptr.bin'
        num_edges = int(np.memmap(indptr_file, dtype=np.int64, mode='r',
                                  offset=8 * num_nodes, shape=(1, ))[0])
        expected = raw_edges * (2 if symmetrize else 1) \
            if raw_edges is not None else num_edges
        if num_edges != expected:
            raise DatasetFormatError(
                f"{edge_file}: holds {num_edges // (2 if symmetrize else 1)}"
                f' edges but num-edge-list says {raw_edges}; the file is '
                f'truncated: unzip the OGB archive again')
        if symmetrize:
            num_edges = coalesce_csc(indptr_file, st.dir / 'indices.bin',
                                      num_nodes, progress)
        index_np = np.int32 if index_dtype_for(max(num_nodes - 1, 0)) == \
            torch.int32 else np.int64
        st.adopt('indptr', 'int64', [num_nodes + 1])
        st.adopt('indices', np.dtype(index_np).name, [num_edges])

        # --- node arrays
        def write_node(key: str, source: Source, file: Path) -> None:
            try:
                st.write_array(key, source, expect_rows=num_nodes,
                               what=f"node array '{key}' from {file}")
            except ValueError as exc:
                if isinstance(exc, DatasetFormatError):
                    raise
                raise DatasetFormatError(f'{file}: {exc}') from None

        label_state = {'missing': 0, 'max': -1, 'columns': 1}
        if use_npz:
            with zipfile.ZipFile(npz) as zf:
                members = {n[:-4] for n in zf.namelist()}
            if 'node_feat' in members:
                feat = NpyMember(npz, 'node_feat')
                write_node('x', feat.rows, npz)
            label_file = raw / 'node-label.npz'
            if label_file.is_file():
                labels = NpyMember(label_file, 'node_label')
                write_node('y', lambda: (
                    labels_chunk(c, label_file, label_state, num_nodes)
                    for c in labels.rows()), label_file)
            for key in _OGB_EXTRA_NODE_FILES:
                if key in members:
                    member = NpyMember(npz, key)
                    write_node(key, lambda m=member: (
                        c.reshape(c.shape[0], -1)[:, 0].astype(np.int64)
                        if c.ndim > 1 and c.shape[1] == 1 else c
                        for c in m.rows()), npz)
        else:
            feat_file = raw / 'node-feat.csv.gz'
            if feat_file.is_file():
                write_node('x', lambda: iter_csv(feat_file, np.float32),
                           feat_file)
            label_file = raw / 'node-label.csv.gz'
            if label_file.is_file():
                write_node('y', lambda: (
                    labels_chunk(c, label_file, label_state, num_nodes)
                    for c in iter_csv(label_file, np.float64)), label_file)
            for key in _OGB_EXTRA_NODE_FILES:
                file = raw / f'{key}.csv.gz'
                if file.is_file():
                    write_node(key, lambda f=file: (
                        c[:, 0] if c.shape[1] == 1 else c
                        for c in iter_csv(f, np.int64)), file)

        for part, key in SPLITS if split_dir is not None else ():
            st.write_array(key, split_mask(split_dir / f'{part}.csv.gz',
                                           num_nodes),
                           expect_rows=num_nodes)

        num_classes = None
        if 'y' in st.specs:
            num_classes = label_state['max'] + 1 \
                if label_state['columns'] == 1 else label_state['columns']
        notes = [f"{name} from the local OGB files in '{root.resolve()}' "
                 f"({'raw/data.npz' if use_npz else 'raw/*.csv.gz'})"]
        if split_dir is not None:
            notes.append(f"split '{split_dir.name}'")
        if symmetrize:
            notes.append(
                'symmetrised: reverse edges added and duplicate edges '
                f'removed, like torch_geometric.transforms.ToUndirected '
                f"({known.get('why', 'requested')}); {raw_edges} listed "
                f'edges -> {num_edges} directed edges')
        else:
            notes.append('edges as listed (directed)')
        if label_state['missing']:
            notes.append(f"{label_state['missing']} missing labels (NaN) "
                         f'stored as -1')
        if label_state['columns'] > 1:
            notes.append(f"multi-label y with {label_state['columns']} "
                         f'tasks')
        command = (f'pyg-fastload prepare --ogb {name} --raw-dir {raw_dir}'
                   + ('' if symmetrize == bool(known.get('symmetrize'))
                      else (' --symmetrize' if symmetrize else ' --directed'))
                   + (f' --split {split}' if split else '')
                   + f' --overwrite {out_dir}')
        st.commit(build_meta(
            name, num_nodes, num_edges, num_classes or None,
            '; '.join(notes),
            {'command': command,
             'ogb': {'name': name, 'symmetrized': bool(symmetrize),
                     'split': split_dir.name if split_dir else None,
                     'raw_edges': raw_edges,
                     'seconds': round(time.perf_counter() - start_time, 1)}}))
    return open_dataset_dir(out_dir, verify='checksum')
