r"""Vectorized operations on ranges of ids (CSC neighbour lists, pages)."""
from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

__all__ = ['expand_ranges']


def expand_ranges(starts: Tensor, counts: Tensor,
                  total: Optional[int] = None) -> Tensor:
    r"""Concatenates ``arange(s, s + c)`` for every pair ``(s, c)``.

    Args:
        starts (torch.Tensor): ``int64`` start of every range.
        counts (torch.Tensor): ``int64`` length of every range (>= 0).
        total (int, optional): ``counts.sum()`` if known (saves a sync).

    Example:
        >>> import torch
        >>> from pyg_fastload.graph import expand_ranges
        >>> expand_ranges(torch.tensor([0, 5]), torch.tensor([2, 3])).tolist()
        [0, 1, 5, 6, 7]
    """
    if total is None:
        total = int(counts.sum())
    if total == 0:
        return starts.new_empty(0)
    offsets = torch.cumsum(counts, 0) - counts
    shift = torch.repeat_interleave(starts - offsets, counts,
                                    output_size=total)
    return shift + torch.arange(total, dtype=shift.dtype, device=shift.device)
