r"""Samplers: node-wise (homogeneous and heterogeneous), weighted, disjoint,
layer-wise, layer-neighbour (LABOR) and random walks, all vectorized and
plugged into PyG through the ``BaseSampler`` contract;
:mod:`~pyg_fastload.sampling.seam` chooses one by name."""
from .hetero_sampler import HeteroNeighborSampler
from .labor import LaborSampler
from .layer_sampler import LayerWiseSampler
from .neighbor_sampler import FastNeighborSampler, HopSampler
from .random_walk import RandomWalkSampler
from .seam import SAMPLERS, GraphSampler, SamplerChoice

__all__ = ['FastNeighborSampler', 'HeteroNeighborSampler', 'HopSampler',
           'LaborSampler', 'LayerWiseSampler', 'RandomWalkSampler',
           'SAMPLERS', 'GraphSampler', 'SamplerChoice']
