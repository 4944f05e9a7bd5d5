r"""Row gathers of feature matrices.

``torch.index_select`` copies a matrix row by row, at a cost per row that
dwarfs the copy of a narrow row; on a 1-D tensor it gathers elements in a
tight loop. :func:`gather_rows` reads each row of 1, 2, 4 or 8 bytes as one
integer of that width, with the same result bit for bit, and leaves wider
rows to ``index_select``. ``pyg-fastload bench rows`` measures both by row
width.
"""
from __future__ import annotations

import math
from typing import Optional

import torch
from torch import Tensor

__all__ = ['gather_rows']

#: The integer type that holds one row of each narrow width (bytes).
_ROW_TYPES = {1: torch.uint8, 2: torch.int16, 4: torch.int32,
              8: torch.int64}


def _as_words(tensor: Tensor) -> Optional[Tensor]:
    r""":obj:`tensor` (2+ dims, on the CPU) viewed as one integer per row,
    or ``None`` where its rows are not narrow, contiguous and aligned."""
    if tensor.dim() < 2 or tensor.device.type != 'cpu' or \
            tensor.is_quantized or tensor.requires_grad or \
            not tensor.is_contiguous():
        return None
    per_row = math.prod(tensor.shape[1:])
    width = tensor.element_size() * per_row
    dtype = _ROW_TYPES.get(width)
    if dtype is None or \
            (tensor.storage_offset() * tensor.element_size()) % width:
        return None
    return tensor.view(tensor.size(0), per_row).view(dtype).view(-1)


def gather_rows(value: Tensor, index: Tensor,
                out: Optional[Tensor] = None) -> Tensor:
    r"""``torch.index_select(value, 0, index, out=out)``, rows of 1, 2, 4
    or 8 bytes read as one integer each (:obj:`out` is allocated when not
    given, and returned)."""
    words = _as_words(value) if index.dim() == 1 else None
    if words is not None:
        shape = (index.numel(), *value.shape[1:])
        if out is None:
            out = torch.empty(shape, dtype=value.dtype)
        target = _as_words(out) if tuple(out.shape) == shape and \
            out.dtype == value.dtype else None
        if target is not None:
            torch.index_select(words, 0, index, out=target)
            return out
    if out is None:
        return value.index_select(0, index)
    return torch.index_select(value, 0, index, out=out)
