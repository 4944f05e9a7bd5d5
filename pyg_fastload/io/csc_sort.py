r"""Turning edge lists larger than memory into CSC arrays on disk: a two-pass
external counting sort, then an optional pass removing duplicate edges."""
from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any, Callable, Iterable, Optional, Tuple, Union

import numpy as np
import torch
from torch import Tensor
from tqdm.auto import tqdm

from ..config import available_memory, format_bytes
from ..graph.topology import index_dtype_for
from . import format as fmt
from .format import int_arg

__all__ = ['csc_from_edge_chunks', 'check_node_count', 'count_in_degrees',
           'scatter_edges', 'index_numpy', 'mapped_region', 'EdgeChunks']

PathLike = Union[str, 'os.PathLike[str]']


# --------------------------------------------------------- external CSC ----
#: What :func:`csc_from_edge_chunks` takes: a callable returning an iterable
#: of ``(src, dst)`` pairs of 1-D integer arrays or tensors, called twice.
EdgeChunks = Callable[[], Iterable[Tuple[Any, Any]]]


def _edge_pair(chunk: Any, index: int, num_nodes: int,
               num_sources: Optional[int]) -> Tuple[np.ndarray, np.ndarray]:
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
        for ids, bound, name, role in (
                (src, num_nodes, 'num_nodes', 'source')
                if num_sources is None else
                (src, num_sources, 'num_sources', 'source'),
                (dst, num_nodes, 'num_nodes', 'destination')):
            low, high = int(ids.min()), int(ids.max())
            if low < 0 or high >= bound:
                raise ValueError(
                    f'edge chunk {index} holds {role} node id '
                    f'{low if low < 0 else high}, outside [0, {name}='
                    f'{bound}); fix the edge list or pass the true node '
                    f'count')
    return src, dst.astype(np.int64, copy=False)


def _write_raw(file: Path, array: np.ndarray) -> None:
    tmp = file.with_name(file.name + '.tmp')
    with open(tmp, 'wb') as f:
        step = max(1, fmt.CHUNK_BYTES // max(1, array.itemsize))
        for start in range(0, array.size, step):
            f.write(np.ascontiguousarray(array[start:start + step])
                    .view(np.uint8))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, file)


def mapped_region(file: Path, dtype: Any, start: int,
                  count: int) -> np.ndarray:
    r"""Entries ``[start, start + count)`` of the raw array :obj:`file`
    (made if missing, grown to hold them), memory-mapped for writing. Their
    blocks are allocated first, so a full disk raises ``OSError`` (ENOSPC)
    here, not SIGBUS at a store into a page of a sparse file the disk
    cannot give."""
    dtype = np.dtype(dtype)
    with open(file, 'ab'):  # made if missing
        pass
    if count == 0:
        return np.zeros(0, dtype=dtype)
    with open(file, 'r+b') as f:
        os.posix_fallocate(f.fileno(), start * dtype.itemsize,
                           count * dtype.itemsize)
    return np.memmap(file, dtype=dtype, mode='r+',
                     offset=start * dtype.itemsize, shape=(count, ))


def check_node_count(num_nodes: int, out_dir: Path) -> None:
    r"""Refuses a node count whose per-node arrays (two ``int64`` arrays in
    memory, one on disk in :obj:`out_dir`) cannot fit, before anything is
    allocated."""
    needed = 16 * (num_nodes + 1)
    available = available_memory()
    if available and needed > available:
        raise ValueError(
            f"num_nodes = {num_nodes:,} needs {format_bytes(needed)} of "
            f"memory for the CSC offsets, more than the "
            f"{format_bytes(available)} available: the node count is wrong "
            f"(a corrupted or foreign file?) or the graph is too large for "
            f"this machine")
    probe = Path(out_dir).resolve()
    while not probe.exists():  # the directory may not be created yet
        probe = probe.parent
    free = shutil.disk_usage(probe).free
    if 8 * (num_nodes + 1) > free:
        raise ValueError(
            f"num_nodes = {num_nodes:,} needs {format_bytes(8 * num_nodes)} "
            f"of disk for the CSC offsets in '{out_dir}', more than the "
            f"{format_bytes(free)} free")


def _mismatch() -> ValueError:
    return ValueError(
        "'edge_chunks()' yielded different edges on its second call; it "
        'must yield the same chunks every time (e.g. re-open the file)')


def _stable_order(dst: np.ndarray, num_nodes: int) -> np.ndarray:
    r"""The positions that sort :obj:`dst` (ids below :obj:`num_nodes`)
    stably: one sort of the distinct keys ``dst * size + position``, a few
    times faster than a stable argsort (which serves where the keys would
    overflow)."""
    size = dst.size
    if num_nodes * size >= 2**63:
        return np.argsort(dst, kind='stable')
    keys = dst * size
    keys += np.arange(size)
    keys.sort()
    return np.remainder(keys, size, out=keys)


def count_in_degrees(edge_chunks: EdgeChunks, num_nodes: int,
                     num_sources: Optional[int] = None,
                     progress: bool = True) -> np.ndarray:
    r"""Pass 1 of :func:`csc_from_edge_chunks`: the CSC offsets (``int64
    [num_nodes + 1]``) of the edges of :obj:`edge_chunks`, counted chunk by
    chunk, every chunk's ids checked (sources below :obj:`num_sources`,
    default :obj:`num_nodes`)."""
    counts = np.zeros(num_nodes, dtype=np.int64)
    with tqdm(unit='edge', unit_scale=True, desc='counting in-degrees',
              disable=not progress, leave=False) as bar:
        for i, chunk in enumerate(edge_chunks()):
            _, dst = _edge_pair(chunk, i, num_nodes, num_sources)
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
    return indptr


def scatter_edges(edge_chunks: EdgeChunks, indptr: np.ndarray,
                  num_sources: Optional[int], indices: np.ndarray,
                  edge_id: Optional[np.ndarray] = None, shift: int = 0,
                  progress: bool = True) -> None:
    r"""Pass 2 of :func:`csc_from_edge_chunks`: sorts every chunk by
    destination (stably) and writes its sources plus :obj:`shift` into
    :obj:`indices` (an array of ``indptr[-1]`` entries, memory-mapped) at
    ``cursor[dst] + rank within the chunk``, and where :obj:`edge_id` is
    given, every edge's position in the stream at the same place; the edge
    order within every destination is the order of the input."""
    num_nodes = indptr.size - 1
    cursor = indptr[:-1].copy()
    seen = 0
    with tqdm(total=int(indptr[-1]), unit='edge', unit_scale=True,
              desc='writing CSC', disable=not progress, leave=False) as bar:
        for i, chunk in enumerate(edge_chunks()):
            src, dst = _edge_pair(chunk, i, num_nodes, num_sources)
            if dst.size == 0:
                continue
            order = None
            if dst.size > 1 and not bool((dst[1:] >= dst[:-1]).all()):
                order = _stable_order(dst, num_nodes)
                dst, src = dst[order], src[order]
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
                raise _mismatch()
            pos = base[group] + (np.arange(dst.size) - starts[group])
            indices[pos] = src + shift if shift else src
            if edge_id is not None:
                edge_id[pos] = seen + (np.arange(dst.size) if order is None
                                       else order)
            cursor[nodes] += cnt
            seen += dst.size
            bar.update(dst.size)
            del src, dst, starts, group, pos, base, order
    if not np.array_equal(cursor, indptr[1:]):
        raise _mismatch()


def csc_from_edge_chunks(
    edge_chunks: EdgeChunks,
    num_nodes: int,
    out_dir: PathLike,
    progress: bool = True,
) -> Tuple[Path, Path]:
    r"""Builds the CSC form of an edge list larger than memory with a
    two-pass external counting sort, in :math:`O(N)` memory plus one chunk.

    Pass 1 counts the in-degrees chunk by chunk (:func:`count_in_degrees`);
    pass 2 sorts every chunk by destination (stably) and scatters its
    sources into a memory-mapped ``indices`` file at ``cursor[dst] + rank
    within the chunk`` (:func:`scatter_edges`).  The edge order within
    every destination is the order of the input.  Writes
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
    num_nodes = int_arg(num_nodes, 'num_nodes')
    if not callable(edge_chunks):
        raise TypeError("'edge_chunks' must be a callable returning an "
                        'iterable of (src, dst) chunks (it is called twice)')
    out_dir = Path(out_dir)
    if not out_dir.is_dir():
        raise FileNotFoundError(f"'out_dir' = '{out_dir}' is not an existing "
                                f'directory; create it first')
    check_node_count(num_nodes, out_dir)
    indptr = count_in_degrees(edge_chunks, num_nodes, progress=progress)
    indptr_file = out_dir / 'indptr.bin'
    indices_file = out_dir / 'indices.bin'
    _write_raw(indptr_file, indptr)
    tmp = indices_file.with_name(indices_file.name + '.tmp')
    indices = mapped_region(tmp, index_numpy(num_nodes), 0,
                            int(indptr[-1]))
    try:
        scatter_edges(edge_chunks, indptr, None, indices, progress=progress)
        if isinstance(indices, np.memmap):
            indices.flush()
        del indices
        os.replace(tmp, indices_file)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return indptr_file, indices_file


def index_numpy(num_ids: int) -> type:
    r"""The numpy dtype of ``indices`` over :obj:`num_ids` node ids
    (``int32`` below :math:`2^{31}`, as :func:`index_dtype_for`)."""
    return np.int32 if index_dtype_for(max(num_ids - 1, 0)) == \
        torch.int32 else np.int64


def coalesce_csc(indptr_file: Path, indices_file: Path, num_nodes: int,
                  progress: bool) -> int:
    r"""Sorts every neighbour list and removes duplicate edges in place (a
    streaming pass over ranges of destinations); returns the new edge
    count."""
    indptr = np.fromfile(indptr_file, dtype=np.int64)
    num_edges = int(indptr[-1])
    index_np = index_numpy(num_nodes)
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
                                           fmt.EDGE_CHUNK, side='right')) - 1
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
