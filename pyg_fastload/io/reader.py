r"""Opening a dataset directory: ``meta.json`` checked, arrays memory-mapped
and validated before any training starts."""
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
    is_sha256,
    numpy_dtype,
    sha256_file,
    torch_dtype,
)

__all__ = ['OnDiskDataset', 'open_dataset_dir']

PathLike = Union[str, 'os.PathLike[str]']


# -------------------------------------------------------------- reading ----
@dataclass(repr=False, eq=False)
class OnDiskDataset:
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
    path: Path
    meta: Dict[str, Any]
    topology: CSCTopology
    arrays: Dict[str, Tensor]
    edge_arrays: Dict[str, Tensor] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return str(self.meta.get('name', self.path.name))

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


def fail(file: Path, what: str, fix: str) -> DatasetFormatError:
    r"""The error of a bad dataset file: the file, what is wrong, the
    fix."""
    return DatasetFormatError(f'{file}: {what}; {fix}')


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


def read_meta(path: Path, follow_symlinks: bool, version: int
              ) -> Tuple[Dict[str, Any], str]:
    r"""``meta.json`` of dataset directory :obj:`path`, checked to be ours
    and of format :obj:`version`, and the fix its errors suggest."""
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
    if found == version:
        return meta, fix
    if found in (FORMAT_VERSION, HETERO_FORMAT_VERSION):
        kinds = {FORMAT_VERSION: 'homogeneous',
                 HETERO_FORMAT_VERSION: 'heterogeneous'}
        raise fail(meta_file, f'holds a {kinds[found]} dataset '
                    f'(format_version {found})', 'open it with '
                    'pyg_fastload.open_dataset, which opens both kinds, or '
                    + ('open_dataset_dir' if found == FORMAT_VERSION else
                       'open_hetero_dataset_dir'))
    if isinstance(found, int) and not isinstance(found, bool) \
            and found > HETERO_FORMAT_VERSION:
        how = (f'it was written by a newer pyg-fastload: upgrade '
               f'pyg-fastload, or {fix}')
    else:
        how = fix
    raise fail(meta_file, f'format_version {found!r}, but this '
                f'pyg-fastload reads format_version {version}', how)


def count_field(meta: Dict[str, Any], key: str, meta_file: Path,
                fix: str) -> int:
    r"""``meta[key]``, checked to be a count."""
    value = meta.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise fail(meta_file, f"'{key}' = {value!r} is not a count", fix)
    return value


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


def open_dataset_dir(path: PathLike, verify: str = 'size',
                     progress: bool = False,
                     follow_symlinks: bool = False) -> OnDiskDataset:
    r"""Opens a dataset directory written by :func:`write_dataset_dir`
    (``pyg-fastload prepare``), memory-mapping every array: node arrays
    (``num_nodes`` rows each) in ``arrays``, edge arrays (``"level":
    "edge"``, ``num_edges`` rows each, in CSC order) in ``edge_arrays``.

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
    """
    check_verify(verify)
    path = Path(path).expanduser()
    meta_file = path / 'meta.json'
    meta, fix = read_meta(path, follow_symlinks, FORMAT_VERSION)
    num_nodes = count_field(meta, 'num_nodes', meta_file, fix)
    num_edges = count_field(meta, 'num_edges', meta_file, fix)
    id_space = meta.get('index_space', num_nodes)  # a part: global ids
    if not isinstance(id_space, int) or isinstance(id_space, bool) or \
            id_space < num_nodes:
        raise fail(meta_file, f"'index_space' = {id_space!r} is not a "
                    f"count >= num_nodes", fix)
    specs = check_specs(path, meta, follow_symlinks, fix)

    def expect(key: str, shape: List[int], dtypes: Tuple[str, ...]) -> None:
        spec = specs[key]
        if spec['shape'] != shape or spec['dtype'] not in dtypes:
            raise fail(path / spec['file'], f"meta.json gives {spec['dtype']}"
                        f" {spec['shape']}, expected {' or '.join(dtypes)} "
                        f'{shape} for num_nodes = {num_nodes}, num_edges = '
                        f'{num_edges}', fix)

    expect('indptr', [num_nodes + 1], ('int64', ))
    expect('indices', [num_edges],
           ('int32', 'int64') if id_space <= 2**31 else ('int64', ))
    if 'edge_id' in specs:
        expect('edge_id', [num_edges], ('int64', ))
    rows = {'node': num_nodes, 'edge': num_edges}
    for key, spec in specs.items():
        level = array_level(spec)
        if key not in TOPOLOGY_ARRAYS and spec['shape'][0] != rows[level]:
            raise fail(path / spec['file'], f"{level} array '{key}' has "
                        f"{spec['shape'][0]} rows (meta.json shape "
                        f"{spec['shape']}) but num_{level}s = "
                        f"{rows[level]}", fix)
    verify_files(path, specs, verify, progress, fix)
    arrays = {key: map_array(path, spec, fix) for key, spec in specs.items()}
    check_topology(path, specs, arrays, num_edges, id_space, verify, fix)
    topology = CSCTopology(indptr=arrays.pop('indptr'),
                           indices=arrays.pop('indices'),
                           num_nodes=num_nodes,
                           edge_id=arrays.pop('edge_id', None))
    edge_arrays = {key: arrays.pop(key) for key in list(arrays)
                   if array_level(specs[key]) == 'edge'}
    return OnDiskDataset(path=path, meta=meta, topology=topology,
                         arrays=arrays, edge_arrays=edge_arrays)
