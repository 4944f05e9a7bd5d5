r"""Samplers: node-wise, weighted, disjoint and layer-wise, all vectorized and
plugged into PyG through the ``BaseSampler`` contract."""
from .layer_sampler import LayerWiseSampler
from .neighbor_sampler import FastNeighborSampler, HopSampler

__all__ = ['FastNeighborSampler', 'HopSampler', 'LayerWiseSampler']
