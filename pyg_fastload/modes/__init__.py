r"""Loading modes as library objects: one validated :class:`LoadingSpec`, a
:class:`DatasetSource`, and one class per way of sharing the graph across
ranks (:class:`Replicated`, :class:`PaGraph`, :class:`DSP`,
:class:`HopGNN`), each opening this rank's stores and samplers and making
the loader of a split. A new mode is one new class in :data:`MODES`."""
from typing import Dict, Type

from .base import LoadingMode
from .hetero import HeteroSchema, hetero_schema
from .partitioned import DSP, HopGNN, LossNorm, PaGraph
from .replicated import Replicated
from .source import DatasetSource, directory_metadata, split_seeds
from .spec import LoadingSpec, ModeOptions, feature_cache_from

#: Every mode by the name configs use.
MODES: Dict[str, Type[LoadingMode]] = {
    mode.name: mode for mode in (Replicated, PaGraph, DSP, HopGNN)}

__all__ = ['MODES', 'LoadingMode', 'LoadingSpec', 'ModeOptions',
           'DatasetSource', 'Replicated', 'PaGraph', 'DSP', 'HopGNN',
           'LossNorm', 'HeteroSchema', 'directory_metadata',
           'feature_cache_from', 'hetero_schema', 'split_seeds']
