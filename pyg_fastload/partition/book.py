r"""The partition book (DSP): nodes renumbered so that each part owns one
contiguous range of new ids, so the owner of a node is a range check.

A homogeneous graph is one node type. A heterogeneous graph's new ids are
*typed*: node ``i`` of type ``t`` gets a type-local new id (a permutation
of ``[0, N_t)``, :func:`renumber` per type) and the global new id
``node_offset[t]`` plus it, so type ``t`` keeps the global range it had
(:class:`~pyg_fastload.graph.HeteroTopology`'s layout) and, within it,
part ``k`` owns ``[offsets[t, k], offsets[t, k + 1])``
(:class:`HeteroPartitionBook`: one :class:`PartitionBook` per node type,
and one over the ``T * K`` (type, part) ranges of the global new ids).

Stored as plain ``.npy`` arrays any tool can read: ``owner.npy`` (the part
of each ORIGINAL node id, every type's in one id space), ``new_id.npy``
(the global new id of each original node, a permutation) and
``offsets.npy`` (``num_parts + 1`` boundaries; per node type
``[T, num_parts + 1]``), checked on reading by
:func:`~pyg_fastload.partition.load_book`.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import numpy as np
import torch
from torch import Tensor

from ..graph.hetero_topology import offsets_of

__all__ = ['PartitionBook', 'HeteroPartitionBook', 'renumber', 'BOOK_FILES']

#: The files of a partition book.
BOOK_FILES = ('owner.npy', 'new_id.npy', 'offsets.npy')


def renumber(owner: np.ndarray, num_parts: int,
             node_offset: Optional[Tensor] = None
             ) -> Tuple[np.ndarray, np.ndarray]:
    r"""``(new_id, offsets)`` for :obj:`owner` (the part of every original
    id): part ``k`` gets the new ids ``[offsets[k], offsets[k + 1])``, its
    nodes in their original order. With :obj:`node_offset` (where each
    node type's global ids start, ``T + 1`` entries), per node type: every
    type stays in its global range and ``offsets`` is ``[T, num_parts +
    1]``, each type's part boundaries of its type-local new ids.

    Args:
        owner (numpy.ndarray): the part of every original id.
        num_parts (int): the number of parts.
        node_offset (torch.Tensor, optional): where each node type's
            global ids start (renumbers per node type).

    Example:
        >>> import numpy as np
        >>> from pyg_fastload.partition import renumber
        >>> renumber(np.array([1, 0, 1, 0]), 2)
        (array([2, 0, 3, 1]), array([0, 2, 4]))
    """
    if node_offset is not None:
        new_id = np.empty_like(owner)
        offsets = np.zeros((node_offset.numel() - 1, num_parts + 1),
                           dtype=np.int64)
        for t in range(node_offset.numel() - 1):
            lo, hi = int(node_offset[t]), int(node_offset[t + 1])
            local, offsets[t] = renumber(owner[lo:hi], num_parts)
            new_id[lo:hi] = local + lo
        return new_id, offsets
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

    Example:
        >>> import torch
        >>> from pyg_fastload.partition import PartitionBook
        >>> book = PartitionBook(torch.tensor([0, 2, 4]))
        >>> book.owner(torch.tensor([0, 3])).tolist(), book.part_range(1)
        ([0, 1], (2, 4))
    """
    #: The book's kind, asked here rather than by ``isinstance``: one node
    #: type (:class:`HeteroPartitionBook`'s is :obj:`True`).
    hetero = False

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

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}(num_parts={self.num_parts}, '
                f'num_nodes={self.num_nodes:,})')


class HeteroPartitionBook:
    r"""Who owns which node of each type, in typed new ids: one
    :class:`PartitionBook` per node type (its parts' ranges of the type's
    new ids), and one over the ``(type, part)`` ranges of the global new
    ids, so either kind of id is one binary search.

    Args:
        offsets (Dict[str, torch.Tensor]): per node type (in the global id
            order of the types), the ``num_parts + 1`` boundaries of its
            parts' ranges of type-local new ids.
    """
    #: Several node types (:class:`PartitionBook`'s kind is :obj:`False`).
    hetero = True

    def __init__(self, offsets: Dict[str, Tensor]):
        if not offsets:
            raise ValueError("'offsets' needs at least one node type")
        self.books = {t: PartitionBook(o) for t, o in offsets.items()}
        parts = {book.num_parts for book in self.books.values()}
        if len(parts) != 1:
            raise ValueError(f'the node types have different part counts '
                             f'({sorted(parts)}); one partition has one')
        #: Where each type's global ids start (``T + 1`` entries).
        self.node_offset = offsets_of([b.num_nodes for b in
                                       self.books.values()])
        starts = [self.node_offset[i] + book.offsets[:-1]
                  for i, book in enumerate(self.books.values())]
        #: The ``(type, part)`` ranges of global new ids, type-major:
        #: range ``t * num_parts + k``.
        self.slots = PartitionBook(torch.cat(starts + [self.node_offset[-1:]]))

    @property
    def node_types(self) -> List[str]:
        return list(self.books)

    @property
    def num_parts(self) -> int:
        return next(iter(self.books.values())).num_parts

    @property
    def num_nodes(self) -> Dict[str, int]:
        r"""Node count per type."""
        return {t: b.num_nodes for t, b in self.books.items()}

    @property
    def num_ids(self) -> int:
        r"""The global new ids there are (nodes of all types)."""
        return int(self.node_offset[-1])

    @property
    def offsets(self) -> Tensor:
        r"""``[T, num_parts + 1]``: row ``t`` the part boundaries of type
        ``t``'s new ids (``offsets.npy``)."""
        return torch.stack([b.offsets for b in self.books.values()])

    def __getitem__(self, node_type: str) -> PartitionBook:
        r"""The book of :obj:`node_type`'s (type-local) new ids."""
        if node_type not in self.books:
            raise KeyError(f'{node_type!r} is not a node type of this '
                           f"partition ({', '.join(self.books)})")
        return self.books[node_type]

    def of_group(self, group_name: Optional[str]) -> PartitionBook:
        r"""The book of a feature store group's ids: the ranges of node
        type :obj:`group_name`'s type-local new ids."""
        if group_name is None:
            raise ValueError(f'this partition is heterogeneous: name a node '
                             f"type ({', '.join(self.books)})")
        return self[group_name]

    def owner(self, ids: Tensor, node_type: Optional[str] = None) -> Tensor:
        r"""The part owning each id: type-local new ids of
        :obj:`node_type`, or global new ids when it is :obj:`None`."""
        if node_type is not None:
            return self[node_type].owner(ids)
        return self.slots.owner(ids) % self.num_parts

    def node_type_of(self, ids: Tensor) -> Tensor:
        r"""The type (index into :attr:`node_types`) of each global new
        id."""
        return torch.bucketize(ids, self.node_offset[1:], right=True)

    def local(self, ids: Tensor, node_type: Optional[str] = None) -> Tensor:
        r"""Each id's row in its owner's range of its type (the row of the
        part's arrays of that type)."""
        if node_type is not None:
            return self[node_type].local(ids)
        return ids - self.slots.offsets[self.slots.owner(ids)]

    def part_range(self, part: int, node_type: str) -> Tuple[int, int]:
        r"""``[start, end)`` of the type-local new ids of :obj:`node_type`
        part :obj:`part` owns."""
        return self[node_type].part_range(part)

    def first_id(self, node_type: str) -> int:
        r"""The global new id of :obj:`node_type`'s first node (its
        type-local ids start there)."""
        return int(self.node_offset[self.node_types.index(node_type)])

    def global_ids(self, ids: Tensor, node_type: str) -> Tensor:
        r"""The global new ids of type-local new ids of :obj:`node_type`."""
        return ids + self.first_id(node_type)

    def __repr__(self) -> str:
        nodes = ', '.join(f'{t}: {n:,}' for t, n in self.num_nodes.items())
        return (f'{self.__class__.__name__}(num_parts={self.num_parts}, '
                f'num_nodes={{{nodes}}})')
