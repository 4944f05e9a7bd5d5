r"""Loaders: sampler plus feature join, yielding PyG mini-batches."""
from .neighbor_loader import FastNeighborLoader

__all__ = ['FastNeighborLoader']
