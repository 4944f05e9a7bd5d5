r"""Lightning integration for pyg-fastload: the data module, the node
classifier and the callbacks behind ``pyg-fastload fit``."""
from .callbacks import LoaderMonitor
from .datamodule import FastLoadDataModule, FeatureCache
from .dist_monitor import DistributedMonitor
from .errors import ConfigError, config_section
from .node_classifier import MODELS, NodeClassifier
from .report import make_report

__all__ = [
    'FastLoadDataModule',
    'FeatureCache',
    'NodeClassifier',
    'MODELS',
    'LoaderMonitor',
    'DistributedMonitor',
    'make_report',
    'ConfigError',
    'config_section',
]
