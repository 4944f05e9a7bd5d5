r"""Lightning integration for pyg-fastload: the data module, the node
classifier and the callbacks behind ``pyg-fastload fit``."""
from .datamodule import FastLoadDataModule, FeatureCache
from .errors import ConfigError, config_section
from .node_classifier import MODELS, NodeClassifier

__all__ = [
    'FastLoadDataModule',
    'FeatureCache',
    'NodeClassifier',
    'MODELS',
    'ConfigError',
    'config_section',
]
