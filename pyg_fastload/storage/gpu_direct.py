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
"""
from __future__ import annotations

import importlib
from typing import Any, List, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor

from .direct import DirectStorage

__all__ = ['GpuDirectStorage', 'load_kvikio']


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


class GpuDirectStorage(DirectStorage):
    r"""All rows of a raw row-major file, read by kvikio into a buffer on
    the device of the rows' destination (GPU memory for a CUDA batch) and
    gathered there.

    All reads of a wave are submitted at once to kvikio's thread pool
    (:obj:`in_flight` threads; with ``'auto'`` the
    :class:`~pyg_fastload.storage.direct.InFlightTuner` sets them), then
    awaited. A short read is an error naming the file, never a partial row.

    Args:
        path (str): the raw binary file.
        dtype (torch.dtype): element type.
        shape (Sequence[int]): ``[num_rows, ...]``.
        offset (int): byte offset of the first row.
        in_flight (int or str): kvikio threads, or ``'auto'``.
        merge_gap (int): blocks read through between two rows' reads.
        kvikio (module, optional): the kvikio module (default: imported).
    """
    reads_to_device = True
    place = 'file, read into GPU memory'

    def __init__(self, path: str, dtype: torch.dtype, shape: Sequence[int],
                 offset: int = 0, in_flight: Union[int, str] = 'auto',
                 merge_gap: int = 0, kvikio: Optional[Any] = None):
        self._kvikio = kvikio if kvikio is not None else load_kvikio()
        super().__init__(path, dtype, shape, offset, in_flight=in_flight,
                         merge_gap=merge_gap)

    def _open(self) -> None:
        super()._open()
        self._file = self._kvikio.CuFile(self.path, 'r')
        self._device_buffer: Optional[Tensor] = None
        self._set_in_flight(self.in_flight)

    def __getstate__(self) -> dict:
        state = super().__getstate__()
        for key in ('_file', '_device_buffer', '_kvikio'):
            state.pop(key)
        return state

    def __setstate__(self, state: dict) -> None:
        state['_kvikio'] = load_kvikio()
        super().__setstate__(state)

    def __del__(self) -> None:
        handle = getattr(self, '_file', None)
        if handle is not None:
            handle.close()
        super().__del__()

    def _set_in_flight(self, depth: int) -> None:
        super()._set_in_flight(depth)
        self._kvikio.defaults.set('num_threads', depth)

    def gather(self, ids: Tensor, out: Tensor) -> None:
        r"""Writes rows :obj:`ids` into :obj:`out` (on any device), reading
        every distinct row once, in file order, into :obj:`out`'s device."""
        if ids.numel() == 0:
            return
        rows, inverse = torch.unique(ids, sorted=True, return_inverse=True)
        block = torch.empty((rows.numel(), *self.shape[1:]),
                            dtype=self.dtype, device=out.device)
        self.read_sorted(rows, block, requests=ids.numel())
        torch.index_select(block, 0, inverse.to(out.device), out=out)

    def _fetch(self, reads: List[Tuple[int, int, int]], total: int,
               device: torch.device) -> Tensor:
        buffer = self._device_buffer
        if buffer is None or buffer.device != device or \
                buffer.numel() < total:
            self._device_buffer = None  # free before allocating anew
            buffer = torch.empty(total, dtype=torch.uint8, device=device)
            self._device_buffer = buffer
        pending = []
        for offset, length, at in reads:
            size = min(length, self.file_bytes - offset)  # short last block
            chunk = buffer[at:at + size]  # host memory goes as numpy
            target = chunk.numpy() if chunk.device.type == 'cpu' else chunk
            pending.append((self._file.pread(target, size, offset), offset,
                            length))
        for future, offset, length in pending:
            self.check_read(future.get(), offset, length)
        return buffer[:total]
