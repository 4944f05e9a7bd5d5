r"""The one seam to private internals of torch, torch.distributed and PyG
that this package truly needs: each is reached here only, and
``tests/test_compat.py`` fails by name if an upgrade removes one.

* :func:`storage_use_count`: how many tensors share a storage (a buffer pool
  reuses a buffer only when no batch still holds it); torch has no public
  call for it.
* :func:`process_group_store`: the default process group's key-value store
  (ranks post failures and heartbeats there without a collective);
  torch.distributed exposes it only through ``distributed_c10d``.
* :func:`has_own_entry` and :func:`drop_entry`: whether a ``Data`` object
  holds an attribute itself, as opposed to a value PyG infers
  (``num_nodes`` from ``x``), and removing such an entry where there is
  one; PyG has no public call for either."""
from __future__ import annotations

from typing import Any, Optional

import torch
import torch.distributed as dist
from torch import Tensor

__all__ = ['CAN_COUNT_STORAGE_USES', 'storage_use_count',
           'process_group_store', 'has_own_entry', 'drop_entry']

_use_count = getattr(torch._C, '_storage_Use_Count', None)
#: Whether this torch tells how many tensors share a storage.
CAN_COUNT_STORAGE_USES = _use_count is not None


def storage_use_count(tensor: Tensor) -> Optional[int]:
    r"""References to :obj:`tensor`'s storage (the query's own handle
    included), or :obj:`None` where this torch has no way to tell."""
    if _use_count is None:
        return None
    return int(_use_count(tensor.untyped_storage()._cdata))


def process_group_store() -> Any:
    r"""The default process group's store (``set``, ``get``, ``check``,
    ``add``); the group must be initialised."""
    return dist.distributed_c10d._get_default_store()


def has_own_entry(data: Any, key: str) -> bool:
    r"""Whether the PyG ``Data`` :obj:`data` holds :obj:`key` itself (not
    a value PyG infers on access, such as ``num_nodes``)."""
    return key in data._store


def drop_entry(data: Any, key: str) -> None:
    r"""Removes :obj:`key` from the PyG ``Data`` :obj:`data`'s own entries
    (a no-op where it has none)."""
    data._store.pop(key, None)
