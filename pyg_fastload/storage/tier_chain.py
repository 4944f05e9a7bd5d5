r"""One attribute's chain of tiers: the storage (or links put around it)
and the caches a store composes in front of it."""
from __future__ import annotations

from typing import Dict, Iterator, List, Optional

from .cache_tier import CacheTier
from .tier import StorageTier, Tier

__all__ = ['TierChain']


class TierChain:
    r"""The tiers of one attribute, fastest first.

    :attr:`base` is what the attribute was registered with: a storage, or
    links around one (``TieredFeatureStore.put_tier``). The store puts its
    caches in front of it (``TieredFeatureStore.fill_caches``) and reads
    through :attr:`top`, the first link.

    Args:
        base (Tier): a chain whose last link is a storage.
    """
    def __init__(self, base: Tier):
        *_, storage = base.links()
        if not isinstance(storage, StorageTier):
            raise TypeError(f"a chain of tiers ends in a storage (a "
                            f"StorageTier, which holds every row); this one "
                            f"ends in {type(storage).__name__}")
        self.base = base
        self.top = base
        self.storage: StorageTier = storage

    def links(self) -> Iterator[Tier]:
        r"""Every link, fastest first."""
        return self.top.links()

    def caches(self) -> List[CacheTier]:
        r"""The caches the store put in front of :attr:`base`."""
        out: List[CacheTier] = []
        for link in self.links():
            if link is self.base:
                break
            out.append(link)  # type: ignore[arg-type]
        return out

    def tier(self, name: str) -> Optional[Tier]:
        r"""The link counted as :obj:`name` in ``stats()``, if any."""
        return next((link for link in self.links() if link.name == name),
                    None)

    @property
    def device(self) -> Optional[Tier]:
        r"""The device cache, if any."""
        return self.tier('device')

    @property
    def host(self) -> Optional[Tier]:
        r"""The host buffer, if any."""
        return self.tier('host')

    def stats(self) -> Dict[str, Dict[str, float]]:
        r"""Per link: its counters."""
        return {link.name: link.counters.as_dict() for link in self.links()}

    def places(self) -> Dict[str, str]:
        r"""Per link: where its rows live or come from, in words."""
        return {link.name: link.place for link in self.links()}
