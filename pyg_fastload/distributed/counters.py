r"""Bytes and messages each rank sends and receives, per kind of traffic
(``'sampling'``, ``'features'``, ``'gradients'``, ``'control'``; and
``'sampling_pull'``: not traffic, but what pulling the remote frontier
nodes' adjacency lists would have moved instead of collective sampling),
and the DDP communication hook that counts gradient buckets."""
from __future__ import annotations

import threading
from typing import Any, Dict

from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import (
    allreduce_hook,
)

__all__ = ['TrafficCounters', 'KINDS', 'counting_allreduce_hook']

#: The kinds of traffic counted.
KINDS = ('sampling', 'features', 'gradients', 'control', 'sampling_pull')


class TrafficCounters:
    r"""Per kind: ``bytes_sent``, ``bytes_received`` and ``messages`` (sends
    to another rank). Thread-safe; :meth:`snapshot` returns plain numbers.

    Example:
        >>> from pyg_fastload.distributed import TrafficCounters
        >>> counters = TrafficCounters()
        >>> counters.add('sampling', sent=100, received=40, messages=1)
        >>> counters.total_bytes('sampling'), counters.snapshot()['features']
        (140, {'bytes_sent': 0, 'bytes_received': 0, 'messages': 0})
    """
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self._counts: Dict[str, Dict[str, int]] = {
                kind: {'bytes_sent': 0, 'bytes_received': 0, 'messages': 0}
                for kind in KINDS}

    def add(self, kind: str, sent: int = 0, received: int = 0,
            messages: int = 0) -> None:
        if kind not in self._counts:
            raise ValueError(f"traffic kind {kind!r} is not one of "
                             f"{', '.join(KINDS)}")
        with self._lock:
            entry = self._counts[kind]
            entry['bytes_sent'] += sent
            entry['bytes_received'] += received
            entry['messages'] += messages

    def snapshot(self) -> Dict[str, Dict[str, int]]:
        with self._lock:
            return {kind: dict(entry) for kind, entry in self._counts.items()}

    def total_bytes(self, kind: str) -> int:
        r"""Bytes sent plus received of one kind."""
        entry = self.snapshot()[kind]
        return entry['bytes_sent'] + entry['bytes_received']


def counting_allreduce_hook(counters: TrafficCounters, world_size: int
                            ) -> Any:
    r"""A DDP communication hook (``model.register_comm_hook(None, hook)``)
    that all-reduces each gradient bucket as DDP's default does and counts
    it: a ring all-reduce sends and receives ``2 (W - 1) / W`` times the
    bucket's bytes per rank, in ``2 (W - 1)`` messages.

    Args:
        counters (TrafficCounters): where the traffic is counted (kind
            ``'gradients'``).
        world_size (int): ranks in the all-reduce.
    """
    # No annotations: DDP compares them with dist.GradBucket at runtime, and
    # this module's are strings (postponed evaluation).
    def hook(state, bucket):  # type: ignore[no-untyped-def]
        tensor = bucket.buffer()
        size = tensor.numel() * tensor.element_size()
        moved = 2 * (world_size - 1) * size // max(world_size, 1)
        counters.add('gradients', sent=moved, received=moved,
                     messages=2 * (world_size - 1))
        return allreduce_hook(state, bucket)

    return hook
