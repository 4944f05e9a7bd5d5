r"""Loaders: sampler plus feature join, yielding PyG mini-batches."""
from .link_loader import FastLinkNeighborLoader
from .neighbor_loader import FastNeighborLoader
from .scheduler import RunAheadScheduler

__all__ = ['FastNeighborLoader', 'FastLinkNeighborLoader', 'RunAheadScheduler']
