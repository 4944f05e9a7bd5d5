r"""Writing a dataset directory: arrays streamed chunk by chunk into a
staging directory, hashed, and renamed into place once complete."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import uuid
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Tuple, Union

import numpy as np
import torch
from torch import Tensor
from tqdm.auto import tqdm

from ..graph.topology import index_dtype_for
from . import format as fmt
from .format import (
    FORMAT_NAME,
    META_KEYS,
    TOPOLOGY_ARRAYS,
    build_meta,
    check_name,
    int_arg,
    is_dataset_dir,
    numpy_dtype,
    sha256_file,
    to_numpy,
)
from .reader import OnDiskDataset, open_dataset_dir

__all__ = ['write_dataset_dir']

Source = Union[Tensor, np.ndarray, Callable[[], Iterable[Any]]]
PathLike = Union[str, 'os.PathLike[str]']


# -------------------------------------------------------------- writing ----
class ArrayWriter:
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


def row_chunks(source: Source, what: str) -> Iterator[Tuple[np.ndarray,
                                                             str]]:
    r"""Yields ``(numpy chunk, dtype name)`` pairs of about
    :obj:`fmt.CHUNK_BYTES` from a tensor, an array (memory-mapped or not) or a
    callable returning an iterable of chunks."""
    if isinstance(source, (Tensor, np.ndarray)):
        if source.ndim == 0:
            raise ValueError(f'{what} is a scalar; pass an array with one '
                             f'row per element')
        row_items = int(np.prod(source.shape[1:], dtype=np.int64))
        itemsize = source.element_size() if isinstance(source, Tensor) \
            else source.itemsize
        step = max(1, fmt.CHUNK_BYTES // max(1, row_items * itemsize))
        num_rows = source.shape[0]
        if num_rows == 0:
            yield to_numpy(source, what)
        for start in range(0, num_rows, step):
            yield to_numpy(source[start:start + step], what)
    elif callable(source):
        for chunk in source():
            yield to_numpy(chunk, what)
    else:
        raise TypeError(f'{what} must be a torch.Tensor, a numpy array or a '
                        f'callable returning an iterable of row chunks, got '
                        f'{type(source).__name__}')


def check_target(path: Path, overwrite: bool) -> None:
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
    if any(path.iterdir()) and not is_dataset_dir(path):
        raise FileExistsError(
            f"refusing to overwrite '{path}': it is not empty and holds no "
            f"pyg-fastload dataset (no meta.json with format "
            f"'{FORMAT_NAME}'); remove it yourself or choose another "
            f"directory")


class Staging:
    r"""A temporary sibling directory into which a dataset is written and
    that is renamed to the final path by :meth:`commit`."""

    def __init__(self, path: PathLike, overwrite: bool, progress: bool):
        self.path = Path(path).expanduser()
        self.overwrite = overwrite
        self.progress = progress
        check_target(self.path, overwrite)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.dir = Path(tempfile.mkdtemp(prefix=f'.{self.path.name}.tmp-',
                                         dir=self.path.parent))
        self.specs: Dict[str, Dict[str, Any]] = {}

    def __enter__(self) -> 'Staging':
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
        writer = ArrayWriter(self.dir, name)
        bar = tqdm(total=expect_rows, unit='row', unit_scale=True,
                   desc=f'writing {name}', disable=not self.progress,
                   leave=False)
        try:
            for chunk, dtype_name in row_chunks(source, what):
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
                    f"{'CSC entry' if name in TOPOLOGY_ARRAYS else 'node'}"
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
            numpy_dtype(dtype_name).itemsize
        actual = file.stat().st_size
        if actual != expected:  # pragma: no cover - internal consistency
            raise RuntimeError(f'{file}: {actual} bytes, expected {expected}')
        with tqdm(total=actual, unit='B', unit_scale=True,
                  desc=f'hashing {name}', disable=not self.progress,
                  leave=False) as bar:
            digest = sha256_file(file, bar)
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
            check_target(self.path, self.overwrite)
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
    verify: str = 'checksum',
) -> 'OnDiskDataset':
    r"""Writes a dataset directory and opens it (re-reading every file
    against its checksum, so a bad write is caught at once).

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
        verify (str, optional): how the written directory is checked when
            it is opened (see :func:`open_dataset_dir`).
            (default: :obj:`'checksum'`)
    """
    num_nodes = int_arg(num_nodes, 'num_nodes')
    if not isinstance(name, str) or not name:
        raise ValueError(f"invalid 'name' = {name!r}: pass a non-empty str")
    if not isinstance(source, str):
        raise TypeError(f"'source' must be a str, got "
                        f'{type(source).__name__}')
    if num_classes is not None:
        num_classes = int_arg(num_classes, 'num_classes')
    if not isinstance(node_arrays, dict):
        raise TypeError(f"'node_arrays' must be a dict of name -> array, "
                        f'got {type(node_arrays).__name__}')
    for key in node_arrays:
        check_name(key, 'node array name', "'node_arrays'")
        if key in TOPOLOGY_ARRAYS:
            raise ValueError(
                f"invalid node array name {key!r} in 'node_arrays': "
                f"{', '.join(TOPOLOGY_ARRAYS)} are the topology's; pass "
                f'them as arguments or rename the array')
    for key in extra_meta or {}:
        if key in META_KEYS:
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
    with Staging(path, overwrite, progress) as st:
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
        meta = build_meta(name, num_nodes, num_edges, num_classes, source,
                          extra_meta)
        st.commit(meta)
    return open_dataset_dir(path, verify=verify)
