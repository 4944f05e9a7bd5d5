r"""Recycled output buffers for feature gathers.

A freshly allocated 100+ MiB tensor is mapped page by page by the kernel as
the gather first writes it; on the benchmark machine that costs three times
the gather itself. The pool hands out buffers whose previous batch has been
dropped (no tensor references their storage any more), so a gather writes
into memory that is already mapped.
"""
from __future__ import annotations

import math
import threading
from typing import List, Sequence

import torch
from torch import Tensor

from ..compat import CAN_COUNT_STORAGE_USES, storage_use_count
from .rows import gather_rows

__all__ = ['BufferPool']

_ALIGN = 2 * 2**20

def _is_free(base: Tensor) -> bool:
    r"""Whether only the pool (and the temporary storage handle made for the
    query) reference :obj:`base`'s memory."""
    return storage_use_count(base) <= 2


class BufferPool:
    r"""Up to :obj:`max_buffers` reusable byte buffers.

    Args:
        max_buffers (int): buffers kept; when all are still referenced by
            live batches, :meth:`empty` falls back to a plain allocation, so
            memory stays bounded by the batches the user holds.
    """
    def __init__(self, max_buffers: int = 4):
        self.max_buffers = max_buffers
        self._buffers: List[Tensor] = []
        self.reused = 0
        self.allocated = 0
        # Loaders in several threads may share a pool (a store's staging
        # block): checking that a buffer is free and handing it out is one
        # step, or two threads could get the same buffer.
        self._lock = threading.Lock()

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state['_lock'] = None
        state['_buffers'] = []
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return CAN_COUNT_STORAGE_USES and self.max_buffers > 0

    def empty(self, shape: Sequence[int], dtype: torch.dtype) -> Tensor:
        r"""An uninitialised tensor of :obj:`shape` and :obj:`dtype`, backed
        by a recycled buffer where one is free."""
        itemsize = torch.empty((), dtype=dtype).element_size()
        nbytes = math.prod(shape) * itemsize
        if not self.enabled:
            return torch.empty(shape, dtype=dtype)
        with self._lock:
            return self._take(nbytes).view(dtype).view(shape)

    def _take(self, nbytes: int) -> Tensor:
        for base in self._buffers:
            if base.numel() >= nbytes and _is_free(base):
                self.reused += 1
                return base[:nbytes]
        # Round up with slack, so slightly larger batches reuse it too.
        size = math.ceil(nbytes * 1.25 / _ALIGN) * _ALIGN
        base = torch.empty(size, dtype=torch.uint8)
        self.allocated += 1
        if len(self._buffers) < self.max_buffers:
            self._buffers.append(base)
        else:
            free = [i for i, b in enumerate(self._buffers) if _is_free(b)]
            if free:  # Replace the smallest free buffer by the larger one.
                smallest = min(free, key=lambda i: self._buffers[i].numel())
                self._buffers[smallest] = base
        return base[:nbytes]

    def index_select(self, value: Tensor, index: Tensor) -> Tensor:
        r"""``value.index_select(0, index)`` written into a pooled buffer."""
        out = self.empty((index.numel(), ) + tuple(value.shape[1:]),
                         value.dtype)
        return gather_rows(value, index, out=out)
