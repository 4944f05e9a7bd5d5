r"""Inference for every node: layer-wise, one layer at a time over every
in-neighbour (or a fan-out), each layer's outputs in memory or in a file by
size (:func:`layerwise_inference`)."""
from .layerwise import layerwise_inference
from .layers import ModelLayers, model_layers

__all__ = ['layerwise_inference', 'model_layers', 'ModelLayers']
