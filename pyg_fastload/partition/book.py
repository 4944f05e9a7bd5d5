r"""The partition book (DSP): nodes renumbered so that each part owns one
contiguous range of new ids, so the owner of a node is a range check.

Stored as plain ``.npy`` arrays any tool can read: ``owner.npy`` (the part
of each ORIGINAL node id), ``new_id.npy`` (the new id of each original node,
a permutation) and ``offsets.npy`` (``num_parts + 1`` boundaries: part ``k``
owns new ids ``[offsets[k], offsets[k + 1])``).
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional, Tuple

import numpy as np
import torch
from torch import Tensor

__all__ = ['PartitionBook', 'renumber', 'BOOK_FILES']

#: The files of a partition book.
BOOK_FILES = ('owner.npy', 'new_id.npy', 'offsets.npy')


def renumber(owner: np.ndarray, num_parts: int) -> Tuple[np.ndarray,
                                                           np.ndarray]:
    r"""``(new_id, offsets)`` for :obj:`owner`: part ``k`` gets the new ids
    ``[offsets[k], offsets[k + 1])``, its nodes in their original order."""
    order = np.argsort(owner, kind='stable')  # original ids, part by part
    new_id = np.empty_like(order)
    new_id[order] = np.arange(order.size, dtype=order.dtype)
    offsets = np.zeros(num_parts + 1, dtype=np.int64)
    np.cumsum(np.bincount(owner, minlength=num_parts), out=offsets[1:])
    return new_id, offsets


class PartitionBook:
    r"""Who owns which node, in new ids: :meth:`owner` is one binary search
    over the part boundaries, and nothing else is stored per node.

    Args:
        offsets (torch.Tensor): ``num_parts + 1`` boundaries of the parts'
            ranges of new ids.
    """
    def __init__(self, offsets: Tensor):
        self.offsets = torch.as_tensor(offsets, dtype=torch.long)

    @property
    def num_parts(self) -> int:
        return self.offsets.numel() - 1

    @property
    def num_nodes(self) -> int:
        return int(self.offsets[-1])

    @property
    def num_ids(self) -> int:
        r"""The new ids there are (:attr:`num_nodes`)."""
        return self.num_nodes

    def owner(self, ids: Tensor) -> Tensor:
        r"""The part owning each new id in :obj:`ids`."""
        return torch.searchsorted(self.offsets, ids, right=True) - 1

    def local(self, ids: Tensor) -> Tensor:
        r"""Each new id's position within its owner's range."""
        return ids - self.offsets[self.owner(ids)]

    def part_range(self, part: int) -> Tuple[int, int]:
        r"""``[start, end)`` of the new ids part :obj:`part` owns."""
        return int(self.offsets[part]), int(self.offsets[part + 1])

    def of_group(self, group_name: Optional[str]) -> 'PartitionBook':
        r"""The book of a feature store group's ids: this one (a
        homogeneous partition's rows have no node type)."""
        if group_name is not None:
            raise ValueError(f'node type {group_name!r}: this partition is '
                             f'homogeneous (its rows have no node type)')
        return self

    @classmethod
    def load(cls, parts_dir: Path) -> 'PartitionBook':
        r"""Reads ``offsets.npy`` (never unpickling)."""
        return cls(torch.from_numpy(np.load(Path(parts_dir) / 'offsets.npy',
                                            allow_pickle=False)))

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}(num_parts={self.num_parts}, '
                f'num_nodes={self.num_nodes:,})')
