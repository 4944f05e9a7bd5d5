r"""The on-disk dataset format and the converters behind
``pyg-fastload prepare``.

A dataset directory holds one raw, header-less, little-endian binary file
per array (memory-mappable with :class:`numpy.memmap` at offset 0) and a
``meta.json`` describing them:

.. code-block:: json

    {"format": "pyg-fastload-dataset", "format_version": 1,
     "name": "ogbn-arxiv", "num_nodes": 169343, "num_edges": 2315598,
     "arrays": {"indptr": {"file": "indptr.bin", "dtype": "int64",
                           "shape": [169344], "bytes": 1354752,
                           "sha256": "..."}, ...},
     "num_classes": 40, "source": "..."}

The arrays are the CSC topology (``indptr`` ``int64 [N + 1]``, ``indices``
``int32 [E]`` (``int64`` from :math:`2^{31}` nodes on) with the in-neighbours
of :obj:`v` in ``indices[indptr[v]:indptr[v + 1]]``, and optionally
``edge_id`` ``int64 [E]``, the original position of every CSC edge) and the
node arrays (``x`` ``[N, F]``, ``y`` ``int64 [N]``, ``train_mask`` /
``val_mask`` / ``test_mask`` ``bool [N]`` and any other array with one row
per node).

Writers stream: every array is written chunk by chunk into ``<file>.tmp``
(hashing as it goes) and renamed, inside a temporary sibling directory that
is renamed to the final name only once complete, so a crash never leaves a
half-written dataset under the final name.  Edge lists larger than memory
are turned into CSC form by a two-pass external counting sort
(:func:`csc_from_edge_chunks`).
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import os
import re
import shutil
import sys
import tempfile
import time
import uuid
import warnings
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import (
    Any,
    Callable,
    Dict,
    Iterable,
    Iterator,
    List,
    Optional,
    Tuple,
    Union,
)

import numpy as np
import torch
from torch import Tensor
from tqdm.auto import tqdm

from ..io.format import FORMAT_NAME, FORMAT_VERSION, DatasetFormatError
from ..storage.budget import format_bytes
from ..graph.topology import CSCTopology, index_dtype_for
from .pyg_file import load_data_file
from .synthetic import (
    PRESETS,
    SyntheticGraphConfig,
    _preset_name,
    _resolve,
    load_synthetic,
)

__all__ = [
    'FORMAT_NAME',
    'FORMAT_VERSION',
    'DatasetFormatError',
    'OnDiskDataset',
    'open_dataset_dir',
    'write_dataset_dir',
    'csc_from_edge_chunks',
    'prepare_synthetic',
    'prepare_pyg',
    'prepare_ogb',
    'add_arguments',
    'run',
]

#: Bytes per chunk when streaming node arrays to disk (module attributes are
#: read at call time, so tests can shrink them).
_CHUNK_BYTES = 64 << 20
#: Edges per chunk of the external sort and of the duplicate-removal pass.
_EDGE_CHUNK = 1 << 22
#: Decompressed bytes parsed at a time from an OGB CSV file.
_CSV_BLOCK_BYTES = 16 << 20
#: Bytes read at a time when hashing a file.
_HASH_BLOCK = 8 << 20

_TOPOLOGY_ARRAYS = ('indptr', 'indices', 'edge_id')
_VERIFY = ('none', 'size', 'checksum')
_NAME_RE = re.compile(r'^[A-Za-z_][A-Za-z0-9_.-]{0,127}$')
_META_KEYS = ('format', 'format_version', 'name', 'num_nodes', 'num_edges',
              'arrays', 'num_classes', 'source')
_PREPARE_HINT = ('pyg-fastload prepare (--preset NAME | --pyg-data FILE | '
                 '--ogb NAME --raw-dir DIR) --overwrite')

Source = Union[Tensor, np.ndarray, Callable[[], Iterable[Any]]]
PathLike = Union[str, 'os.PathLike[str]']


# --------------------------------------------------------------- dtypes ----
def _numpy_dtype(name: str) -> np.dtype:
    r"""The dtype a stored array is mapped with (``bfloat16``, which numpy
    lacks, is mapped as ``int16`` and viewed as ``torch.bfloat16``)."""
    if name == 'bfloat16':
        return np.dtype(np.int16)
    dtype = np.dtype(name)
    if dtype.kind not in 'biufc' or dtype.hasobject or dtype.fields:
        raise TypeError(f'dtype {name!r} is not a plain numeric dtype')
    return dtype


def _torch_dtype(name: str) -> torch.dtype:
    if name == 'bfloat16':
        return torch.bfloat16
    return torch.from_numpy(np.empty(0, dtype=_numpy_dtype(name))).dtype


def _to_numpy(chunk: Any, what: str) -> Tuple[np.ndarray, str]:
    r"""A C-contiguous numpy view/copy of :obj:`chunk` and its dtype name."""
    if isinstance(chunk, Tensor):
        if chunk.is_sparse or chunk.layout != torch.strided:
            raise TypeError(f'{what}: sparse tensors are not supported; '
                            f'pass a dense tensor (e.g. .to_dense())')
        chunk = chunk.detach().cpu().resolve_conj().resolve_neg()
        chunk = chunk.contiguous()
        if chunk.dtype == torch.bfloat16:
            return chunk.view(torch.int16).numpy(), 'bfloat16'
        array = chunk.numpy()
    else:
        array = np.asarray(chunk)
    if array.dtype.kind not in 'biufc' or array.dtype.hasobject:
        raise TypeError(f'{what}: dtype {array.dtype} is not numeric; pass '
                        f'bool, integer, float or complex data')
    array = np.ascontiguousarray(array)
    if array.dtype.byteorder == '>':
        array = array.astype(array.dtype.newbyteorder('<'))
    return array, array.dtype.name


def _sha256_file(file: Path, bar: Optional[tqdm] = None) -> str:
    sha = hashlib.sha256()
    with open(file, 'rb') as f:
        while True:
            block = f.read(_HASH_BLOCK)
            if not block:
                break
            sha.update(block)
            if bar is not None:
                bar.update(len(block))
    return sha.hexdigest()


# -------------------------------------------------------------- writing ----
class _ArrayWriter:
    r"""Streams row chunks of one array into ``<name>.bin.tmp``, hashing
    them, and renames the file on :meth:`close`."""

    def __init__(self, directory: Path, name: str):
        self.name = name
        self.file = directory / f'{name}.bin'
        self.tmp = directory / f'{name}.bin.tmp'
        self._f = open(self.tmp, 'wb')
        self._sha = hashlib.sha256()
        self.dtype_name: Optional[str] = None
        self.row_shape: Optional[Tuple[int, ...]] = None
        self.rows = 0
        self.bytes = 0

    def write(self, chunk: np.ndarray, dtype_name: str) -> None:
        if chunk.ndim == 0:
            raise ValueError(
                f"array '{self.name}' ({self.file.name}): got a scalar "
                f"chunk; every array needs a first (row) dimension")
        if self.dtype_name is None:
            self.dtype_name, self.row_shape = dtype_name, chunk.shape[1:]
        elif dtype_name != self.dtype_name or chunk.shape[1:] != \
                self.row_shape:
            raise ValueError(
                f"array '{self.name}' ({self.file.name}): a chunk has dtype "
                f"{dtype_name} and row shape {list(chunk.shape[1:])} but "
                f"the first chunk had {self.dtype_name} and "
                f"{list(self.row_shape)}; yield chunks of one dtype and "
                f"width")
        raw = chunk.reshape(-1).view(np.uint8)
        self._f.write(raw)
        self._sha.update(raw)
        self.rows += chunk.shape[0]
        self.bytes += raw.size

    def close(self, default_dtype: str = 'float32',
              default_row_shape: Tuple[int, ...] = ()) -> Dict[str, Any]:
        self._f.flush()
        os.fsync(self._f.fileno())
        self._f.close()
        os.replace(self.tmp, self.file)
        if self.dtype_name is None:  # no chunk at all: an empty array
            self.dtype_name, self.row_shape = default_dtype, default_row_shape
        return {
            'file': self.file.name,
            'dtype': self.dtype_name,
            'shape': [self.rows, *self.row_shape],
            'bytes': self.bytes,
            'sha256': self._sha.hexdigest(),
        }

    def abort(self) -> None:
        self._f.close()
        self.tmp.unlink(missing_ok=True)


def _row_chunks(source: Source, what: str) -> Iterator[Tuple[np.ndarray,
                                                             str]]:
    r"""Yields ``(numpy chunk, dtype name)`` pairs of about
    :obj:`_CHUNK_BYTES` from a tensor, an array (memory-mapped or not) or a
    callable returning an iterable of chunks."""
    if isinstance(source, (Tensor, np.ndarray)):
        if source.ndim == 0:
            raise ValueError(f'{what} is a scalar; pass an array with one '
                             f'row per element')
        row_items = int(np.prod(source.shape[1:], dtype=np.int64))
        itemsize = source.element_size() if isinstance(source, Tensor) \
            else source.itemsize
        step = max(1, _CHUNK_BYTES // max(1, row_items * itemsize))
        num_rows = source.shape[0]
        if num_rows == 0:
            yield _to_numpy(source, what)
        for start in range(0, num_rows, step):
            yield _to_numpy(source[start:start + step], what)
    elif callable(source):
        for chunk in source():
            yield _to_numpy(chunk, what)
    else:
        raise TypeError(f'{what} must be a torch.Tensor, a numpy array or a '
                        f'callable returning an iterable of row chunks, got '
                        f'{type(source).__name__}')


def _is_dataset_dir(path: Path) -> bool:
    try:
        with open(path / 'meta.json') as f:
            return json.load(f).get('format') == FORMAT_NAME
    except (OSError, ValueError, AttributeError):
        return False


def _check_target(path: Path, overwrite: bool) -> None:
    r"""Fails early when :obj:`path` exists and may not be replaced."""
    if not os.path.lexists(path):
        return
    if not path.is_dir():
        raise FileExistsError(
            f"output path '{path}' exists and is not a directory; remove it "
            f"or choose another output directory")
    if not overwrite:
        raise FileExistsError(
            f"output directory '{path}' already exists; pass "
            f"overwrite=True (`--overwrite` on the command line) to replace "
            f"it, or choose another directory")
    if any(path.iterdir()) and not _is_dataset_dir(path):
        raise FileExistsError(
            f"refusing to overwrite '{path}': it is not empty and holds no "
            f"pyg-fastload dataset (no meta.json with format "
            f"'{FORMAT_NAME}'); remove it yourself or choose another "
            f"directory")


class _Staging:
    r"""A temporary sibling directory into which a dataset is written and
    that is renamed to the final path by :meth:`commit`."""

    def __init__(self, path: PathLike, overwrite: bool, progress: bool):
        self.path = Path(path).expanduser()
        self.overwrite = overwrite
        self.progress = progress
        _check_target(self.path, overwrite)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.dir = Path(tempfile.mkdtemp(prefix=f'.{self.path.name}.tmp-',
                                         dir=self.path.parent))
        self.specs: Dict[str, Dict[str, Any]] = {}

    def __enter__(self) -> '_Staging':
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if self.dir.exists():  # not committed: failed
            shutil.rmtree(self.dir, ignore_errors=True)

    def write_array(
        self,
        name: str,
        source: Source,
        *,
        expect_rows: Optional[int] = None,
        what: Optional[str] = None,
        cast: Optional[Callable[[np.ndarray, str],
                                Tuple[np.ndarray, str]]] = None,
        check: Optional[Callable[[np.ndarray, int], None]] = None,
        default_dtype: str = 'float32',
    ) -> Dict[str, Any]:
        what = what or f"array '{name}'"
        writer = _ArrayWriter(self.dir, name)
        bar = tqdm(total=expect_rows, unit='row', unit_scale=True,
                   desc=f'writing {name}', disable=not self.progress,
                   leave=False)
        try:
            for chunk, dtype_name in _row_chunks(source, what):
                if check is not None:  # before casting, which may wrap
                    check(chunk, writer.rows)
                if cast is not None:
                    chunk, dtype_name = cast(chunk, dtype_name)
                writer.write(chunk, dtype_name)
                bar.update(chunk.shape[0])
            if expect_rows is not None and writer.rows != expect_rows:
                raise ValueError(
                    f'{what} ({writer.file.name}) has {writer.rows} rows but '
                    f'{expect_rows} are needed (one per '
                    f"{'CSC entry' if name in _TOPOLOGY_ARRAYS else 'node'}"
                    f'); pass an array with {expect_rows} rows')
            spec = writer.close(default_dtype)
        except BaseException:
            writer.abort()
            raise
        finally:
            bar.close()
        self.specs[name] = spec
        return spec

    def adopt(self, name: str, dtype_name: str,
              shape: List[int]) -> Dict[str, Any]:
        r"""Registers ``<name>.bin``, already written into the staging
        directory (by :func:`csc_from_edge_chunks`), hashing it."""
        file = self.dir / f'{name}.bin'
        expected = int(np.prod(shape, dtype=np.int64)) * \
            _numpy_dtype(dtype_name).itemsize
        actual = file.stat().st_size
        if actual != expected:  # pragma: no cover - internal consistency
            raise RuntimeError(f'{file}: {actual} bytes, expected {expected}')
        with tqdm(total=actual, unit='B', unit_scale=True,
                  desc=f'hashing {name}', disable=not self.progress,
                  leave=False) as bar:
            digest = _sha256_file(file, bar)
        spec = {'file': file.name, 'dtype': dtype_name, 'shape': list(shape),
                'bytes': actual, 'sha256': digest}
        self.specs[name] = spec
        return spec

    def commit(self, meta: Dict[str, Any]) -> Path:
        meta = dict(meta)
        meta['arrays'] = self.specs
        meta_file = self.dir / 'meta.json'
        with open(meta_file, 'w') as f:
            json.dump(meta, f, indent=2)
            f.write('\n')
            f.flush()
            os.fsync(f.fileno())
        os.chmod(self.dir, 0o755)  # mkdtemp makes it private
        old: Optional[Path] = None
        if os.path.lexists(self.path):
            _check_target(self.path, self.overwrite)
            old = self.path.parent / f'.{self.path.name}.old-' \
                f'{uuid.uuid4().hex[:8]}'
            os.rename(self.path, old)
        try:
            os.replace(self.dir, self.path)
        except OSError:
            if old is not None:
                os.rename(old, self.path)
            raise
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
        return self.path


def _check_name(name: Any, what: str, where: str) -> str:
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise ValueError(
            f'invalid {what} {name!r} in {where}: array names become file '
            f'names; use '
            f'letters, digits, "_", "." and "-", starting with a letter or '
            f'"_" (at most 128 characters)')
    return name


def _int_arg(value: Any, name: str, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"'{name}' must be an int, got "
                        f'{type(value).__name__}')
    if value < minimum:
        raise ValueError(f"invalid '{name}' = {value}: pass an int >= "
                         f'{minimum}')
    return int(value)


def _cast_to(dtype: np.dtype, what: str) -> Callable[[np.ndarray, str],
                                                    Tuple[np.ndarray, str]]:
    def cast(chunk: np.ndarray, name: str) -> Tuple[np.ndarray, str]:
        if chunk.dtype.kind not in 'iu':
            raise TypeError(f'{what} must hold integers, got dtype {name}')
        return np.ascontiguousarray(chunk, dtype=dtype), dtype.name
    return cast


def _cast_labels(chunk: np.ndarray, name: str) -> Tuple[np.ndarray, str]:
    if chunk.dtype.kind in 'iu' and chunk.dtype != np.int64:
        return chunk.astype(np.int64), 'int64'
    return chunk, name


def _package_version() -> str:
    try:
        from importlib.metadata import version
        return version('pyg-fastload')
    except Exception:  # not installed
        return 'unknown'


def write_dataset_dir(
    path: PathLike,
    *,
    num_nodes: int,
    indptr: Source,
    indices: Source,
    node_arrays: Dict[str, Source],
    edge_id: Optional[Source] = None,
    name: str,
    source: str,
    num_classes: Optional[int] = None,
    overwrite: bool = False,
    progress: bool = True,
    extra_meta: Optional[Dict[str, Any]] = None,
) -> 'OnDiskDataset':
    r"""Writes a dataset directory and opens it.

    Every array is streamed to disk in row chunks of about 64 MiB, so
    memory-mapped inputs or chunk iterators larger than memory are fine.
    ``indptr`` is stored as ``int64``, ``indices`` as ``int32`` (``int64``
    from :math:`2^{31}` nodes on), ``edge_id`` as ``int64`` and an integer
    ``y`` as ``int64``; other node arrays keep their dtype.

    Args:
        path (str or os.PathLike): the dataset directory to create.
        num_nodes (int): number of nodes :math:`N`.
        indptr (torch.Tensor or np.ndarray or callable): CSC offsets
            ``[N + 1]``.
        indices (torch.Tensor or np.ndarray or callable): the source node of
            every CSC edge ``[E]``.
        node_arrays (dict): node-level arrays by name (``x``, ``y``,
            ``train_mask``, ...), each with :math:`N` rows; a value may be a
            tensor, a (memory-mapped) numpy array or a callable returning an
            iterable of row chunks.
        edge_id (torch.Tensor or np.ndarray or callable, optional): the
            original position of every CSC edge; :obj:`None` means the CSC
            order is the original order. (default: :obj:`None`)
        name (str): the dataset's name.
        source (str): where the data came from (free-form).
        num_classes (int, optional): number of classes. (default:
            :obj:`None`)
        overwrite (bool, optional): replace an existing dataset directory.
            (default: :obj:`False`)
        progress (bool, optional): show progress bars. (default: :obj:`True`)
        extra_meta (dict, optional): more JSON-serialisable keys for
            ``meta.json``. (default: :obj:`None`)
    """
    num_nodes = _int_arg(num_nodes, 'num_nodes')
    if not isinstance(name, str) or not name:
        raise ValueError(f"invalid 'name' = {name!r}: pass a non-empty str")
    if not isinstance(source, str):
        raise TypeError(f"'source' must be a str, got "
                        f'{type(source).__name__}')
    if num_classes is not None:
        num_classes = _int_arg(num_classes, 'num_classes')
    if not isinstance(node_arrays, dict):
        raise TypeError(f"'node_arrays' must be a dict of name -> array, "
                        f'got {type(node_arrays).__name__}')
    for key in node_arrays:
        _check_name(key, 'node array name', "'node_arrays'")
        if key in _TOPOLOGY_ARRAYS:
            raise ValueError(
                f"invalid node array name {key!r} in 'node_arrays': "
                f"{', '.join(_TOPOLOGY_ARRAYS)} are the topology's; pass "
                f'them as arguments or rename the array')
    for key in extra_meta or {}:
        if key in _META_KEYS:
            raise ValueError(f"'extra_meta' may not set the reserved "
                             f"meta.json key {key!r}")
    index_np = np.dtype(np.int32) if index_dtype_for(
        max(num_nodes - 1, 0)) == torch.int32 else np.dtype(np.int64)

    state = {'last': 0}

    def check_indptr(chunk: np.ndarray, offset: int) -> None:
        if chunk.ndim != 1:
            raise ValueError(f"'indptr' must be 1-D, got row shape "
                             f'{list(chunk.shape[1:])}')
        if chunk.size == 0:
            return
        if offset == 0 and int(chunk[0]) != 0:
            raise ValueError(f"'indptr' must start at 0, got {chunk[0]}; "
                             f'pass CSC offsets (0, then cumulative '
                             f'in-degrees)')
        bad = np.flatnonzero(np.diff(chunk) < 0)
        if chunk[0] < state['last'] or bad.size:
            pos = offset + (int(bad[0]) + 1 if bad.size else 0)
            raise ValueError(f"'indptr' decreases at position {pos}; pass "
                             f'CSC offsets (cumulative in-degrees)')
        state['last'] = int(chunk[-1])

    def check_range(what: str, high: int) -> Callable[[np.ndarray, int],
                                                      None]:
        kind = 'node id' if what == 'indices' else 'edge position'

        def check(chunk: np.ndarray, offset: int) -> None:
            if chunk.ndim != 1:
                raise ValueError(f"'{what}' must be 1-D, got row shape "
                                 f'{list(chunk.shape[1:])}')
            if chunk.size and (int(chunk.min()) < 0 or
                               int(chunk.max()) >= high):
                bad = int(chunk.min()) if int(chunk.min()) < 0 else \
                    int(chunk.max())
                raise ValueError(f"'{what}' holds {bad}, outside [0, {high})"
                                 f'; every entry must be a valid {kind}')
        return check

    path = Path(path).expanduser()
    with _Staging(path, overwrite, progress) as st:
        st.write_array('indptr', indptr, expect_rows=num_nodes + 1,
                       what="'indptr'", check=check_indptr,
                       cast=_cast_to(np.dtype(np.int64), "'indptr'"),
                       default_dtype='int64')
        num_edges = state['last']
        st.write_array('indices', indices, expect_rows=num_edges,
                       what="'indices'", check=check_range('indices',
                                                           num_nodes),
                       cast=_cast_to(index_np, "'indices'"),
                       default_dtype=index_np.name)
        if edge_id is not None:
            st.write_array('edge_id', edge_id, expect_rows=num_edges,
                           what="'edge_id'", check=check_range('edge_id',
                                                               num_edges),
                           cast=_cast_to(np.dtype(np.int64), "'edge_id'"),
                           default_dtype='int64')
        for key, value in node_arrays.items():
            st.write_array(key, value, expect_rows=num_nodes,
                           what=f"node array '{key}'",
                           cast=_cast_labels if key == 'y' else None)
        meta: Dict[str, Any] = {
            'format': FORMAT_NAME,
            'format_version': FORMAT_VERSION,
            'name': name,
            'num_nodes': num_nodes,
            'num_edges': num_edges,
        }
        if num_classes is not None:
            meta['num_classes'] = num_classes
        meta['source'] = source
        meta['created_by'] = f'pyg-fastload {_package_version()}'
        meta.update(extra_meta or {})
        st.commit(meta)
    return open_dataset_dir(path, verify='size')


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
    """
    path: Path
    meta: Dict[str, Any]
    topology: CSCTopology
    arrays: Dict[str, Tensor]

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
        value = self.meta.get('num_classes')
        return None if value is None else int(value)

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
        np_dtype = _numpy_dtype(spec['dtype'])
        spec['shape'] = list(spec['shape'])
        spec['path'] = self.path / spec['file']
        spec['offset'] = 0
        spec['numpy_dtype'] = np_dtype
        spec['torch_dtype'] = _torch_dtype(spec['dtype'])
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


def _fail(file: Path, what: str, fix: str) -> DatasetFormatError:
    return DatasetFormatError(f'{file}: {what}; {fix}')


def _reprepare(meta: Dict[str, Any], path: Path) -> str:
    command = meta.get('command') if isinstance(meta, dict) else None
    if not isinstance(command, str):
        command = f'{_PREPARE_HINT} {path}'
    return f're-create the dataset with `{command}`'


def _check_spec(key: str, spec: Any, meta_file: Path, fix: str) -> None:
    def bad(what: str) -> DatasetFormatError:
        return _fail(meta_file, f"array '{key}': {what}", fix)

    if not isinstance(spec, dict):
        raise bad('the entry is not an object')
    file = spec.get('file')
    if not isinstance(file, str) or not file or os.path.basename(file) != \
            file or file in ('.', '..'):
        raise bad(f"'file' = {file!r} is not a plain file name")
    try:
        dtype = _numpy_dtype(spec.get('dtype'))
    except (TypeError, ValueError):
        raise bad(f"unknown 'dtype' = {spec.get('dtype')!r}") from None
    shape = spec.get('shape')
    if not isinstance(shape, list) or not shape or not all(
            isinstance(d, int) and not isinstance(d, bool) and d >= 0
            for d in shape):
        raise bad(f"'shape' = {shape!r} is not a non-empty list of sizes")
    num_bytes = spec.get('bytes')
    expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if num_bytes != expected:
        raise bad(f"'bytes' = {num_bytes!r} does not match "
                  f"{spec['dtype']} {shape} ({expected} bytes)")
    sha = spec.get('sha256')
    if not isinstance(sha, str) or not re.fullmatch(r'[0-9a-f]{64}', sha):
        raise bad(f"'sha256' = {sha!r} is not a hex SHA-256 digest")


def _map(file: Path, spec: Dict[str, Any]) -> Tensor:
    dtype = _numpy_dtype(spec['dtype'])
    shape = tuple(spec['shape'])
    if spec['bytes'] == 0:  # mmap cannot map an empty file
        array = np.zeros(shape, dtype=dtype)
    else:
        # 'c' (copy-on-write) maps like 'r' but gives writable arrays, so
        # torch.from_numpy does not warn and in-place ops stay in memory.
        array = np.memmap(file, dtype=dtype, mode='c', shape=shape)
    tensor = torch.from_numpy(array)
    if spec['dtype'] == 'bfloat16':
        tensor = tensor.view(torch.bfloat16)
    return tensor


def _check_indptr(indptr: np.ndarray, num_edges: int, file: Path,
                  full: bool, fix: str) -> None:
    if int(indptr[0]) != 0 or int(indptr[-1]) != num_edges:
        raise _fail(file, f'starts at {int(indptr[0])} and ends at '
                    f'{int(indptr[-1])}, expected 0 and num_edges = '
                    f'{num_edges} (meta.json)', fix)
    if not full:
        return
    step = max(1, _CHUNK_BYTES // 8)
    for start in range(0, indptr.size - 1, step):
        block = indptr[start:start + step + 1]
        bad = np.flatnonzero(block[1:] < block[:-1])
        if bad.size:
            raise _fail(file, f'decreases at position {start + int(bad[0])}'
                        f' (CSC offsets must be non-decreasing)', fix)


def _check_range(array: np.ndarray, high: int, file: Path, what: str,
                 fix: str) -> None:
    step = max(1, _CHUNK_BYTES // max(1, array.itemsize))
    for start in range(0, array.size, step):
        block = array[start:start + step]
        low_v, high_v = int(block.min()), int(block.max())
        if low_v < 0 or high_v >= high:
            raise _fail(file, f'holds {what} {low_v if low_v < 0 else high_v}'
                        f', outside [0, {high})', fix)


def open_dataset_dir(path: PathLike, verify: str = 'size',
                     progress: bool = False) -> OnDiskDataset:
    r"""Opens a dataset directory written by :func:`write_dataset_dir`
    (``pyg-fastload prepare``), memory-mapping every array.

    Args:
        path (str or os.PathLike): the dataset directory.
        verify (str, optional): ``'none'`` only reads ``meta.json`` and
            checks the ends of ``indptr``; ``'size'`` also checks that every
            file exists with exactly the bytes ``meta.json`` gives and that
            ``indptr`` never decreases; ``'checksum'`` also recomputes every
            SHA-256 and checks that ``indices`` and ``edge_id`` are in range
            (reads everything once). (default: :obj:`'size'`)
        progress (bool, optional): show a progress bar while computing
            checksums. (default: :obj:`False`)
    """
    if verify not in _VERIFY:
        raise ValueError(f"invalid 'verify' = {verify!r}: pass one of "
                         f"{', '.join(repr(v) for v in _VERIFY)}")
    path = Path(path).expanduser()
    meta_file = path / 'meta.json'
    generic_fix = f're-create the dataset with `{_PREPARE_HINT} {path}`'
    if not path.is_dir():
        raise _fail(path, 'no such dataset directory', generic_fix)
    if not meta_file.is_file():
        raise _fail(meta_file, 'missing, so this is not a complete '
                    'pyg-fastload dataset directory', generic_fix)
    try:
        with open(meta_file) as f:
            meta = json.load(f)
    except (OSError, ValueError) as exc:
        raise _fail(meta_file, f'unreadable ({exc})', generic_fix) from None
    if not isinstance(meta, dict):
        raise _fail(meta_file, 'does not hold a JSON object', generic_fix)
    fix = _reprepare(meta, path)
    if meta.get('format') != FORMAT_NAME:
        raise _fail(meta_file, f"'format' is {meta.get('format')!r}, "
                    f"expected '{FORMAT_NAME}' (not a pyg-fastload dataset)",
                    fix)
    version = meta.get('format_version')
    if version != FORMAT_VERSION:
        if isinstance(version, int) and not isinstance(version, bool) \
                and version > FORMAT_VERSION:
            how = (f'it was written by a newer pyg-fastload: upgrade '
                   f'pyg-fastload, or {fix}')
        else:
            how = fix
        raise _fail(meta_file, f'format_version {version!r}, but this '
                    f'pyg-fastload reads format_version {FORMAT_VERSION}',
                    how)
    for key in ('num_nodes', 'num_edges'):
        value = meta.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or \
                value < 0:
            raise _fail(meta_file, f"'{key}' = {value!r} is not a count",
                        fix)
    num_nodes, num_edges = meta['num_nodes'], meta['num_edges']
    specs = meta.get('arrays')
    if not isinstance(specs, dict):
        raise _fail(meta_file, "'arrays' is missing or not an object", fix)
    for key in ('indptr', 'indices'):
        if key not in specs:
            raise _fail(meta_file, f"no '{key}' array", fix)
    for key, spec in specs.items():
        _check_spec(key, spec, meta_file, fix)

    def expect(key: str, shape: List[int], dtypes: Tuple[str, ...]) -> None:
        spec = specs[key]
        if spec['shape'] != shape or spec['dtype'] not in dtypes:
            raise _fail(path / spec['file'], f"meta.json gives {spec['dtype']}"
                        f" {spec['shape']}, expected {' or '.join(dtypes)} "
                        f'{shape} for num_nodes = {num_nodes}, num_edges = '
                        f'{num_edges}', fix)

    expect('indptr', [num_nodes + 1], ('int64', ))
    expect('indices', [num_edges], ('int32', 'int64'))
    if 'edge_id' in specs:
        expect('edge_id', [num_edges], ('int64', ))
    for key, spec in specs.items():
        if key not in _TOPOLOGY_ARRAYS and spec['shape'][0] != num_nodes:
            raise _fail(path / spec['file'], f"node array '{key}' has "
                        f"{spec['shape'][0]} rows (meta.json shape "
                        f"{spec['shape']}) but num_nodes = {num_nodes}", fix)

    if verify != 'none':
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
                    raise _fail(file, f"missing (array '{key}' of "
                                f"{spec['dtype']} {spec['shape']})",
                                fix) from None
                if actual != spec['bytes']:
                    raise _fail(file, f'{actual} bytes on disk but '
                                f"meta.json says {spec['bytes']} bytes "
                                f"({spec['dtype']} {spec['shape']}): the "
                                f'file is truncated or was overwritten', fix)
                if verify == 'checksum':
                    digest = _sha256_file(file, bar)
                    if digest != spec['sha256']:
                        raise _fail(file, f'sha256 {digest} does not match '
                                    f"meta.json's {spec['sha256']}: the file"
                                    f' is corrupted', fix)

    def mapped(key: str) -> Tensor:
        spec = specs[key]
        file = path / spec['file']
        try:
            return _map(file, spec)
        except (OSError, ValueError) as exc:
            raise _fail(file, f'cannot be memory-mapped ({exc})',
                        fix) from None

    indptr = mapped('indptr')
    indices = mapped('indices')
    edge_id = mapped('edge_id') if 'edge_id' in specs else None
    _check_indptr(indptr.numpy(), num_edges, path / specs['indptr']['file'],
                  verify != 'none', fix)
    if verify == 'checksum':
        _check_range(indices.numpy(), num_nodes,
                     path / specs['indices']['file'], 'node id', fix)
        if edge_id is not None:
            _check_range(edge_id.numpy(), num_edges,
                         path / specs['edge_id']['file'], 'edge position',
                         fix)
    topology = CSCTopology(indptr=indptr, indices=indices,
                           num_nodes=num_nodes, edge_id=edge_id)
    arrays = {key: mapped(key) for key in specs
              if key not in _TOPOLOGY_ARRAYS}
    return OnDiskDataset(path=path, meta=meta, topology=topology,
                         arrays=arrays)


# --------------------------------------------------------- external CSC ----
def _edge_pair(chunk: Any, index: int, num_nodes: int
               ) -> Tuple[np.ndarray, np.ndarray]:
    try:
        src, dst = chunk
    except (TypeError, ValueError):
        raise TypeError(f'edge chunk {index}: expected a (src, dst) pair of '
                        f'1-D integer arrays') from None
    src = src.cpu().numpy() if isinstance(src, Tensor) else np.asarray(src)
    dst = dst.cpu().numpy() if isinstance(dst, Tensor) else np.asarray(dst)
    if src.ndim != 1 or dst.ndim != 1 or src.size != dst.size:
        raise ValueError(f'edge chunk {index}: src and dst must be 1-D of '
                         f'equal length, got shapes {list(src.shape)} and '
                         f'{list(dst.shape)}')
    for array in (src, dst):
        if array.dtype.kind not in 'iu':
            raise TypeError(f'edge chunk {index}: node ids must be '
                            f'integers, got dtype {array.dtype}')
    if src.size:
        low = min(int(src.min()), int(dst.min()))
        high = max(int(src.max()), int(dst.max()))
        if low < 0 or high >= num_nodes:
            raise ValueError(
                f'edge chunk {index} holds node id '
                f'{low if low < 0 else high}, outside [0, num_nodes='
                f'{num_nodes}); fix the edge list or pass the true node '
                f'count')
    return src, dst.astype(np.int64, copy=False)


def _write_raw(file: Path, array: np.ndarray) -> None:
    tmp = file.with_name(file.name + '.tmp')
    with open(tmp, 'wb') as f:
        step = max(1, _CHUNK_BYTES // max(1, array.itemsize))
        for start in range(0, array.size, step):
            f.write(np.ascontiguousarray(array[start:start + step])
                    .view(np.uint8))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, file)


def _open_out(file: Path, dtype: np.dtype, size: int) -> np.ndarray:
    if size == 0:
        file.touch()
        return np.zeros(0, dtype=dtype)
    return np.memmap(file, dtype=dtype, mode='w+', shape=(size, ))


def csc_from_edge_chunks(
    edge_chunks: Callable[[], Iterable[Tuple[Any, Any]]],
    num_nodes: int,
    out_dir: PathLike,
    progress: bool = True,
) -> Tuple[Path, Path]:
    r"""Builds the CSC form of an edge list larger than memory with a
    two-pass external counting sort, in :math:`O(N)` memory plus one chunk.

    Pass 1 counts the in-degrees chunk by chunk; pass 2 sorts every chunk
    by destination (stably) and scatters its sources into a memory-mapped
    ``indices`` file at ``cursor[dst] + rank within the chunk``.  The edge
    order within every destination is the order of the input.  Writes
    ``out_dir/indptr.bin`` (``int64 [N + 1]``) and ``out_dir/indices.bin``
    (``int32 [E]``, ``int64`` from :math:`2^{31}` nodes on).

    Args:
        edge_chunks (callable): returns an iterable of ``(src, dst)`` pairs
            of 1-D integer arrays or tensors; called twice, and must yield
            the same edges both times.
        num_nodes (int): number of nodes :math:`N`.
        out_dir (str or os.PathLike): an existing directory.
        progress (bool, optional): show progress bars. (default: :obj:`True`)
    """
    num_nodes = _int_arg(num_nodes, 'num_nodes')
    if not callable(edge_chunks):
        raise TypeError("'edge_chunks' must be a callable returning an "
                        'iterable of (src, dst) chunks (it is called twice)')
    out_dir = Path(out_dir)
    if not out_dir.is_dir():
        raise FileNotFoundError(f"'out_dir' = '{out_dir}' is not an existing "
                                f'directory; create it first')
    counts = np.zeros(num_nodes, dtype=np.int64)
    with tqdm(unit='edge', unit_scale=True, desc='counting in-degrees',
              disable=not progress, leave=False) as bar:
        for i, chunk in enumerate(edge_chunks()):
            _, dst = _edge_pair(chunk, i, num_nodes)
            if dst.size * 8 >= num_nodes:
                counts += np.bincount(dst, minlength=num_nodes)
            elif dst.size:  # a small chunk: avoid an O(N) bincount
                nodes = np.sort(dst)
                starts = np.flatnonzero(np.append(True,
                                                  nodes[1:] != nodes[:-1]))
                counts[nodes[starts]] += np.diff(np.append(starts,
                                                           nodes.size))
            bar.update(dst.size)
    indptr = np.zeros(num_nodes + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    del counts
    num_edges = int(indptr[-1])
    indptr_file = out_dir / 'indptr.bin'
    indices_file = out_dir / 'indices.bin'
    _write_raw(indptr_file, indptr)

    index_np = np.int32 if index_dtype_for(max(num_nodes - 1, 0)) == \
        torch.int32 else np.int64
    tmp = indices_file.with_name(indices_file.name + '.tmp')
    indices = _open_out(tmp, np.dtype(index_np), num_edges)
    cursor = indptr[:-1].copy()
    mismatch = ValueError(
        "'edge_chunks()' yielded different edges on its second call; it "
        'must yield the same chunks every time (e.g. re-open the file)')
    try:
        with tqdm(total=num_edges, unit='edge', unit_scale=True,
                  desc='writing CSC', disable=not progress,
                  leave=False) as bar:
            for i, chunk in enumerate(edge_chunks()):
                src, dst = _edge_pair(chunk, i, num_nodes)
                if dst.size == 0:
                    continue
                if dst.size > 1 and not bool((dst[1:] >= dst[:-1]).all()):
                    order = np.argsort(dst, kind='stable')
                    dst, src = dst[order], src[order]
                    del order
                boundary = np.empty(dst.size, dtype=bool)
                boundary[0] = True
                np.not_equal(dst[1:], dst[:-1], out=boundary[1:])
                starts = np.flatnonzero(boundary)
                group = np.cumsum(boundary) - 1
                del boundary
                nodes = dst[starts]
                cnt = np.diff(np.append(starts, dst.size))
                base = cursor[nodes]
                if bool((base + cnt > indptr[nodes + 1]).any()):
                    raise mismatch
                pos = base[group] + (np.arange(dst.size) - starts[group])
                indices[pos] = src
                cursor[nodes] += cnt
                bar.update(dst.size)
                del src, dst, starts, group, pos, base
        if not np.array_equal(cursor, indptr[1:]):
            raise mismatch
        if isinstance(indices, np.memmap):
            indices.flush()
        del indices
        os.replace(tmp, indices_file)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return indptr_file, indices_file


def _coalesce_csc(indptr_file: Path, indices_file: Path, num_nodes: int,
                  progress: bool) -> int:
    r"""Sorts every neighbour list and removes duplicate edges in place (a
    streaming pass over ranges of destinations); returns the new edge
    count."""
    indptr = np.fromfile(indptr_file, dtype=np.int64)
    num_edges = int(indptr[-1])
    index_np = np.int32 if index_dtype_for(max(num_nodes - 1, 0)) == \
        torch.int32 else np.int64
    old = np.memmap(indices_file, dtype=index_np, mode='r',
                    shape=(num_edges, )) if num_edges else \
        np.zeros(0, dtype=index_np)
    counts = np.zeros(num_nodes, dtype=np.int64)
    tmp = indices_file.with_name(indices_file.name + '.tmp')
    try:
        with open(tmp, 'wb') as f, tqdm(
                total=num_edges, unit='edge', unit_scale=True,
                desc='removing duplicate edges', disable=not progress,
                leave=False) as bar:
            start = 0
            while start < num_nodes:
                stop = int(np.searchsorted(indptr, indptr[start] +
                                           _EDGE_CHUNK, side='right')) - 1
                stop = min(max(stop, start + 1), num_nodes)
                lo, hi = int(indptr[start]), int(indptr[stop])
                if hi > lo:
                    local = np.repeat(np.arange(stop - start, dtype=np.int64),
                                      np.diff(indptr[start:stop + 1]))
                    keys = local * num_nodes + old[lo:hi]
                    del local
                    keys.sort()  # (np.unique hashes first: much slower)
                    if keys.size > 1:
                        keys = keys[np.append(True, keys[1:] != keys[:-1])]
                    dst_local, src = np.divmod(keys, num_nodes)
                    counts[start:stop] = np.bincount(dst_local,
                                                     minlength=stop - start)
                    f.write(src.astype(index_np).view(np.uint8))
                    del keys, dst_local, src
                bar.update(hi - lo)
                start = stop
            f.flush()
            os.fsync(f.fileno())
        del old
        os.replace(tmp, indices_file)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    np.cumsum(counts, out=indptr[1:])
    _write_raw(indptr_file, indptr)
    return int(indptr[-1])


# ------------------------------------------------------------ converters ---
def prepare_synthetic(
    preset_or_config: Union[str, SyntheticGraphConfig],
    out_dir: PathLike,
    seed: int = 0,
    cache_root: Optional[PathLike] = None,
    progress: bool = True,
    overwrite: bool = False,
) -> OnDiskDataset:
    r"""Converts a synthetic graph (:func:`load_synthetic`, so it is
    generated once and cached) into a dataset directory.

    Args:
        preset_or_config (str or SyntheticGraphConfig): a preset name in
            :obj:`PRESETS` or a configuration.
        out_dir (str or os.PathLike): the dataset directory to create.
        seed (int, optional): the random seed. (default: :obj:`0`)
        cache_root (str or os.PathLike, optional): the synthetic-graph cache
            (see :func:`load_synthetic`). (default: :obj:`None`)
        progress (bool, optional): show progress bars. (default: :obj:`True`)
        overwrite (bool, optional): replace an existing :obj:`out_dir`.
            (default: :obj:`False`)
    """
    cfg = _resolve(preset_or_config, 'preset_or_config')
    out_dir = Path(out_dir).expanduser()
    _check_target(out_dir, overwrite)
    graph = load_synthetic(cfg, root=cache_root, seed=seed, progress=progress)
    preset = _preset_name(cfg)
    name = preset if preset != 'custom' else 'synthetic-custom'
    command = None
    if preset != 'custom':
        command = (f'pyg-fastload prepare --preset {preset} --seed {seed} '
                   f'--overwrite {out_dir}')
    extra: Dict[str, Any] = {'synthetic': {'config': asdict(cfg),
                                           'seed': int(seed)}}
    if command:
        extra['command'] = command
    return write_dataset_dir(
        out_dir,
        num_nodes=graph.num_nodes,
        indptr=graph.topology.indptr,
        indices=graph.topology.indices,
        node_arrays={'x': graph.x, 'y': graph.y,
                     'train_mask': graph.train_mask,
                     'val_mask': graph.val_mask,
                     'test_mask': graph.test_mask},
        name=name,
        source=(f"synthetic graph, preset '{preset}', seed {seed} "
                f'(pyg_fastload.datasets.load_synthetic; degree-corrected '
                f'SBM, both edge directions stored, sorted neighbour lists)'),
        num_classes=cfg.num_classes,
        overwrite=overwrite,
        progress=progress,
        extra_meta=extra,
    )


def prepare_pyg(
    data_path: PathLike,
    out_dir: PathLike,
    progress: bool = True,
    overwrite: bool = False,
) -> OnDiskDataset:
    r"""Converts a :class:`torch_geometric.data.Data` saved with
    :func:`torch.save` into a dataset directory.

    The ``edge_index`` becomes the CSC topology and ``edge_id`` records the
    original position of every CSC edge (omitted when the edges were
    already sorted by destination); every node-level tensor
    (:meth:`Data.is_node_attr`) becomes an array; an integer ``y`` gives
    ``num_classes``.  Edge-level attributes are not stored (warned about).

    Args:
        data_path (str or os.PathLike): the file written by
            ``torch.save(data, data_path)`` (or an ``InMemoryDataset``'s
            processed file holding one graph).
        out_dir (str or os.PathLike): the dataset directory to create.
        progress (bool, optional): show progress bars. (default: :obj:`True`)
        overwrite (bool, optional): replace an existing :obj:`out_dir`.
            (default: :obj:`False`)
    """
    data_path = Path(data_path).expanduser()
    out_dir = Path(out_dir).expanduser()
    if not data_path.is_file():
        raise FileNotFoundError(
            f"'data_path' = '{data_path}' does not exist; pass a file "
            f'written with torch.save(data, path)')
    _check_target(out_dir, overwrite)
    data = load_data_file(data_path)
    num_nodes = data.num_nodes
    if num_nodes is None:
        raise DatasetFormatError(
            f'{data_path}: the Data object has no nodes (no num_nodes, x or '
            f'edge_index); set data.num_nodes')
    num_nodes = int(num_nodes)
    edge_index = data.get('edge_index') if 'edge_index' in data else None
    skip = {'edge_index', 'num_nodes'}
    if edge_index is not None:
        try:
            topology = CSCTopology.from_edge_index(edge_index, num_nodes)
        except (TypeError, ValueError) as exc:
            raise DatasetFormatError(f'{data_path}: {exc}') from None
        edge_id = topology.edge_id
    elif 'adj_t' in data and data.adj_t is not None:  # a SparseTensor
        rowptr, col, _ = data.adj_t.csr()  # adj_t[dst, src]: CSR = CSC
        topology = CSCTopology(indptr=rowptr, indices=col,
                               num_nodes=num_nodes)
        edge_id = None
        skip.add('adj_t')
    else:
        raise DatasetFormatError(
            f"{data_path}: the Data object has no 'edge_index' (nor "
            f"'adj_t'); it needs edges to be sampled from")

    node_arrays: Dict[str, Tensor] = {}
    skipped: List[str] = []
    for key, value in data.items():
        if key in skip:
            continue
        if isinstance(value, Tensor) and value.dim() >= 1 and \
                value.size(0) == num_nodes and data.is_node_attr(key):
            _check_name(key, 'attribute name', f"'{data_path}'")
            if key in _TOPOLOGY_ARRAYS:
                raise DatasetFormatError(
                    f"{data_path}: node attribute '{key}' clashes with the "
                    f'topology array of that name; rename it')
            if key == 'y' and value.dim() == 2 and value.size(1) == 1 and \
                    not value.is_floating_point():
                value = value.view(-1)
            node_arrays[key] = value
        else:
            skipped.append(key)
    if skipped:
        warnings.warn(
            f"{data_path}: attributes {', '.join(map(repr, skipped))} are "
            f'not node-level tensors and are not stored (the on-disk format '
            f'holds node arrays only; edge_id maps CSC edges back to the '
            f'original edge order)', UserWarning, stacklevel=2)
    num_classes = None
    y = node_arrays.get('y')
    if y is not None and y.dim() == 1 and not y.is_floating_point() and \
            y.dtype != torch.bool and y.numel():
        num_classes = int(y.max()) + 1
    return write_dataset_dir(
        out_dir,
        num_nodes=num_nodes,
        indptr=topology.indptr,
        indices=topology.indices,
        edge_id=edge_id,
        node_arrays=node_arrays,
        name=data_path.stem,
        source=(f"torch_geometric Data from '{data_path.resolve()}' "
                f"({'edge_index' if edge_index is not None else 'adj_t'} -> "
                f'CSC' + (', edge_id = original edge positions'
                          if edge_id is not None else
                          ', edges were already sorted by destination')
                + ')'),
        num_classes=num_classes,
        overwrite=overwrite,
        progress=progress,
        extra_meta={'command': f'pyg-fastload prepare --pyg-data '
                               f'{data_path} --overwrite {out_dir}',
                    'skipped_attributes': skipped},
    )


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
    if key == 'ogbn-mag':
        raise ValueError(
            "invalid 'name' = 'ogbn-mag': it is heterogeneous; the on-disk "
            'format is homogeneous (convert it with PyG, call '
            'data.to_homogeneous() and use --pyg-data)')
    return key


def _iter_csv(file: Path, dtype: Any, num_cols: Optional[int] = None
              ) -> Iterator[np.ndarray]:
    r"""Parses a (gzipped) comma-separated numeric file in blocks of about
    :obj:`_CSV_BLOCK_BYTES`, yielding ``[rows, columns]`` arrays."""
    opener = gzip.open if file.suffix == '.gz' else open
    line = 0
    carry = b''
    try:
        with opener(file, 'rb') as f:
            while True:
                data = f.read(_CSV_BLOCK_BYTES)
                if data:
                    data = carry + data
                    cut = data.rfind(b'\n')
                    if cut < 0:
                        carry = data
                        continue
                    text, carry = data[:cut + 1], data[cut + 1:]
                else:
                    text, carry = carry, b''
                if text.strip():
                    try:
                        array = np.loadtxt(io.StringIO(text.decode()),
                                           delimiter=',', dtype=dtype,
                                           ndmin=2, comments=None)
                    except ValueError as exc:
                        raise DatasetFormatError(
                            f'{file}: cannot parse the lines after line '
                            f'{line} ({exc}); the file is corrupt or not an '
                            f'OGB CSV: unzip the OGB archive again') from None
                    if num_cols is not None and array.shape[1] != num_cols:
                        raise DatasetFormatError(
                            f'{file}: lines after line {line} have '
                            f'{array.shape[1]} columns, expected {num_cols}'
                            f'; the file is corrupt: unzip the OGB archive '
                            f'again')
                    yield array
                    line += text.count(b'\n')
                if not data:
                    break
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise DatasetFormatError(
            f'{file}: unreadable ({exc}); the file is truncated or corrupt: '
            f'unzip the OGB archive again') from None


def _read_scalar(file: Path) -> int:
    rows = np.concatenate(list(_iter_csv(file, np.int64))) \
        if file.exists() else None
    if rows is None:
        raise DatasetFormatError(f'{file}: missing; it is part of every OGB '
                                 f'node-property dataset: unzip the archive '
                                 f'again')
    if rows.size != 1:
        raise DatasetFormatError(
            f'{file}: holds {rows.size} values, expected 1 (one graph); '
            f'only node-property (ogbn-*) datasets are supported')
    return int(rows.reshape(-1)[0])


class _NpyMember:
    r"""Streams one ``.npy`` member of an ``.npz`` archive without loading
    it whole (works for stored and deflated members)."""

    def __init__(self, npz: Path, key: str):
        self.npz, self.key, self.member = npz, key, f'{key}.npy'
        with zipfile.ZipFile(npz) as zf:
            names = zf.namelist()
            if self.member not in names:
                have = ', '.join(n[:-4] for n in names if n.endswith('.npy'))
                raise DatasetFormatError(
                    f"{npz}: has no array '{key}' (it has {have}); the file "
                    f'is not the OGB one: unzip the archive again')
            with zf.open(self.member) as f:
                version = np.lib.format.read_magic(f)
                if version == (1, 0):
                    header = np.lib.format.read_array_header_1_0(f)
                else:
                    header = np.lib.format.read_array_header_2_0(f)
                self.offset = f.tell()
        self.shape, self.fortran, self.dtype = header
        if self.dtype.hasobject:
            raise DatasetFormatError(f"{npz}: array '{key}' holds Python "
                                     f'objects; expected numbers')

    def load(self) -> np.ndarray:
        with np.load(self.npz, allow_pickle=False) as z:
            return z[self.key]

    def stream(self, start: int, count: int, chunk: int
               ) -> Iterator[np.ndarray]:
        r"""Yields :obj:`count` items from item :obj:`start` on (flat,
        storage order), :obj:`chunk` items at a time."""
        itemsize = self.dtype.itemsize
        with zipfile.ZipFile(self.npz) as zf, zf.open(self.member) as f:
            f.seek(self.offset + start * itemsize)
            done = 0
            while done < count:
                n = min(chunk, count - done)
                buf = f.read(n * itemsize)
                if len(buf) != n * itemsize:
                    raise DatasetFormatError(
                        f"{self.npz}: array '{self.key}' is truncated; "
                        f'download and unzip the OGB archive again')
                yield np.frombuffer(buf, dtype=self.dtype)
                done += n

    def rows(self) -> Iterator[np.ndarray]:
        r"""Yields row chunks of a C-order array (falls back to loading a
        Fortran-order array whole)."""
        if self.fortran and len(self.shape) > 1:
            warnings.warn(f"{self.npz}: '{self.key}' is stored in Fortran "
                          f'order and is loaded whole', RuntimeWarning)
            array = self.load()
            for chunk, _ in _row_chunks(array, f"'{self.key}' in {self.npz}"):
                yield chunk
            return
        row = int(np.prod(self.shape[1:], dtype=np.int64))
        rows_per = max(1, _CHUNK_BYTES // max(1, row * self.dtype.itemsize))
        total = int(np.prod(self.shape, dtype=np.int64))
        for block in self.stream(0, total, rows_per * max(row, 1)):
            yield block.reshape(-1, *self.shape[1:])


def _labels_chunk(values: np.ndarray, file: Path,
                  state: Dict[str, int]) -> np.ndarray:
    r"""OGB labels as ``int64`` with ``-1`` for missing (NaN) ones."""
    values = np.asarray(values, dtype=np.float64)
    if values.ndim == 1:
        values = values[:, None]
    nan = np.isnan(values)
    finite = values[~nan]
    if finite.size and not bool(np.all(finite == np.round(finite))):
        raise DatasetFormatError(f'{file}: non-integer labels; only '
                                 f'classification datasets are supported')
    out = np.where(nan, -1.0, values).astype(np.int64)
    state['missing'] += int(nan.sum())
    if finite.size:
        state['max'] = max(state['max'], int(finite.max()))
    state['columns'] = values.shape[1]
    return out[:, 0] if values.shape[1] == 1 else out


def prepare_ogb(
    raw_dir: PathLike,
    name: str,
    out_dir: PathLike,
    progress: bool = True,
    overwrite: bool = False,
    symmetrize: Optional[bool] = None,
    split: Optional[str] = None,
) -> OnDiskDataset:
    r"""Converts an OGB node-property dataset already on local disk (the
    unzipped OGB archive; nothing is downloaded and the ``ogb`` package is
    not used) into a dataset directory.

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
            ``'ogbn-papers100M'`` (``'arxiv'`` works too).
        out_dir (str or os.PathLike): the dataset directory to create.
        progress (bool, optional): show progress bars. (default: :obj:`True`)
        overwrite (bool, optional): replace an existing :obj:`out_dir`.
            (default: :obj:`False`)
        symmetrize (bool, optional): add reverse edges and remove duplicate
            edges (like :class:`torch_geometric.transforms.ToUndirected`);
            :obj:`None` does so for ``ogbn-arxiv``, ``-products``,
            ``-proteins`` and ``-papers100M``. (default: :obj:`None`)
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
             ('edge.csv.gz', 'data.npz', 'num-node-list.csv.gz')):
        root, raw = raw_dir.parent, raw_dir
    else:
        raise DatasetFormatError(
            f"{raw_dir}: neither an OGB dataset root (holding raw/ and "
            f"split/) nor its raw/ folder (no edge.csv.gz or data.npz); "
            f"download and unzip the OGB archive for '{name}' and pass its "
            f'folder as --raw-dir')
    if (raw / 'relations').is_dir() or (raw / 'node-feat').is_dir():
        raise DatasetFormatError(
            f"{raw}: '{name}' is a heterogeneous OGB dataset; the on-disk "
            f'format is homogeneous (convert with PyG and --pyg-data)')
    _check_target(out_dir, overwrite)
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
        edge_member = _NpyMember(npz, 'edge_index')
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
        num_nodes = _read_scalar(raw / 'num-node-list.csv.gz')
        edge_list = raw / 'num-edge-list.csv.gz'
        raw_edges = _read_scalar(edge_list) if edge_list.exists() else None
        edge_file = raw / 'edge.csv.gz'
        if not edge_file.is_file():
            raise DatasetFormatError(f'{edge_file}: missing; unzip the OGB '
                                     f'archive again')
    if raw_edges is None and use_npz:
        raw_edges = file_edges

    def file_chunks() -> Iterator[Tuple[np.ndarray, np.ndarray]]:
        if not use_npz:
            for pairs in _iter_csv(edge_file, np.int64, num_cols=2):
                yield (np.ascontiguousarray(pairs[:, 0]),
                       np.ascontiguousarray(pairs[:, 1]))
        elif pairs_layout:
            for flat in edge_member.stream(0, 2 * file_edges,
                                           2 * _EDGE_CHUNK):
                pairs = flat.reshape(-1, 2)
                yield (np.ascontiguousarray(pairs[:, 0]),
                       np.ascontiguousarray(pairs[:, 1]))
        else:
            yield from zip(
                edge_member.stream(0, file_edges, _EDGE_CHUNK),
                edge_member.stream(file_edges, file_edges, _EDGE_CHUNK))

    def edge_chunks() -> Iterator[Tuple[np.ndarray, np.ndarray]]:
        for src, dst in file_chunks():
            yield src, dst
            if symmetrize:
                yield dst, src

    # --- splits
    split_root = root / 'split'
    split_dir: Optional[Path] = None
    if split is not None:
        split_dir = split_root / split
        if not split_dir.is_dir():
            raise DatasetFormatError(
                f"{split_dir}: missing; invalid 'split' = {split!r}: pass one "
                f'of the folders in {split_root}')
    elif split_root.is_dir():
        options = sorted(p.name for p in split_root.iterdir() if p.is_dir())
        default = known.get('split')
        if default in options:
            split_dir = split_root / default
        elif len(options) == 1:
            split_dir = split_root / options[0]
        elif options:
            raise DatasetFormatError(
                f"{split_root}: holds several splits ({', '.join(options)});"
                f" pass one as 'split'")
    if split_dir is None:
        warnings.warn(f'{root}: no split/ folder, so the dataset gets no '
                      f'train/val/test masks; pass the dataset root as '
                      f'--raw-dir', UserWarning, stacklevel=2)

    with _Staging(out_dir, overwrite, progress) as st:
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
            num_edges = _coalesce_csc(indptr_file, st.dir / 'indices.bin',
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
                feat = _NpyMember(npz, 'node_feat')
                write_node('x', feat.rows, npz)
            label_file = raw / 'node-label.npz'
            if label_file.is_file():
                labels = _NpyMember(label_file, 'node_label')
                write_node('y', lambda: (
                    _labels_chunk(c, label_file, label_state)
                    for c in labels.rows()), label_file)
            for key in _OGB_EXTRA_NODE_FILES:
                if key in members:
                    member = _NpyMember(npz, key)
                    write_node(key, lambda m=member: (
                        c.reshape(c.shape[0], -1)[:, 0].astype(np.int64)
                        if c.ndim > 1 and c.shape[1] == 1 else c
                        for c in m.rows()), npz)
        else:
            feat_file = raw / 'node-feat.csv.gz'
            if feat_file.is_file():
                write_node('x', lambda: _iter_csv(feat_file, np.float32),
                           feat_file)
            label_file = raw / 'node-label.csv.gz'
            if label_file.is_file():
                write_node('y', lambda: (
                    _labels_chunk(c, label_file, label_state)
                    for c in _iter_csv(label_file, np.float64)), label_file)
            for key in _OGB_EXTRA_NODE_FILES:
                file = raw / f'{key}.csv.gz'
                if file.is_file():
                    write_node(key, lambda f=file: (
                        c[:, 0] if c.shape[1] == 1 else c
                        for c in _iter_csv(f, np.int64)), file)

        if split_dir is not None:
            for part, key in (('train', 'train_mask'), ('valid', 'val_mask'),
                              ('test', 'test_mask')):
                file = split_dir / f'{part}.csv.gz'
                if not file.is_file():
                    raise DatasetFormatError(f'{file}: missing; unzip the '
                                             f'OGB archive again')
                mask = np.zeros(num_nodes, dtype=bool)
                for ids in _iter_csv(file, np.int64, num_cols=1):
                    ids = ids[:, 0]
                    if ids.size and (int(ids.min()) < 0 or
                                     int(ids.max()) >= num_nodes):
                        bad = int(ids.min()) if int(ids.min()) < 0 else \
                            int(ids.max())
                        raise DatasetFormatError(
                            f'{file}: node id {bad} outside [0, '
                            f'{num_nodes}); the split does not belong to '
                            f'this dataset')
                    mask[ids] = True
                st.write_array(key, mask, expect_rows=num_nodes)

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
        st.commit({
            'format': FORMAT_NAME,
            'format_version': FORMAT_VERSION,
            'name': name,
            'num_nodes': num_nodes,
            'num_edges': num_edges,
            **({'num_classes': num_classes} if num_classes else {}),
            'source': '; '.join(notes),
            'created_by': f'pyg-fastload {_package_version()}',
            'command': command,
            'ogb': {'name': name, 'symmetrized': bool(symmetrize),
                    'split': split_dir.name if split_dir else None,
                    'raw_edges': raw_edges,
                    'seconds': round(time.perf_counter() - start_time, 1)},
        })
    return open_dataset_dir(out_dir, verify='size')


# ------------------------------------------------------------------ CLI ----
def add_arguments(parser: argparse.ArgumentParser) -> None:
    r"""Adds the ``pyg-fastload prepare`` arguments to :obj:`parser`."""
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument('--preset', choices=sorted(PRESETS),
                        help='a synthetic graph preset (generated once and '
                        'cached, see --cache-dir)')
    source.add_argument('--pyg-data', metavar='FILE',
                        help='a torch_geometric Data saved with torch.save')
    source.add_argument('--ogb', metavar='NAME',
                        help='an OGB node-property dataset already on disk '
                        '(e.g. ogbn-arxiv, ogbn-products, ogbn-papers100M); '
                        'needs --raw-dir')
    parser.add_argument('out_dir', metavar='OUT_DIR',
                        help='the dataset directory to create')
    parser.add_argument('--raw-dir', metavar='DIR', default=None,
                        help='--ogb: the unzipped OGB dataset (its root with '
                        'raw/ and split/, or raw/ itself)')
    directed = parser.add_mutually_exclusive_group()
    directed.add_argument('--directed', dest='symmetrize',
                          action='store_false', default=None,
                          help='--ogb: keep the edges as listed (default: '
                          'add reverse edges for arxiv, products, proteins '
                          'and papers100M)')
    directed.add_argument('--symmetrize', dest='symmetrize',
                          action='store_true', default=None,
                          help='--ogb: add reverse edges and remove '
                          'duplicates')
    parser.add_argument('--split', default=None,
                        help='--ogb: the folder under split/ (default: the '
                        "dataset's standard split)")
    parser.add_argument('--seed', type=int, default=None,
                        help='--preset: the random seed (default: 0)')
    parser.add_argument('--cache-dir', default=None,
                        help='--preset: where synthetic graphs are cached')
    parser.add_argument('--overwrite', action='store_true',
                        help='replace OUT_DIR if it already holds a dataset')
    parser.add_argument('--no-progress', action='store_true',
                        help='hide the progress bars')


def run(args: argparse.Namespace) -> OnDiskDataset:
    r"""Runs ``pyg-fastload prepare``; prints a summary and returns the
    opened dataset.  User errors exit with a one-line message."""
    def usage(message: str) -> SystemExit:
        return SystemExit(f'pyg-fastload prepare: error: {message}')

    ogb_only = {'raw_dir': '--raw-dir', 'split': '--split',
                'symmetrize': '--directed/--symmetrize'}
    for key, flag in ogb_only.items():
        if getattr(args, key, None) is not None and not args.ogb:
            raise usage(f'{flag} only applies to --ogb')
    for key, flag in (('seed', '--seed'), ('cache_dir', '--cache-dir')):
        if getattr(args, key, None) is not None and not args.preset:
            raise usage(f'{flag} only applies to --preset')
    if args.ogb and not args.raw_dir:
        raise usage('--ogb needs --raw-dir DIR, the unzipped OGB dataset '
                    '(nothing is downloaded)')
    progress = not args.no_progress
    start = time.perf_counter()
    try:
        if args.preset:
            dataset = prepare_synthetic(
                args.preset, args.out_dir,
                seed=0 if args.seed is None else args.seed,
                cache_root=args.cache_dir, progress=progress,
                overwrite=args.overwrite)
        elif args.pyg_data:
            dataset = prepare_pyg(args.pyg_data, args.out_dir,
                                  progress=progress, overwrite=args.overwrite)
        else:
            dataset = prepare_ogb(args.raw_dir, args.ogb, args.out_dir,
                                  progress=progress, overwrite=args.overwrite,
                                  symmetrize=args.symmetrize,
                                  split=args.split)
    except (OSError, ValueError) as exc:  # incl. DatasetFormatError
        raise usage(str(exc)) from exc
    total = sum(spec['bytes'] for spec in dataset.meta['arrays'].values())
    arrays = ', '.join(f"{key} {spec['dtype']} {spec['shape']}"
                       for key, spec in dataset.meta['arrays'].items())
    print(f"wrote '{dataset.path}' in {time.perf_counter() - start:.1f}s: "
          f'{dataset.num_nodes:,} nodes, {dataset.num_edges:,} edges, '
          f'{format_bytes(total)}')
    print(f'arrays: {arrays}')
    print(f"source: {dataset.meta['source']}")
    sys.stdout.flush()
    return dataset
