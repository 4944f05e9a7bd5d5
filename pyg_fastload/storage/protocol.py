r"""What the loader needs of a feature source: a typed protocol that the
tiered store implements and that a partitioned or remote store will too.
The loader and the callbacks depend on this protocol only."""
from __future__ import annotations

from typing import Dict, Optional, Protocol, Union, runtime_checkable

import torch
from torch import Tensor

__all__ = ['FeatureSource', 'TierStats', 'TierPlaces', 'BatchIds',
           'of_group']

#: Per attribute, per tier (``'device'``, ``'host'``, ``'storage'``, ...):
#: counters such as ``requests``, ``hits``, ``bytes``, ``hit_ratio``.
TierStats = Dict[str, Dict[str, Dict[str, float]]]
#: Per attribute, per tier: where the tier's rows live, in words.
TierPlaces = Dict[str, Dict[str, str]]
#: A batch's node ids: one tensor, or one per node type (group).
BatchIds = Union[Tensor, Dict[str, Tensor]]
_NONE = torch.empty(0, dtype=torch.long)


def of_group(batch: BatchIds, group: Optional[str]) -> Tensor:
    r"""The ids of :obj:`batch` that rows of :obj:`group` are read for
    (none for a node type the batch lacks), on the CPU, where the look-ahead
    bookkeeping lives (a sampler on a GPU hands its ids over here)."""
    if isinstance(batch, dict):
        return batch.get(group, _NONE).cpu()
    return batch.cpu()


@runtime_checkable
class FeatureSource(Protocol):
    r"""A source of node feature rows for
    :class:`~pyg_fastload.FastNeighborLoader`.

    The loader announces each sampled batch's node ids when the batch
    enters its look-ahead window (:meth:`announce`), retires them when it
    fetches the batch's rows (:meth:`retire`, in the same order), and reads
    rows with :meth:`gather`. :attr:`lookahead_depth` says how many batches
    ahead it should sample; :meth:`stats` reports per-tier counters;
    :meth:`first_step_done` marks the end of the consumer's first step.
    """
    device: torch.device

    @property
    def lookahead_depth(self) -> int:
        r"""Batches the loader should sample ahead (0: none)."""

    def gather(self, attr_name: str, index: Tensor,
               group_name: Optional[str] = None,
               out: Optional[Tensor] = None,
               timings: Optional[Dict[str, float]] = None) -> Tensor:
        r"""Rows :obj:`index` of an attribute, written into :obj:`out` if
        given; seconds per tier are added to :obj:`timings` if given."""

    def dtype_of(self, attr_name: str,
                 group_name: Optional[str] = None) -> torch.dtype:
        r"""The element type of an attribute."""

    def announce(self, ids: BatchIds) -> None:
        r"""A sampled batch needing node :obj:`ids` (per node type for a
        heterogeneous batch) entered the window."""

    def retire(self, ids: BatchIds) -> None:
        r"""The batch announced with :obj:`ids` is being fetched."""

    def stats(self) -> TierStats:
        r"""Per attribute and tier: requests, hits, bytes, hit ratio."""

    def places(self) -> TierPlaces:
        r"""Per attribute and tier (the keys of :meth:`stats`): where
        that tier's rows live or come from, in words (``'CPU memory'``,
        ``'file, memory-mapped'``, ...), for run summaries and plots."""

    def first_step_done(self) -> None:
        r"""The consumer finished its first training step (the loader
        calls it when the second batch is asked for)."""
