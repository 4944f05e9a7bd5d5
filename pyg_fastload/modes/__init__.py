r"""Loading modes as library objects: one validated :class:`LoadingSpec`, a
:class:`DatasetSource` (one class per kind of dataset), a :class:`Task`
(node or link batches, in :data:`TASKS`) and one class per way of sharing
the graph across ranks (:class:`Replicated`, :class:`PaGraph`, :class:`DSP`,
:class:`HopGNN`), each opening this rank's stores and samplers; the task
makes the loader of a split. A new mode is one new class in :data:`MODES`,
a new task one in :data:`TASKS` and its name in
:data:`~pyg_fastload.modes.spec.TASK_NAMES`."""
from typing import Dict, Type

from .base import TASKS, LinkTask, LoadingMode, NodeTask, Task
from .schema import HeteroSchema, hetero_schema
from .partitioned import DSP, HopGNN, LossNorm, PaGraph
from .replicated import Replicated
from .link_split import LinkOptions, LinkSplit
from .source import (DatasetSource, DirectorySource, GraphSource,
                     HeteroDirectorySource, HeteroGraphSource, PresetSource,
                     directory_metadata, split_seeds)
from .spec import (EVAL_ALIASES, EvalSettings, LoadingSpec, ModeOptions,
                   feature_cache_from)

#: Every mode by the name configs use.
MODES: Dict[str, Type[LoadingMode]] = {
    mode.name: mode for mode in (Replicated, PaGraph, DSP, HopGNN)}

__all__ = ['MODES', 'TASKS', 'LoadingMode', 'LoadingSpec', 'ModeOptions',
           'EvalSettings', 'EVAL_ALIASES',
           'DatasetSource', 'PresetSource', 'GraphSource',
           'HeteroGraphSource', 'DirectorySource', 'HeteroDirectorySource',
           'Task', 'NodeTask', 'LinkTask', 'LinkOptions', 'LinkSplit',
           'Replicated', 'PaGraph', 'DSP', 'HopGNN', 'LossNorm',
           'HeteroSchema', 'directory_metadata', 'feature_cache_from',
           'hetero_schema', 'split_seeds']
