r"""Lightning integration for pyg-fastload: the data module, the node
classifier, the link predictor and the callbacks behind ``pyg-fastload
fit``. Imported as ``pyg_fastload.lightning``; its source folder is
``lightning_modules/``, the old import name, which :mod:`.old_name` keeps
working."""
import importlib
import sys
import warnings

if __name__ == 'lightning_modules':  # a checkout's folder, by its old name
    warnings.warn("'lightning_modules' was renamed: import "
                  "'pyg_fastload.lightning'", DeprecationWarning,
                  stacklevel=2)
    sys.modules[__name__] = importlib.import_module('pyg_fastload.lightning')
from pyg_fastload.lazy import lazy_exports

from .old_name import install

install()

#: Each exported name's module: they import on first use (PEP 562), so
#: ``pyg_fastload.lightning.command`` starts without torch.
_EXPORTS = {
    'FastLoadDataModule': '.datamodule',
    'FeatureCache': '.datamodule',
    'PipelineSettings': '.datamodule',
    'EvalSettings': '.datamodule',
    'NodeClassifier': '.node_classifier',
    'MODELS': '.node_classifier',
    'LinkPredictor': '.link_predictor',
    'LinkOptions': '.datamodule',
    'ENCODERS': '.link_predictor',
    'LoaderMonitor': '.callbacks',
    'PredictionWriter': '.prediction_writer',
    'DistributedMonitor': '.dist_monitor',
    'make_report': '.report',
    'ConfigError': '.errors',
    'config_section': '.errors',
}

__all__ = [
    'FastLoadDataModule',
    'FeatureCache',
    'PipelineSettings',
    'EvalSettings',
    'NodeClassifier',
    'MODELS',
    'LinkPredictor',
    'LinkOptions',
    'ENCODERS',
    'LoaderMonitor',
    'PredictionWriter',
    'DistributedMonitor',
    'make_report',
    'ConfigError',
    'config_section',
]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
