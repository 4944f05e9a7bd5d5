r"""A partition-aware feature store: rows this rank owns come from its own
tiers (device cache, host buffer, disk), rows other ranks own through a
remote tier that sends one request per owner per mini-batch (ids out, rows
back): as a collective (:class:`~pyg_fastload.distributed.collectives.
Collectives`, every rank in lockstep), or as an asynchronous request the
owner serves between its own batches (:class:`~pyg_fastload.distributed.
requests.RequestService`).

Ids are the partition's new ids (``owner = range check`` through the
:class:`~pyg_fastload.partition.PartitionBook`); on a heterogeneous
partition each node type (feature store group) has its own ranges of
type-local new ids (:class:`~pyg_fastload.partition.HeteroPartitionBook`),
and one store serves every type's rows. Every rank must gather the same
attributes in the same order, once per mini-batch (even with no remote
ids), since each gather is a collective; with a request service a rank
asks only the owners of its remote rows, whenever it needs them.
"""
from __future__ import annotations

import threading
import time
from typing import Dict, List, Optional, Tuple, Union

import torch
from torch import Tensor
from torch_geometric.data import FeatureStore, TensorAttr

from ..partition import HeteroPartitionBook, PartitionBook
from ..storage import TieredFeatureStore, cached_and_stored
from ..storage.feature_store import attr_label
from ..storage.protocol import BatchIds, TierPlaces, TierStats
from .cold_rows import ColdRows
from .collectives import Collectives
from .requests import Pending, RequestService

__all__ = ['PartitionedFeatureStore']


class PartitionedFeatureStore(FeatureStore):
    r"""Features of a whole partitioned graph, seen from one rank.

    Args:
        local (TieredFeatureStore): this rank's part (rows in new-id order
            from the part's first new id, per node type on a heterogeneous
            partition, as :func:`open_partition` opens it).
        book (PartitionBook or HeteroPartitionBook): who owns which new
            id (of each node type).
        part (int): the part this rank owns.
        collectives (Collectives): the rank's collectives.
        cold (ColdRows, optional): reads the other parts' cold rows (in no
            cache of their owner) directly where it can, beside the
            exchange of the hot ones (DSP); without it every remote row
            comes through its owner.
        requests (RequestService, optional): asks each owner for its rows
            when a batch needs them, and serves the others' requests
            between this rank's batches (started by the caller after this
            store registered its operations); without it each gather is
            a collective. The rows are the same either way.
    """
    def __init__(self, local: TieredFeatureStore,
                 book: Union[PartitionBook, HeteroPartitionBook],
                 part: int, collectives: Collectives,
                 cold: Optional[ColdRows] = None,
                 requests: Optional[RequestService] = None):
        super().__init__()
        if collectives.world_size != book.num_parts:
            raise ValueError(f'{book.num_parts} parts but world size '
                             f'{collectives.world_size}: run one rank per '
                             f'part')
        self.local = local
        self.book = book
        self.part = part
        self.collectives = collectives
        self.cold = cold
        self._remote: Dict[str, Dict[str, float]] = {}
        self._direct: Dict[str, Dict[str, float]] = {}
        self._served: Dict[str, Dict[str, float]] = {}
        # The local tiers serve this rank's batches and (on the request
        # service's thread) the other ranks' requests: one at a time.
        self._lock = threading.Lock()
        self._batch = 0  # what the owners order requests by
        self.requests = requests
        self._ops: Dict[Tuple[Optional[str], str], int] = {}
        if requests is not None:
            for attr in local.get_all_tensor_attrs():
                key = (attr.group_name, attr.attr_name)
                if key not in self._ops:
                    self._ops[key] = requests.register(
                        f'rows {attr_label(key)}',
                        lambda src, ids, key=key: self._counted(
                            self._serve(key, ids), ids))

    # The feature-source protocol ############################################

    @property
    def device(self) -> torch.device:  # type: ignore[override]
        return self.local.device

    @property
    def lookahead_depth(self) -> int:
        return self.local.lookahead_depth

    def dtype_of(self, attr_name: str,
                 group_name: Optional[str] = None) -> torch.dtype:
        return self.local.dtype_of(attr_name, group_name)

    def first_step_done(self) -> None:
        self.local.first_step_done()

    def part_range(self, group_name: Optional[str] = None
                   ) -> Tuple[int, int]:
        r"""``[start, end)`` of the ids (of node type :obj:`group_name`)
        this rank owns: its rows of the group are ``id - start``."""
        return self.book.of_group(group_name).part_range(self.part)

    def _own(self, batch: BatchIds) -> BatchIds:
        r"""The rows of this part among a batch's ids (of each type)."""
        if isinstance(batch, dict):
            return {group: self._own_rows(ids, group)
                    for group, ids in batch.items()}
        return self._own_rows(batch, None)

    def _own_rows(self, ids: Tensor, group_name: Optional[str]) -> Tensor:
        start, end = self.part_range(group_name)
        return ids[(ids >= start) & (ids < end)] - start

    def announce(self, ids: BatchIds) -> None:
        with self._lock:
            self.local.announce(self._own(ids))

    def retire(self, ids: BatchIds) -> None:
        r"""A batch's rows are about to be gathered (the loader calls this
        once per batch): also starts the batch's ordered launches."""
        self.collectives.begin_batch()
        self._batch += 1
        with self._lock:
            self.local.retire(self._own(ids))

    def stats(self) -> TierStats:
        r"""The local tiers' counters (rows this rank served, for itself and
        for others), plus per attribute ``'remote'`` (rows and bytes it
        fetched from other ranks), ``'remote_disk'`` (other parts' cold
        rows it read from their files directly) and ``'served'`` (rows it
        served to other ranks from its caches and from its storage)."""
        stats = self.local.stats()
        for name, remote in self._remote.items():
            stats.setdefault(name, {})['remote'] = dict(remote)
        for name, direct in self._direct.items():
            stats.setdefault(name, {})['remote_disk'] = dict(direct)
        for name, served in self._served.items():
            stats.setdefault(name, {})['served'] = dict(served)
        return stats

    def places(self) -> TierPlaces:
        r"""Where each tier of :meth:`stats` reads from: the local tiers'
        places; other ranks' rows sent by their owners (``'remote'``) or
        read here from the owners' part files (``'remote_disk'``)."""
        places = self.local.places()
        for tier, counted, place in (
                ('remote', self._remote, 'sent by their owners'),
                ('remote_disk', self._direct, 'read here')):
            for name in counted:
                places.setdefault(name, {})[tier] = place
        return places

    def gather(self, attr_name: str, index: Tensor,
               group_name: Optional[str] = None,
               out: Optional[Tensor] = None,
               timings: Optional[Dict[str, float]] = None) -> Tensor:
        r"""Rows :obj:`index` (new ids, of node type :obj:`group_name`) of
        an attribute: own rows from the local tiers, the others from their
        owners (a collective, or requests to the owners of these rows
        alone)."""
        index = index.long()
        book = self.book.of_group(group_name)
        start = book.part_range(self.part)[0]
        owner = book.owner(index)
        mine = owner == self.part
        world = self.collectives.world_size
        # Each remote row once (pre-gathering: disjoint micrographs repeat
        # nodes), grouped by owner.
        remote, back_to = torch.unique(index[~mine], return_inverse=True)
        owners = book.owner(remote)
        started = time.perf_counter()
        direct, pending = None, None
        key = (group_name, attr_name)
        name = attr_label(key)  # what the counters are kept under
        if self.cold is not None and remote.numel():
            owned = remote - book.offsets[owners]  # rows in the owners
            direct = self.cold.split(key, owners, owned)
            if bool(direct.any()):  # read beside the exchange
                pending = self.cold.read(key, owners[direct], owned[direct])
            else:
                direct = None
        hot = remote if direct is None else remote[~direct]
        counts = torch.bincount(owners if direct is None else
                                owners[~direct], minlength=world).tolist()
        wanted = list(hot.split(counts))  # unique ids are owner-sorted
        if self.requests is None:
            back = self._exchange(key, wanted)
            remote_seconds = time.perf_counter() - started
            local = self._local(attr_name, index[mine] - start, group_name,
                                timings)
        else:
            self._served.setdefault(name, {'cache': 0.0, 'storage': 0.0})
            asked = self._request(key, wanted)
            remote_seconds = time.perf_counter() - started
            local = self._local(attr_name, index[mine] - start, group_name,
                                timings)
            started = time.perf_counter()
            back = [self._answer(ids, answer) for ids, answer in asked]
            remote_seconds += time.perf_counter() - started
        shape = (index.numel(), *local.shape[1:])
        if out is None:
            out = local.new_empty(shape)
        out[mine] = local
        if not bool(mine.all()):
            rows = torch.cat(back) if back else \
                local.new_empty((0, *local.shape[1:]))
            _count(self._remote, name, rows)  # all served by owners
            if pending is not None:
                cold = pending.result()
                _count(self._direct, name, cold)
                both = rows.new_empty((remote.numel(), *rows.shape[1:]))
                both[~direct] = rows
                both[direct] = cold.to(rows.dtype)
                rows = both
            out[~mine] = rows[back_to].to(out.device)
        if timings is not None:
            timings['remote'] = timings.get('remote', 0.0) + remote_seconds
        return out

    def _local(self, attr_name: str, rows: Tensor,
               group_name: Optional[str],
               timings: Optional[Dict[str, float]] = None) -> Tensor:
        r"""This part's :obj:`rows` of an attribute, from its tiers."""
        with self._lock:
            return self.local.gather(attr_name, rows, group_name,
                                     timings=timings)

    def _serve(self, key: Tuple[Optional[str], str], ids: Tensor) -> Tensor:
        r"""Rows :obj:`ids` (this part's) of attribute :obj:`key` for
        another rank, counted as served (cache or storage)."""
        start = self.part_range(key[0])[0]
        with self._lock:
            before = self._tier_rows(key)
            rows = self.local.gather(key[1], ids - start, key[0])
            cached, stored = (a - b for a, b in zip(self._tier_rows(key),
                                                    before))
            entry = self._served.setdefault(attr_label(key),
                                            {'cache': 0.0, 'storage': 0.0})
            entry['cache'] += cached
            entry['storage'] += stored
        return rows

    def _exchange(self, key: Tuple[Optional[str], str],
                  wanted: List[Tensor]) -> List[Tensor]:
        r"""Every owner's rows of :obj:`wanted` (ids per owner), through
        two collectives: ids out, rows back (this rank serves the others'
        between them)."""
        name = attr_label(key)
        asked = self.collectives.exchange(wanted, 'features',
                                          f"request '{name}' ids")
        served = [self._serve(key, ids) for ids in asked]
        return self.collectives.exchange(served, 'features',
                                         f"send '{name}' rows")

    def _request(self, key: Tuple[Optional[str], str],
                 wanted: List[Tensor]) -> List[Tuple[Tensor, Pending]]:
        r"""Asks each owner of :obj:`wanted` (ids per owner) for its rows,
        at this batch and the rows' bytes as the cost."""
        requests, name = self.requests, attr_label(key)
        row = self.local.dtype_of(key[1], key[0]).itemsize * _width(
            self.local.get_tensor_size(TensorAttr(group_name=key[0], attr_name=key[1])))
        return [(ids, requests.request(
            owner, self._ops[key], ids, f"rows '{name}'", self._batch,
            ids.numel() * row)) for owner, ids in enumerate(wanted)
            if ids.numel()]

    def _answer(self, ids: Tensor, pending: Pending) -> Tensor:
        r"""An owner's answer to :meth:`_request`, counted as traffic."""
        rows = pending.result()
        self.collectives.counters.add(
            'features', sent=ids.numel() * ids.element_size(),
            received=rows.numel() * rows.element_size(), messages=1)
        return rows

    def _counted(self, rows: Tensor, ids: Tensor) -> Tensor:
        r"""This owner's answer :obj:`rows` to a request for :obj:`ids`,
        counted as traffic."""
        self.collectives.counters.add(
            'features', sent=rows.numel() * rows.element_size(),
            received=ids.numel() * ids.element_size(), messages=1)
        return rows

    def close(self) -> None:
        r"""Stops the cold-row reader's thread, if any."""
        if self.cold is not None:
            self.cold.close()

    def _tier_rows(self, key: Tuple[Optional[str], str]
                   ) -> Tuple[float, float]:
        return cached_and_stored(
            self.local.stats(key[1]).get(attr_label(key), {}))

    # The FeatureStore contract ##############################################

    def _put_tensor(self, tensor: Tensor, attr: TensorAttr) -> bool:
        raise NotImplementedError('a partitioned store is read-only')

    def _remove_tensor(self, attr: TensorAttr) -> bool:
        raise NotImplementedError('a partitioned store is read-only')

    def _get_tensor(self, attr: TensorAttr) -> Optional[Tensor]:
        if attr.index is None or isinstance(attr.index, slice):
            raise ValueError(f"'{attr.attr_name}': a partitioned store "
                             f"serves rows by id (pass an index)")
        return self.gather(attr.attr_name, torch.as_tensor(attr.index),
                           attr.group_name)

    def _get_tensor_size(self, attr: TensorAttr) -> Optional[Tuple]:
        size = self.local.get_tensor_size(attr)
        return None if size is None else (
            self.book.of_group(attr.group_name).num_nodes, *size[1:])

    def get_all_tensor_attrs(self) -> List[TensorAttr]:
        return self.local.get_all_tensor_attrs()


def _width(size: Optional[Tuple]) -> int:
    r"""Values per row of an attribute of :obj:`size`."""
    width = 1
    for dim in (size or (0, ))[1:]:
        width *= dim
    return width


def _count(into: Dict[str, Dict[str, float]], attr_name: str,
           rows: Tensor) -> None:
    r"""Adds :obj:`rows` (all served) to a remote tier's counters."""
    entry = into.setdefault(attr_name,
                            {'requests': 0.0, 'hits': 0.0, 'bytes': 0.0})
    entry['requests'] += rows.size(0)
    entry['hits'] += rows.size(0)
    entry['bytes'] += rows.numel() * rows.element_size()
