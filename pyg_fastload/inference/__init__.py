r"""Inference for every node: layer-wise, one layer at a time over every
in-neighbour (or a fan-out), each layer's outputs in memory or in a file by
size (:func:`layerwise_inference`); predictions written out
(:func:`write_predictions`, :func:`read_predictions`; a heterogeneous link
predictor's embeddings, one table per node type:
:func:`write_embedding_tables`)."""
from .layerwise import layerwise_inference
from .layers import ModelLayers, model_layers
from .link_scores import encoder_embeddings, load_pairs, score_pairs
from .prediction_files import (read_predictions, write_embedding_tables,
                               write_predictions)
from .whole_graph import InferenceOptions, WholeGraph, WholeGraphLoader

__all__ = ['layerwise_inference', 'model_layers', 'ModelLayers',
           'read_predictions', 'write_predictions', 'WholeGraph',
           'WholeGraphLoader', 'encoder_embeddings', 'score_pairs',
           'load_pairs', 'write_embedding_tables', 'InferenceOptions']
