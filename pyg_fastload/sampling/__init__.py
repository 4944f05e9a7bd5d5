r"""Samplers: node-wise (homogeneous and heterogeneous), weighted, disjoint
and layer-wise, all vectorized and plugged into PyG through the
``BaseSampler`` contract."""
from .hetero_sampler import HeteroNeighborSampler
from .layer_sampler import LayerWiseSampler
from .neighbor_sampler import FastNeighborSampler, HopSampler

__all__ = ['FastNeighborSampler', 'HeteroNeighborSampler', 'HopSampler',
           'LayerWiseSampler']
