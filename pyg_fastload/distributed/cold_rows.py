r"""DSP's cold rows: rows of other ranks' parts that no cache of their owner
holds. DSP reads them straight from storage (UVA) in parallel with the
all-to-all of the hot rows instead of asking their owner; here a rank on
the same machine as an owner reads them from the owner's part files
(memory-mapped, read-only), in a thread beside the hot exchange. Ranks on
other machines, or whose owner's files it cannot open, keep the owner
path (the rows travel through the owner, which reads its storage). The
parts of a ``--features source`` partition hold no feature rows: those are
read from the partitioned dataset's files, at the owner part's
``source_id`` rows."""
from __future__ import annotations

import hashlib
import socket
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, Union

import torch
from torch import Tensor

from ..io import DatasetFormatError, open_node_arrays
from ..partition import HeteroPartitionBook, PartitionBook
from ..partition.part_dirs import part_dir, source_rows
from ..storage import TieredFeatureStore
from ..storage.feature_store import attr_label
from .collectives import Collectives

__all__ = ['ColdRows', 'COLD_ROWS', 'machine_key']

#: An attribute of a feature store: ``(group (node type) or None, name)``.
Key = Tuple[Optional[str], str]
Book = Union[PartitionBook, HeteroPartitionBook]

#: ``mode_options.cold_rows``: ``'auto'`` (direct where the owner's files
#: are on this machine) or ``'owner'`` (always through the owner).
COLD_ROWS = ('auto', 'owner')


def machine_key() -> int:
    r"""A number naming this machine (host name and boot id): two ranks
    with the same key share a file system view."""
    try:
        boot = Path('/proc/sys/kernel/random/boot_id').read_text().strip()
    except OSError:
        boot = ''
    digest = hashlib.blake2b(f'{socket.gethostname()}/{boot}'.encode(),
                             digest_size=8).digest()
    return int.from_bytes(digest, 'little', signed=True)


def _cached_mask(local: TieredFeatureStore, key: Key,
                 rows: int) -> Tensor:
    r"""Which of this part's rows of attribute :obj:`key` a static cache
    holds (a window-buffered cache's rows count as cold: reading them from
    the file gives the same values)."""
    mask = torch.zeros(rows, dtype=torch.uint8)
    mask[local.cached_ids(key[1], key[0])] = 1
    return mask


def _owned(book: Book, key: Key, part: int) -> int:
    r"""How many rows of attribute :obj:`key` part :obj:`part` holds."""
    start, end = book.of_group(key[0]).part_range(part)
    return end - start


class ColdRows:
    r"""This rank's view of the other parts' cold rows (a collective to
    build: every rank tells the others its machine and which of its rows
    its caches hold).

    Args:
        parts_dir: the partition directory.
        book (PartitionBook or HeteroPartitionBook): who owns which id
            (of each node type).
        part (int): this rank's part.
        collectives (Collectives): exchanged once, here.
        local (TieredFeatureStore): this rank's part with its caches.
        mode (str): ``'auto'`` or ``'owner'`` (:data:`COLD_ROWS`).
        meta (dict): the partition's ``partition.json`` (checked).
    """
    def __init__(self, parts_dir: Union[str, Path], book: Book,
                 part: int, collectives: Collectives,
                 local: TieredFeatureStore, mode: str, meta: Dict[str, Any]):
        if mode not in COLD_ROWS:
            raise ValueError(f"'cold_rows' = {mode!r} is not one of "
                             f"{', '.join(COLD_ROWS)}")
        world = collectives.world_size
        self.attrs: List[Key] = sorted(
            {(a.group_name, a.attr_name) for a in
             local.get_all_tensor_attrs()}, key=lambda k: (k[0] or '', k[1]))
        key = torch.tensor([machine_key()])
        keys = collectives.exchange([key] * world, 'control',
                                    'tell the machines apart')
        #: Per owner and attribute: which of its rows its caches hold.
        self.cached: Dict[int, Dict[Key, Tensor]] = {}
        for attr in self.attrs:
            mask = _cached_mask(local, attr, _owned(book, attr, part))
            got = collectives.exchange([mask] * world, 'control',
                                       f"tell which '{attr_label(attr)}' "
                                       f"rows are cached")
            for owner, owner_mask in enumerate(got):
                self.cached.setdefault(owner, {})[attr] = owner_mask.bool()
        #: Per owner reachable directly: its part's arrays (memory-mapped).
        self.arrays: Dict[int, Dict[Key, Tensor]] = {}
        #: Per owner and attribute read from the partitioned dataset: the
        #: dataset's row of each of the owner's rows.
        self.rows_of: Dict[int, Dict[Key, Tensor]] = {}
        if mode == 'auto':
            for owner in range(world):
                if owner != part and int(keys[owner]) == int(key):
                    self._open(Path(parts_dir), book, owner, meta)
        self._pool: Optional[ThreadPoolExecutor] = None

    def _open(self, parts_dir: Path, book: Book, owner: int,
              meta: Dict[str, Any]) -> None:
        r"""Maps the owner's arrays, if reachable from here (else the
        owner path)."""
        try:
            found = open_node_arrays(part_dir(parts_dir, owner),
                                     verify='size')
            source = source_rows(parts_dir, meta, owner)
        except (DatasetFormatError, OSError, ValueError):
            return
        arrays = {a: found[a] for a in self.attrs if a in found}
        rows_of: Dict[Key, Tensor] = {}
        if source is not None:
            dataset, rows = source
            for attr in self.attrs:
                if attr not in arrays and attr[1] in dataset.arrays:
                    arrays[attr], rows_of[attr] = dataset.arrays[attr[1]], rows
        if any(rows_of.get(a, t).size(0) != _owned(book, a, owner)
               for a, t in arrays.items()):
            return
        self.arrays[owner], self.rows_of[owner] = arrays, rows_of

    def split(self, attr: Key, owners: Tensor,
              local_ids: Tensor) -> Tensor:
        r"""Which of the rows (their owners, and ids within the owners'
        parts) to read directly: cold, and their owner reachable."""
        direct = torch.zeros(local_ids.numel(), dtype=torch.bool)
        for owner in self.arrays:
            if attr not in self.arrays[owner]:
                continue
            at = (owners == owner).nonzero().view(-1)
            if at.numel():
                cold = ~self.cached[owner][attr][local_ids[at]]
                direct[at[cold]] = True
        return direct

    def read(self, attr: Key, owners: Tensor,
             local_ids: Tensor) -> 'Future[Tensor]':
        r"""Starts reading the rows in a thread (beside the hot
        exchange); the future gives them in the order asked."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(
                1, thread_name_prefix='pyg_fastload-cold-rows')
        return self._pool.submit(self._read, attr, owners, local_ids)

    def _read(self, attr: Key, owners: Tensor, local_ids: Tensor) -> Tensor:
        parts: List[Tuple[Tensor, Tensor]] = []
        for owner in owners.unique().tolist():
            at = (owners == owner).nonzero().view(-1)
            array = self.arrays[owner][attr]
            ids = local_ids[at]
            if attr in self.rows_of[owner]:
                ids = self.rows_of[owner][attr][ids]
            order = torch.argsort(ids)  # file order
            rows = array[ids[order]]
            parts.append((at[order], torch.as_tensor(rows)))
        first = parts[0][1]
        out = first.new_empty((local_ids.numel(), *first.shape[1:]))
        for at, rows in parts:
            out[at] = rows
        return out

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False)
            self._pool = None
