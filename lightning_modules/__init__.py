r"""Lightning integration for pyg-fastload: the data module, the node
classifier, the link predictor and the callbacks behind ``pyg-fastload fit``. Imported as
``pyg_fastload.lightning``; its source folder is ``lightning_modules/``,
the old import name, which :mod:`.old_name` keeps working."""
import sys

if __name__ == 'lightning_modules':  # a checkout's folder, by its old name
    import importlib
    import warnings
    warnings.warn("'lightning_modules' was renamed: import "
                  "'pyg_fastload.lightning'", DeprecationWarning,
                  stacklevel=2)
    sys.modules[__name__] = importlib.import_module('pyg_fastload.lightning')
from .callbacks import LoaderMonitor
from .datamodule import FastLoadDataModule, FeatureCache, LinkOptions
from .dist_monitor import DistributedMonitor
from .errors import ConfigError, config_section
from .link_predictor import ENCODERS, LinkPredictor
from .node_classifier import MODELS, NodeClassifier
from .old_name import install
from .report import make_report

install()

__all__ = [
    'FastLoadDataModule',
    'FeatureCache',
    'NodeClassifier',
    'MODELS',
    'LinkPredictor',
    'LinkOptions',
    'ENCODERS',
    'LoaderMonitor',
    'DistributedMonitor',
    'make_report',
    'ConfigError',
    'config_section',
]
