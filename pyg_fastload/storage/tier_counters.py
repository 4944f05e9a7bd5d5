r"""Per-tier access counters."""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Dict, Tuple

__all__ = ['TierCounters', 'cached_and_stored']


@dataclass
class TierCounters:
    r"""What one tier did since the last :meth:`reset`.

    Attributes:
        requests (int): rows asked of this tier (misses of the faster tiers).
        hits (int): rows this tier served.
        bytes (int): bytes of the rows it served.
        pages (int): storage pages read (disk tier only, 4 KiB each).
        disk_bytes (int): bytes the disk delivered (storage tier only):
            the blocks of direct reads, or for memory-mapped rows the
            process's measured reads (``/proc/self/io``) while gathering,
            which page-cache hits do not add to.
    """
    requests: int = 0
    hits: int = 0
    bytes: int = 0
    pages: int = 0
    disk_bytes: int = 0

    @property
    def hit_ratio(self) -> float:
        return self.hits / self.requests if self.requests else 0.0

    def add(self, requests: int, hits: int, row_bytes: int,
            pages: int = 0) -> None:
        self.requests += requests
        self.hits += hits
        self.bytes += hits * row_bytes
        self.pages += pages

    def reset(self) -> None:
        self.requests = self.hits = self.bytes = self.pages = 0
        self.disk_bytes = 0

    def as_dict(self) -> Dict[str, float]:
        return {**asdict(self), 'hit_ratio': self.hit_ratio}


def cached_and_stored(tiers: Dict[str, Dict[str, float]]
                      ) -> Tuple[float, float]:
    r"""``(rows the caches served, rows asked of storage)`` from one
    attribute's ``stats()`` entry (tier name to counters; storage
    includes other parts' files read directly, ``'remote_disk'``);
    together, every row requested (storage may read a repeated row
    once).

    Args:
        tiers (Dict[str, Dict[str, float]]): one attribute's ``stats()``
            entry.
    """
    cached = sum(tiers[t]['hits'] for t in ('device', 'host') if t in tiers)
    return cached, (tiers.get('storage', {}).get('requests', 0.0)
                    + tiers.get('remote_disk', {}).get('hits', 0.0))
