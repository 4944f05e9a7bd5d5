r"""Block reads of a file for the direct storage tier: what issues them
(:class:`BlockReads`), and :class:`HostReads`, which reads into host memory
with ``O_DIRECT`` (no page cache) through reader threads.

Where the file system refuses ``O_DIRECT`` (tmpfs, some network file
systems) the reader says so once and reads through the page cache, dropping
what it read from it right after (``posix_fadvise(DONTNEED)``), so memory
stays bounded.
"""
from __future__ import annotations

import mmap
import os
import warnings
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Dict, List, Optional, Protocol, Tuple

import torch
from torch import Tensor

from .row_file import RowFile

__all__ = ['BlockReads', 'HostReads', 'DirectStorageError', 'check_read',
           'BLOCK_BYTES', 'Reads']

#: Reads of a submission: ``(file offset, length, buffer offset)``.
Reads = List[Tuple[int, int, int]]

#: Alignment of direct reads: offsets, lengths and buffers (the page size
#: covers every logical block size in use, 512 B and 4 KiB).
BLOCK_BYTES = 4096


class DirectStorageError(ValueError):
    r"""A read returned fewer bytes than the rows need (the file shrank
    after it was opened): never a partial row."""


class _AlignedBuffer:
    r"""A reusable block-aligned byte buffer (an anonymous mapping, aligned
    to the page size), grown on demand."""
    def __init__(self) -> None:
        self._map: Optional[mmap.mmap] = None
        self.view: Optional[memoryview] = None

    def get(self, nbytes: int) -> Tuple[memoryview, Tensor]:
        if self._map is None or len(self._map) < nbytes:
            self.close()
            size = max(BLOCK_BYTES, -(-nbytes // BLOCK_BYTES) * BLOCK_BYTES)
            self._map = mmap.mmap(-1, size)
            self.view = memoryview(self._map)
        with warnings.catch_warnings():  # writable, owned here
            warnings.simplefilter('ignore', UserWarning)
            tensor = torch.frombuffer(self._map, dtype=torch.uint8)
        return self.view, tensor

    def close(self) -> None:
        if self.view is not None:
            self.view.release()
            self.view = None
        if self._map is not None:
            self._map.close()
            self._map = None


def _open_direct(path: str, direct: Optional[bool]) -> Tuple[int, bool]:
    r"""``(fd, direct)``: the file opened with ``O_DIRECT`` if the file
    system allows it (probed with one aligned read), else without."""
    flag = getattr(os, 'O_DIRECT', None)
    if direct is not False and flag is not None:
        probe = mmap.mmap(-1, BLOCK_BYTES)
        fd = -1
        try:
            fd = os.open(path, os.O_RDONLY | flag)
            os.preadv(fd, [probe], 0)
            return fd, True
        except OSError as error:
            if fd >= 0:
                os.close(fd)
            reason = f'{error.strerror} (errno {error.errno})'
        finally:
            probe.close()
    else:
        reason = ('this platform has no O_DIRECT' if flag is None else
                  'direct=False')
    if direct:
        raise OSError(f"'{path}': direct reads are not possible: {reason}; "
                      f"use storage='mmap' or keep the file on a local file "
                      f"system that allows O_DIRECT (ext4, xfs)")
    if direct is None:
        warnings.warn(f"'{path}': the file system refuses O_DIRECT "
                      f"({reason}); reading through the page cache and "
                      f"dropping the rows from it after each read")
    return os.open(path, os.O_RDONLY), False


def check_read(file: RowFile, file_bytes: int, got: int, offset: int,
               length: int) -> None:
    r"""Raises :class:`DirectStorageError` if a read of :obj:`length`
    bytes at :obj:`offset` returned fewer bytes than the file should hold
    there (the last block of the file may be short)."""
    want = min(length, file_bytes - offset)
    if got < want:
        raise DirectStorageError(
            f"'{file.path}': read {got} of {want} bytes at offset "
            f"{offset}: the file is shorter than its "
            f"{list(file.shape)} rows of {file.dtype} (truncated "
            f"after it was opened?)")


class BlockReads(Protocol):
    r"""What issues a direct tier's block reads: into host memory
    (:class:`HostReads`) or into GPU memory
    (:class:`~pyg_fastload.storage.gpu_direct.KvikioReads`)."""
    #: Where the read rows land, in words.
    place: str

    def lands_on(self, device: torch.device) -> torch.device:
        r"""Where rows bound for :obj:`device` are read to."""

    def set_threads(self, count: int) -> None:
        r"""Reads in flight from now on."""

    def fetch(self, reads: Reads, total: int, device: torch.device,
              in_flight: int) -> Tensor:
        r"""Runs :obj:`reads` into a buffer of :obj:`total` bytes on
        :obj:`device`, up to :obj:`in_flight` at once; returns the buffer
        (``uint8``)."""

    def read_out(self, work: Callable[[], None],
                 device: torch.device) -> None:
        r"""Runs :obj:`work`, which reads the buffer the last :meth:`fetch`
        returned (on a GPU: queues it on :obj:`device`'s current stream);
        the next :meth:`fetch` writes the buffer only after that work has
        run."""

    def close(self) -> None:
        r"""Releases the reader's files, threads and buffers."""


class HostReads:
    r"""Block reads into host memory with ``preadv`` (``O_DIRECT`` where
    the file system allows it), :obj:`in_flight` reader threads at once.

    Args:
        file (RowFile): the file read.
        direct (bool, optional): require ``O_DIRECT`` (:obj:`True`), never
            use it (:obj:`False`), or use it where the file system allows
            (:obj:`None`, with a warning where it does not).
    """
    place = 'file, direct reads'

    def __init__(self, file: RowFile, direct: Optional[bool] = None):
        self.file = file
        self._want_direct = direct
        self._open()

    def _open(self) -> None:
        self._fd, self.direct = _open_direct(self.file.path,
                                             self._want_direct)
        self._buffer = _AlignedBuffer()
        self._pool: Optional[ThreadPoolExecutor] = None
        self._pool_size = 0
        self.file_bytes = os.path.getsize(self.file.path)

    def __getstate__(self) -> Dict[str, Any]:
        state = self.__dict__.copy()
        for key in ('_fd', '_buffer', '_pool'):
            state.pop(key)
        return state

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._open()

    def __del__(self) -> None:
        self.close()

    def close(self) -> None:
        pool = getattr(self, '_pool', None)
        if pool is not None:
            pool.shutdown(wait=False)
            self._pool = None
        buffer = getattr(self, '_buffer', None)
        if buffer is not None:
            buffer.close()
        fd = getattr(self, '_fd', None)
        if fd is not None:
            os.close(fd)
            self._fd = None

    def lands_on(self, device: torch.device) -> torch.device:
        return torch.device('cpu')

    def set_threads(self, count: int) -> None:
        r"""Nothing to set: the thread pool grows at the next wave."""

    def read_out(self, work: Callable[[], None],
                 device: torch.device) -> None:
        r"""Runs :obj:`work` now: the host's gather is done when it
        returns."""
        work()

    def fetch(self, reads: Reads, total: int, device: torch.device,
              in_flight: int) -> Tensor:
        view, raw = self._buffer.get(total)
        self._run(reads, view, in_flight)
        return raw[:total]

    def _run(self, reads: Reads, view: memoryview, in_flight: int) -> None:
        workers = min(in_flight, len(reads))
        if workers <= 1:
            self._read_all(reads, view)
            return
        if self._pool is None or self._pool_size < in_flight:
            if self._pool is not None:
                self._pool.shutdown(wait=True)
            self._pool_size = in_flight
            self._pool = ThreadPoolExecutor(
                in_flight, thread_name_prefix='pyg-fastload-read')
        futures = [self._pool.submit(self._read_all, reads[i::workers], view)
                   for i in range(workers)]
        for future in futures:
            future.result()

    def _read_all(self, reads: Reads, view: memoryview) -> None:
        for offset, length, at in reads:
            got = os.preadv(self._fd, [view[at:at + length]], offset)
            check_read(self.file, self.file_bytes, got, offset, length)
            if not self.direct:
                os.posix_fadvise(self._fd, offset, length,
                                 os.POSIX_FADV_DONTNEED)
