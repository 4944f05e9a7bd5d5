r"""Storage reads straight into the batch's device (GIDS's path to GPU
memory): rows that miss every cache are read by kvikio, NVIDIA's cuFile
library, into a buffer on the device of the batch and gathered there, with
no host copy of the rows. kvikio uses GPUDirect Storage where the driver
and the file system have it and its compatibility mode (POSIX reads through
a pinned bounce buffer) elsewhere.

kvikio is an optional dependency: ``pip install kvikio-cu12`` (or the
package of the machine's CUDA major version). Reads are planned as in
:class:`~pyg_fastload.storage.DirectStorage` (block-aligned, touching rows
merged, long reads cut into 1 MiB pieces), which is also what GPUDirect
Storage needs to avoid bounce buffers: 4 KiB-aligned offsets and lengths.

kvikio writes the buffer outside CUDA's stream order, while the gather out
of it is queued on the stream: before a wave's reads write the buffer again,
the host waits for the event recorded after the previous wave's gather
(:class:`CurrentStream`).
"""
from __future__ import annotations

import importlib
import os
from typing import Any, Callable, Dict, Optional, Protocol, Sequence, Union

import torch
from torch import Tensor

from .block_reads import Reads, check_read
from .direct import DirectStorage
from .row_file import RowFile

__all__ = ['CurrentStream', 'GpuDirectStorage', 'KvikioReads',
           'load_kvikio']


def load_kvikio() -> Any:
    r"""The :mod:`kvikio` module, or an :class:`ImportError` saying how to
    get it."""
    try:
        return importlib.import_module('kvikio')
    except ImportError as error:
        raise ImportError(
            f"storage='gds' reads with kvikio, which is not installed "
            f"({error}): `pip install kvikio-cu12` (CUDA 12; kvikio-cu13 "
            f"for CUDA 13), or use storage='direct'") from None


class Done(Protocol):
    r"""Queued work's end, as a CUDA event marks it."""
    def synchronize(self) -> None:
        r"""Returns once the work has run."""


class CurrentStream:
    r"""Queues work on the current CUDA stream of its device and marks its
    end with an event (work on the CPU runs at once: nothing to wait
    for)."""
    def queue(self, work: Callable[[], None],
              device: torch.device) -> Optional[Done]:
        r"""Runs :obj:`work` (CUDA: queues its kernels); returns what to
        wait on before what it reads is written again."""
        work()
        if device.type != 'cuda':
            return None
        event = torch.cuda.Event()
        event.record(torch.cuda.current_stream(device))
        return event


class KvikioReads:
    r"""Block reads by kvikio into a buffer on the device the rows are
    bound for (GPU memory for a CUDA batch): all reads of a wave are
    submitted at once to kvikio's thread pool, then awaited. A short read
    is an error naming the file, never a partial row. A wave's reads wait
    until the gather out of the buffer that the previous wave queued has
    run.

    Args:
        file (RowFile): the file read.
        kvikio (module, optional): the kvikio module (default: imported).
        stream (CurrentStream, optional): where the gathers out of the
            buffer are queued (default: the current CUDA stream).
    """
    place = 'file, read into GPU memory'

    def __init__(self, file: RowFile, kvikio: Optional[Any] = None,
                 stream: Optional[CurrentStream] = None):
        self.file = file
        self._kvikio = kvikio if kvikio is not None else load_kvikio()
        self._stream = stream or CurrentStream()
        self._open()

    def _open(self) -> None:
        self._file = self._kvikio.CuFile(self.file.path, 'r')
        self._buffer: Optional[Tensor] = None
        self._read_out: Optional[Done] = None  # the last gather's end
        self.file_bytes = os.path.getsize(self.file.path)

    def __getstate__(self) -> Dict[str, Any]:
        state = self.__dict__.copy()
        for key in ('_file', '_buffer', '_read_out', '_kvikio'):
            state.pop(key)
        return state

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._kvikio = load_kvikio()
        self._open()

    def __del__(self) -> None:
        self.close()

    def close(self) -> None:
        handle = getattr(self, '_file', None)
        if handle is not None:
            handle.close()
            self._file = None

    def lands_on(self, device: torch.device) -> torch.device:
        return device

    def set_threads(self, count: int) -> None:
        self._kvikio.defaults.set('num_threads', count)

    def read_out(self, work: Callable[[], None],
                 device: torch.device) -> None:
        self._read_out = self._stream.queue(work, device)

    def fetch(self, reads: Reads, total: int, device: torch.device,
              in_flight: int) -> Tensor:
        if self._read_out is not None:  # kvikio ignores stream order
            self._read_out.synchronize()
            self._read_out = None
        buffer = self._buffer
        if buffer is None or buffer.device != device or \
                buffer.numel() < total:
            self._buffer = None  # free before allocating anew
            buffer = torch.empty(total, dtype=torch.uint8, device=device)
            self._buffer = buffer
        pending = []
        for offset, length, at in reads:
            size = min(length, self.file_bytes - offset)  # short last block
            chunk = buffer[at:at + size]  # host memory goes as numpy
            target = chunk.numpy() if chunk.device.type == 'cpu' else chunk
            pending.append((self._file.pread(target, size, offset), offset,
                            length))
        for future, offset, length in pending:
            check_read(self.file, self.file_bytes, future.get(), offset,
                       length)
        return buffer[:total]


class GpuDirectStorage(DirectStorage):
    r"""All rows of a raw row-major file, read by kvikio
    (:class:`KvikioReads`) into a buffer on the device of the rows'
    destination (GPU memory for a CUDA batch) and gathered there: a
    :class:`~pyg_fastload.storage.DirectStorage` whose block reads kvikio
    issues (:obj:`in_flight` threads; with ``'auto'`` the
    :class:`~pyg_fastload.storage.direct.InFlightTuner` sets them).

    Args:
        path (str): the raw binary file.
        dtype (torch.dtype): element type.
        shape (Sequence[int]): ``[num_rows, ...]``.
        offset (int): byte offset of the first row.
        in_flight (int or str): kvikio threads, or ``'auto'``.
        merge_gap (int): blocks read through between two rows' reads.
        kvikio (module, optional): the kvikio module (default: imported).
        stream (CurrentStream, optional): where gathers out of the read
            buffer are queued (default: the current CUDA stream).
    """
    def __init__(self, path: str, dtype: torch.dtype, shape: Sequence[int],
                 offset: int = 0, in_flight: Union[int, str] = 'auto',
                 merge_gap: int = 0, kvikio: Optional[Any] = None,
                 stream: Optional[CurrentStream] = None):
        super().__init__(path, dtype, shape, offset, in_flight=in_flight,
                         merge_gap=merge_gap,
                         reads=lambda file: KvikioReads(file, kvikio, stream))
