r"""Opening a dataset directory of either kind: ``meta.json`` checked,
arrays memory-mapped and validated before any training starts."""
from __future__ import annotations

import json
import math
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, Union

import numpy as np
import torch
from torch import Tensor
from tqdm.auto import tqdm

from torch_geometric.data import HeteroData

from ..graph.hetero_topology import EdgeType, HeteroTopology, offsets_of
from ..graph.kind import is_topology
from ..graph.topology import CSCTopology
from . import format as fmt
from .format import (
    ARRAY_LEVELS,
    FORMAT_NAME,
    FORMAT_VERSION,
    HETERO_FORMAT_VERSION,
    PREPARE_HINT,
    TOPOLOGY_ARRAYS,
    VERIFY_MODES,
    DatasetFormatError,
    array_level,
    count_field,
    fail,
    is_sha256,
    numpy_dtype,
    sha256_file,
    torch_dtype,
)
from .typed_layout import (
    check_index_space,
    check_relations,
    declared_types,
    edge_array_key,
)

__all__ = ['OnDiskDataset', 'OnDiskHeteroDataset', 'open_dataset_dir',
           'open_node_arrays']

PathLike = Union[str, 'os.PathLike[str]']


# -------------------------------------------------------------- reading ----
@dataclass(repr=False, eq=False)
class _DatasetDir:
    r"""What an opened dataset directory of either kind has: its path and
    its parsed ``meta.json``."""
    path: Path
    meta: Dict[str, Any]

    @property
    def name(self) -> str:
        return str(self.meta.get('name', self.path.name))

    @property
    def num_classes(self) -> Optional[int]:
        r"""``meta.json``'s class count, if it gives one (a positive int:
        a string, a float or a bool is an error naming the field)."""
        value = self.meta.get('num_classes')
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or \
                value < 1:
            raise DatasetFormatError(
                f"{self.path / 'meta.json'}: 'num_classes' is {value!r}, "
                f"expected a positive int (or no 'num_classes')")
        return value


@dataclass(repr=False, eq=False)
class OnDiskDataset(_DatasetDir):
    r"""An opened dataset directory; every tensor is memory-mapped
    (copy-on-write: in-place edits stay in memory and never reach the
    files).

    Args:
        path (pathlib.Path): the dataset directory.
        meta (dict): the parsed ``meta.json``.
        topology (CSCTopology): ``indptr``, ``indices`` and ``edge_id``
            (:obj:`None` when the CSC order is the original edge order).
        arrays (dict): the node arrays (``x``, ``y``, masks, ...) by name.
        edge_arrays (dict): the edge arrays (e.g. ``time``) by name, one row
            per edge in CSC order (row ``k``: the edge at CSC position
            ``k``).
    """
    topology: CSCTopology
    arrays: Dict[str, Tensor]
    edge_arrays: Dict[str, Tensor] = field(default_factory=dict)

    @property
    def num_nodes(self) -> int:
        return int(self.meta['num_nodes'])

    @property
    def num_edges(self) -> int:
        return int(self.meta['num_edges'])

    @property
    def num_features(self) -> int:
        r"""The width of ``x`` (:obj:`0` without ``x``)."""
        x = self.arrays.get('x')
        if x is None:
            return 0
        return int(x.shape[1]) if x.dim() > 1 else 1

    def _spec(self, name: str) -> Dict[str, Any]:
        specs = self.meta['arrays']
        if name not in specs:
            raise KeyError(f"dataset '{self.path}' has no array {name!r}; "
                           f"it has {', '.join(sorted(specs))}")
        return specs[name]

    def array_path(self, name: str) -> Path:
        r"""The raw binary file of array :obj:`name` (header-less, at
        offset 0, row-major, little-endian).

        Args:
            name (str): the array name (``'x'``, ``'indices'``, ...).
        """
        return self.path / self._spec(name)['file']

    def array_spec(self, name: str) -> Dict[str, Any]:
        r"""What a reader needs to map array :obj:`name` itself: the
        ``meta.json`` entry (``file``, ``dtype``, ``shape``, ``bytes``,
        ``sha256``) plus ``path``, ``offset`` (always :obj:`0`),
        ``numpy_dtype`` (the dtype to :class:`numpy.memmap` with;
        ``int16`` for ``bfloat16``), ``torch_dtype`` and ``row_bytes``.

        Args:
            name (str): the array name.
        """
        spec = dict(self._spec(name))
        np_dtype = numpy_dtype(spec['dtype'])
        spec['shape'] = list(spec['shape'])
        spec['path'] = self.path / spec['file']
        spec['offset'] = 0
        spec['numpy_dtype'] = np_dtype
        spec['torch_dtype'] = torch_dtype(spec['dtype'])
        spec['row_bytes'] = int(np.prod(spec['shape'][1:], dtype=np.int64)) \
            * np_dtype.itemsize
        return spec

    def __repr__(self) -> str:
        arrays = ', '.join(
            f"{key}: {spec['dtype']} {list(spec['shape'])}"
            for key, spec in self.meta['arrays'].items())
        return (f"{self.__class__.__name__}('{self.name}', "
                f'num_nodes={self.num_nodes:,}, num_edges={self.num_edges:,}'
                f", arrays={{{arrays}}}, path='{self.path}')")


@dataclass(repr=False, eq=False)
class OnDiskHeteroDataset(_DatasetDir):
    r"""An opened heterogeneous dataset directory (every array
    memory-mapped, copy-on-write).

    Args:
        path (pathlib.Path): the directory.
        meta (dict): the parsed ``meta.json``.
        topology (HeteroTopology): every relation, memory-mapped.
        arrays (dict): per node type, its node arrays by name (empty for a
            type without features).
        edge_arrays (dict): per edge type, its edge arrays by name (e.g.
            ``time``; empty for a relation without any), one row per edge
            of the relation in its CSC order.
    """
    topology: HeteroTopology
    arrays: Dict[str, Dict[str, Tensor]]
    edge_arrays: Dict[EdgeType, Dict[str, Tensor]] = field(
        default_factory=dict)

    @property
    def node_types(self) -> List[str]:
        return list(self.topology.node_types)

    @property
    def edge_types(self) -> List[EdgeType]:
        return list(self.topology.edge_types)

    @property
    def num_nodes(self) -> Dict[str, int]:
        r"""Node count per type (the rows of its node arrays)."""
        if isinstance(self.meta.get('index_space'), dict):  # a part
            return {e['name']: e['num_nodes']
                    for e in self.meta['node_types']}
        return {t: self.topology.num_nodes_of(t) for t in self.node_types}

    @property
    def index_space(self) -> Dict[str, int]:
        r"""Per node type, the ids its nodes have in ``indices``: the node
        count, or for a part of a partition (``pyg-fastload partition``)
        the whole graph's count of the type, so that neighbours the part
        does not hold keep their (new) ids."""
        return {t: self.topology.num_nodes_of(t) for t in self.node_types}

    @property
    def target(self) -> Optional[str]:
        r"""The node type whose labels ``y`` a model learns (``meta.json``'s
        ``target``, else the one type with ``y``, else :obj:`None`)."""
        if self.meta.get('target') is not None:
            return self.meta['target']
        labelled = [t for t, a in self.arrays.items() if 'y' in a]
        return labelled[0] if len(labelled) == 1 else None

    def array_path(self, node_type: str, name: str) -> Path:
        r"""The raw file of node array :obj:`name` of :obj:`node_type`."""
        return self.path / self.meta['arrays'][f'{node_type}.{name}']['file']

    def to_hetero_data(self) -> Any:
        r"""The dataset as an in-memory
        :class:`~torch_geometric.data.HeteroData` (edges in each relation's
        original order, and so the rows of its edge arrays)."""
        data = HeteroData()
        for node_type in self.node_types:
            data[node_type].num_nodes = self.num_nodes[node_type]
            for key, value in self.arrays[node_type].items():
                data[node_type][key] = value.clone()
        for edge_type in self.edge_types:
            rel = self.topology.relation_topology(edge_type)
            dst = torch.repeat_interleave(
                torch.arange(rel.num_nodes), rel.indptr.diff())
            edge_index = torch.empty((2, rel.num_edges), dtype=torch.long)
            edge_index[0, rel.edge_id] = rel.indices.long()
            edge_index[1, rel.edge_id] = dst
            data[edge_type].edge_index = edge_index
            for key, value in self.edge_arrays.get(edge_type, {}).items():
                rows = torch.empty_like(value)
                rows[rel.edge_id] = value
                data[edge_type][key] = rows
        return data

    def __repr__(self) -> str:
        nodes = ', '.join(f'{t}: {n:,}' for t, n in self.num_nodes.items())
        return (f"{self.__class__.__name__}('{self.name}', nodes={{{nodes}}}"
                f', edge_types={len(self.edge_types)}, '
                f'num_edges={self.topology.num_edges:,}, path='
                f"'{self.path}')")


def _reprepare(meta: Dict[str, Any], path: Path) -> str:
    # meta.json's own "command" is data, never echoed as a command to run.
    how = (" (meta.json's 'command' field records how it was made)"
           if isinstance(meta, dict) and 'command' in meta else '')
    return f're-create the dataset with `{PREPARE_HINT} {path}`{how}'


def _confined(file: Path, root: Path, follow_symlinks: bool,
              fix: str) -> None:
    r"""Refuses a file that is (or lies behind) a link leading out of the
    dataset directory, unless :obj:`follow_symlinks`."""
    if follow_symlinks:
        return
    target = file.resolve()
    if target.parent != root:
        raise fail(file, f"is a link to '{target}', outside the dataset "
                    f"directory; copy the file into the directory, or pass "
                    f"follow_symlinks=True if you trust the link", fix)


def _check_spec(key: str, spec: Any, meta_file: Path, fix: str) -> None:
    def bad(what: str) -> DatasetFormatError:
        return fail(meta_file, f"array '{key}': {what}", fix)

    if not isinstance(spec, dict):
        raise bad('the entry is not an object')
    file = spec.get('file')
    if not isinstance(file, str) or not file or os.path.basename(file) != \
            file or file in ('.', '..') or '\x00' in file:
        raise bad(f"'file' = {file!r} is not a plain file name")
    try:
        dtype = numpy_dtype(spec.get('dtype'))
    except (TypeError, ValueError):
        raise bad(f"unknown 'dtype' = {spec.get('dtype')!r}") from None
    shape = spec.get('shape')
    if not isinstance(shape, list) or not shape or not all(
            isinstance(d, int) and not isinstance(d, bool) and d >= 0
            for d in shape):
        raise bad(f"'shape' = {shape!r} is not a non-empty list of sizes")
    expected = math.prod(shape) * dtype.itemsize  # exact, no overflow
    if expected >= MAX_ARRAY_BYTES:
        raise bad(f"'shape' = {shape!r} would be {expected:,} bytes, more "
                  f"than any file here (2^48)")
    num_bytes = spec.get('bytes')
    if num_bytes != expected:
        raise bad(f"'bytes' = {num_bytes!r} does not match "
                  f"{spec['dtype']} {shape} ({expected} bytes)")
    sha = spec.get('sha256')
    if not is_sha256(sha):
        raise bad(f"'sha256' = {sha!r} is not a hex SHA-256 digest")
    if array_level(spec) not in ARRAY_LEVELS:
        raise bad(f"'level' = {spec['level']!r} is not one of "
                  f"{', '.join(map(repr, ARRAY_LEVELS))}")


#: The largest array a ``meta.json`` may describe, and the largest
#: ``meta.json`` read (a dataset's is a few KiB).
MAX_ARRAY_BYTES = 2**48
MAX_META_BYTES = 2**22

#: This machine's memory: files larger than a quarter of it are mapped
#: read-only.
_PHYSICAL_BYTES = os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES')


def _map(file: Path, spec: Dict[str, Any]) -> Tensor:
    dtype = numpy_dtype(spec['dtype'])
    shape = tuple(spec['shape'])
    if spec['bytes'] == 0:  # mmap cannot map an empty file
        array = np.zeros(shape, dtype=dtype)
    elif spec['bytes'] <= _PHYSICAL_BYTES // 4:
        # 'c' (copy-on-write) maps like 'r' but gives writable arrays, so
        # torch.from_numpy does not warn and in-place ops stay in memory.
        array = np.memmap(file, dtype=dtype, mode='c', shape=shape)
    else:
        # A private mapping counts against the kernel's overcommit limit,
        # which refuses one larger than memory: map big files read-only
        # (shared), as they are only ever read.
        array = np.memmap(file, dtype=dtype, mode='r', shape=shape)
    with warnings.catch_warnings():  # read-only mappings stay read-only
        warnings.simplefilter('ignore', UserWarning)
        tensor = torch.from_numpy(array)
    if spec['dtype'] == 'bfloat16':
        tensor = tensor.view(torch.bfloat16)
    return tensor


def _check_indptr(indptr: np.ndarray, num_edges: int, file: Path,
                  full: bool, fix: str) -> None:
    if int(indptr[0]) != 0 or int(indptr[-1]) != num_edges:
        raise fail(file, f'starts at {int(indptr[0])} and ends at '
                    f'{int(indptr[-1])}, expected 0 and num_edges = '
                    f'{num_edges} (meta.json)', fix)
    if not full:
        return
    step = max(1, fmt.CHUNK_BYTES // 8)
    for start in range(0, indptr.size - 1, step):
        block = indptr[start:start + step + 1]
        bad = np.flatnonzero(block[1:] < block[:-1])
        if bad.size:
            raise fail(file, f'decreases at position {start + int(bad[0])}'
                        f' (CSC offsets must be non-decreasing)', fix)


def _check_range(array: np.ndarray, high: int, file: Path, what: str,
                 fix: str) -> None:
    step = max(1, fmt.CHUNK_BYTES // max(1, array.itemsize))
    for start in range(0, array.size, step):
        block = array[start:start + step]
        low_v, high_v = int(block.min()), int(block.max())
        if low_v < 0 or high_v >= high:
            raise fail(file, f'holds {what} {low_v if low_v < 0 else high_v}'
                        f', outside [0, {high})', fix)


def read_meta(path: Path, follow_symlinks: bool
              ) -> Tuple[Dict[str, Any], str]:
    r"""``meta.json`` of dataset directory :obj:`path`, checked to be ours
    and of a format version this pyg-fastload reads, and the fix its
    errors suggest."""
    meta_file = path / 'meta.json'
    generic_fix = f're-create the dataset with `{PREPARE_HINT} {path}`'
    if not path.is_dir():  # maybe never made: not 're-create'
        raise fail(path, 'no such dataset directory', f'check the path, or '
                   f'create the dataset with `{PREPARE_HINT} {path}`')
    if not meta_file.is_file():
        raise fail(meta_file, 'missing, so this is not a complete '
                    'pyg-fastload dataset directory', generic_fix)
    if meta_file.stat().st_size > MAX_META_BYTES:
        raise fail(meta_file, f'{meta_file.stat().st_size:,} bytes, more '
                    f'than a meta.json holds', generic_fix)
    try:
        with open(meta_file) as f:
            meta = json.load(f)
    except (OSError, ValueError, RecursionError) as exc:
        raise fail(meta_file, f'unreadable ({type(exc).__name__}: '
                    f'{str(exc)[:200]})', generic_fix) from None
    if not isinstance(meta, dict):
        raise fail(meta_file, 'does not hold a JSON object', generic_fix)
    fix = _reprepare(meta, path)
    _confined(meta_file, path.resolve(), follow_symlinks, fix)
    if meta.get('format') != FORMAT_NAME:
        raise fail(meta_file, f"'format' is {meta.get('format')!r}, "
                    f"expected '{FORMAT_NAME}' (not a pyg-fastload dataset)",
                    fix)
    found = meta.get('format_version')
    if found in (FORMAT_VERSION, HETERO_FORMAT_VERSION) and \
            not isinstance(found, bool):
        return meta, fix
    if isinstance(found, int) and not isinstance(found, bool) \
            and found > HETERO_FORMAT_VERSION:
        how = (f'it was written by a newer pyg-fastload: upgrade '
               f'pyg-fastload, or {fix}')
    else:
        how = fix
    raise fail(meta_file, f'format_version {found!r}, but this '
                f'pyg-fastload reads format_version {FORMAT_VERSION} '
                f'(homogeneous) and {HETERO_FORMAT_VERSION} '
                f'(heterogeneous)', how)


def check_specs(path: Path, meta: Dict[str, Any], follow_symlinks: bool,
                fix: str) -> Dict[str, Dict[str, Any]]:
    r"""``meta['arrays']``, every entry checked and every file confined to
    :obj:`path`."""
    meta_file = path / 'meta.json'
    specs = meta.get('arrays')
    if not isinstance(specs, dict):
        raise fail(meta_file, "'arrays' is missing or not an object", fix)
    for key in ('indptr', 'indices'):
        if key not in specs:
            raise fail(meta_file, f"no '{key}' array", fix)
    root = path.resolve()
    for key, spec in specs.items():
        _check_spec(key, spec, meta_file, fix)
        _confined(path / spec['file'], root, follow_symlinks, fix)
    return specs


def verify_files(path: Path, specs: Dict[str, Dict[str, Any]], verify: str,
                 progress: bool, fix: str) -> None:
    r"""Checks every array file's size (``verify='size'``) and checksum
    (``'checksum'``)."""
    if verify == 'none':
        return
    total = sum(spec['bytes'] for spec in specs.values())
    bar = tqdm(total=total, unit='B', unit_scale=True,
               desc='verifying checksums',
               disable=not (progress and verify == 'checksum'))
    with bar:
        for key, spec in specs.items():
            file = path / spec['file']
            try:
                actual = file.stat().st_size
            except FileNotFoundError:
                raise fail(file, f"missing (array '{key}' of "
                            f"{spec['dtype']} {spec['shape']})",
                            fix) from None
            if actual != spec['bytes']:
                raise fail(file, f'{actual} bytes on disk but '
                            f"meta.json says {spec['bytes']} bytes "
                            f"({spec['dtype']} {spec['shape']}): the "
                            f'file is truncated or was overwritten', fix)
            if verify == 'checksum':
                digest = sha256_file(file, bar)
                if digest != spec['sha256']:
                    raise fail(file, f'sha256 {digest} does not match '
                                f"meta.json's {spec['sha256']}: the file"
                                f' is corrupted', fix)


def map_array(path: Path, spec: Dict[str, Any], fix: str) -> Tensor:
    r"""Memory-maps one array file (see :func:`verify_files`)."""
    file = path / spec['file']
    try:
        return _map(file, spec)
    except (OSError, ValueError) as exc:
        raise fail(file, f'cannot be memory-mapped ({exc})', fix) from None


def check_topology(path: Path, specs: Dict[str, Dict[str, Any]],
                   arrays: Dict[str, Tensor], num_edges: int, id_space: int,
                   verify: str, fix: str) -> None:
    r"""The ends of ``indptr`` (and, unless ``verify='none'``, that it never
    decreases and that every id is in range)."""
    _check_indptr(arrays['indptr'].numpy(), num_edges,
                  path / specs['indptr']['file'], verify != 'none', fix)
    if verify == 'none':
        return
    _check_range(arrays['indices'].numpy(), id_space,
                 path / specs['indices']['file'], 'node id', fix)
    if 'edge_id' in arrays:
        _check_range(arrays['edge_id'].numpy(), num_edges,
                     path / specs['edge_id']['file'], 'edge position', fix)


def check_verify(verify: str) -> None:
    if verify not in VERIFY_MODES:
        raise ValueError(f"invalid 'verify' = {verify!r}: pass one of "
                         f"{', '.join(repr(v) for v in VERIFY_MODES)}")


def _typed_rows(meta: Dict[str, Any], meta_file: Path, fix: str,
                specs: Dict[str, Dict[str, Any]], num_nodes: int,
                num_edges: int) -> Tuple[Dict[str, Tuple[str, str, int, str]],
                                         Dict[str, Any]]:
    r"""What a typed directory's ``meta.json`` declares: every array's key
    -> ``(level, what it is, rows, whose rows)``, and its node types, edge
    types and id space."""
    counts, names, edge_types, edge_counts, edge_names = declared_types(
        meta, meta_file, fix)
    if num_nodes != sum(counts.values()) or num_edges != sum(edge_counts):
        raise fail(meta_file, f"'num_nodes' = {num_nodes} and 'num_edges' = "
                   f"{num_edges} are not the sums over the declared types "
                   f"({sum(counts.values())}, {sum(edge_counts)})", fix)
    target = meta.get('target')
    if target is not None and target not in counts:
        raise fail(meta_file, f"'target' = {target!r} is not a declared "
                   f"node type", fix)
    space = meta.get('index_space')  # a part of a partition
    if space is not None:
        try:
            space = check_index_space(space, counts)
        except (TypeError, ValueError) as error:
            raise fail(meta_file, str(error), fix) from None
    rows: Dict[str, Tuple[str, str, int, str]] = {}

    def declare(owner: str, name: str, key: str,
                entry: Tuple[str, str, int, str]) -> None:
        if key not in specs:
            raise fail(meta_file, f"{owner} declares array {name!r}, "
                       f"which 'arrays' lacks", fix)
        if key in rows:
            raise fail(meta_file, f"{owner} declares array {name!r} as "
                       f"{key!r}, the {rows[key][1]}'s key", fix)
        rows[key] = entry

    for node_type, keys in names.items():
        for key in keys:
            declare(f'node type {node_type!r}', key, f'{node_type}.{key}', (
                'node', f'node array {key!r} of type {node_type!r}',
                counts[node_type], f'the type has {counts[node_type]} nodes'))
    for edge_type, count, keys in zip(edge_types, edge_counts, edge_names):
        for key in keys:
            declare(f'edge type {edge_type}', key,
                    edge_array_key(edge_type, key), (
                        'edge', f'edge array {key!r} of edge type '
                        f'{edge_type}', count,
                        f'the edge type has {count} edges'))
    if 'edge_id' not in specs:
        raise fail(meta_file, "no 'edge_id' array", fix)
    layout = {'num_nodes': counts, 'arrays': names, 'edge_types': edge_types,
              'edge_counts': edge_counts, 'edge_arrays': edge_names,
              'id_space': counts if space is None else space}
    return rows, layout


def open_dataset_dir(path: PathLike, verify: str = 'size',
                     progress: bool = False, follow_symlinks: bool = False
                     ) -> Union[OnDiskDataset, OnDiskHeteroDataset]:
    r"""Opens a dataset directory written by :func:`write_dataset_dir`
    (``pyg-fastload prepare``), memory-mapping every array: a homogeneous
    one as an :class:`OnDiskDataset` (node arrays, ``num_nodes`` rows
    each, in ``arrays``; edge arrays, ``"level": "edge"``, ``num_edges``
    rows each in CSC order, in ``edge_arrays``), a heterogeneous one as an
    :class:`OnDiskHeteroDataset` (the same per node type and per edge type,
    and, unless ``verify='none'``, every relation's source ids checked to
    lie in its source type).

    Args:
        path (str or os.PathLike): the dataset directory.
        verify (str, optional): ``'none'`` only reads ``meta.json`` and
            checks the ends of ``indptr``; ``'size'`` also checks that every
            file exists with exactly the bytes ``meta.json`` gives, that
            ``indptr`` never decreases and that every id in ``indices`` and
            ``edge_id`` is in range (one vectorised pass over the topology,
            so a corrupted graph is reported with its file before any
            training); ``'checksum'`` also recomputes every SHA-256 (reads
            everything once). (default: :obj:`'size'`)
        progress (bool, optional): show a progress bar while computing
            checksums. (default: :obj:`False`)
        follow_symlinks (bool, optional): accept array files that are links
            to places outside the directory. (default: :obj:`False`)

    Example:
        >>> from pyg_fastload.io import open_dataset_dir
        >>> ds = open_dataset_dir('tiny-dir')  # doctest: +SKIP
        >>> ds.topology.num_edges  # doctest: +SKIP
    """
    check_verify(verify)
    path = Path(path).expanduser()
    meta_file = path / 'meta.json'
    meta, fix = read_meta(path, follow_symlinks)
    num_nodes = count_field(meta, 'num_nodes', meta_file, fix)
    num_edges = count_field(meta, 'num_edges', meta_file, fix)
    specs = check_specs(path, meta, follow_symlinks, fix)
    typed = meta['format_version'] == HETERO_FORMAT_VERSION
    if typed:
        rows, layout = _typed_rows(meta, meta_file, fix, specs, num_nodes,
                                   num_edges)
        id_space = sum(layout['id_space'].values())
        segments = sum(layout['num_nodes'][e[2]]
                       for e in layout['edge_types'])
    else:
        id_space = meta.get('index_space', num_nodes)  # a part: global ids
        if not isinstance(id_space, int) or isinstance(id_space, bool) or \
                id_space < num_nodes:
            raise fail(meta_file, f"'index_space' = {id_space!r} is not a "
                       f"count >= num_nodes", fix)
        counts = {'node': num_nodes, 'edge': num_edges}
        rows = {}
        for key, spec in specs.items():  # any name, rows by its level
            level = array_level(spec)
            rows[key] = (level, f"{level} array '{key}'", counts[level],
                         f'num_{level}s = {counts[level]}')
        segments = num_nodes
    expected = {'indptr': ([segments + 1], ('int64', )),
                'indices': ([num_edges], ('int32', 'int64') if
                            id_space <= 2**31 else ('int64', )),
                'edge_id': ([num_edges], ('int64', ))}
    for key, spec in specs.items():
        file = path / spec['file']
        if key in TOPOLOGY_ARRAYS:
            shape, dtypes = expected[key]
            if spec['shape'] != shape or spec['dtype'] not in dtypes:
                raise fail(file, f"meta.json gives {spec['dtype']} "
                           f"{spec['shape']}, expected {' or '.join(dtypes)}"
                           f' {shape} for num_nodes = {num_nodes}, '
                           f'num_edges = {num_edges}', fix)
            continue
        if key not in rows:
            raise fail(file, f"array {key!r} belongs to no declared node "
                       f"type's or edge type's 'arrays'", fix)
        level, what, count, whose = rows[key]
        if array_level(spec) != level:
            raise fail(file, f"{what} has \"level\": "
                       f"{array_level(spec)!r} in meta.json, expected "
                       f"{level!r}", fix)
        if spec['shape'][0] != count:
            raise fail(file, f"{what} has {spec['shape'][0]} rows "
                       f"(meta.json shape {spec['shape']}) but {whose}", fix)
    verify_files(path, specs, verify, progress, fix)
    mapped = {key: map_array(path, spec, fix) for key, spec in specs.items()}
    check_topology(path, specs, mapped, num_edges, id_space, verify, fix)
    if not typed:
        topology = CSCTopology(indptr=mapped.pop('indptr'),
                               indices=mapped.pop('indices'),
                               num_nodes=num_nodes,
                               edge_id=mapped.pop('edge_id', None))
        edge_arrays = {key: mapped.pop(key) for key in list(mapped)
                       if array_level(specs[key]) == 'edge'}
        return OnDiskDataset(path=path, meta=meta, topology=topology,
                             arrays=mapped, edge_arrays=edge_arrays)
    node_types = list(layout['num_nodes'])
    edge_types = layout['edge_types']
    typed_topology = HeteroTopology(
        node_types=node_types, edge_types=edge_types,
        node_offset=offsets_of([layout['id_space'][t] for t in node_types]),
        segment_offset=offsets_of([layout['num_nodes'][e[2]]
                                   for e in edge_types]),
        edge_offset=offsets_of(layout['edge_counts']),
        indptr=mapped['indptr'], indices=mapped['indices'],
        edge_id=mapped['edge_id'])
    check_relations(typed_topology, path / specs['indptr']['file'],
                    path / specs['indices']['file'], verify, fix)
    return OnDiskHeteroDataset(
        path=path, meta=meta, topology=typed_topology,
        arrays={t: {k: mapped[f'{t}.{k}'] for k in layout['arrays'][t]}
                for t in node_types},
        edge_arrays={e: {k: mapped[edge_array_key(e, k)] for k in keys}
                     for e, keys in zip(edge_types,
                                        layout['edge_arrays'])})


def open_node_arrays(path: PathLike, verify: str = 'size'
                     ) -> Dict[Tuple[Optional[str], str], Tensor]:
    r"""Every node array of a dataset directory of either kind
    (memory-mapped), by ``(node type, name)``: the node type is
    :obj:`None` in a homogeneous one (a feature store's group).

    Args:
        path (str or os.PathLike): the dataset directory.
        verify (str, optional): how the arrays are checked, as for
            :func:`open_dataset_dir`. (default: :obj:`'size'`)
    """
    dataset = open_dataset_dir(path, verify=verify)
    if is_topology(dataset.topology, hetero=True):
        return {(node_type, name): value
                for node_type, arrays in dataset.arrays.items()
                for name, value in arrays.items()}
    return {(None, name): value for name, value in dataset.arrays.items()}
