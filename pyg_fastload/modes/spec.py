r"""One frozen, validated description of how a run loads its batches
(:class:`LoadingSpec`), with the partitioned modes' own options
(:class:`ModeOptions`). Every setting is checked here, once: a bad value
is a :class:`~pyg_fastload.config.SettingError` naming its key."""
from __future__ import annotations

import dataclasses
import importlib.util
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Literal, Optional

import torch
import torch_geometric.transforms as T

from ..caching import Scores, loader_scores
from ..config import (FeatureCache, PipelineSettings, SettingError,
                      check_fanouts, check_one_of, nested_setting)
from ..distributed.collectives import digest
from ..distributed.dsp import LAUNCH_ORDERS
from ..distributed.requests import REMOTE_MODES
from ..inference import InferenceOptions
from ..io.format import VERIFY_MODES
from ..placement import Placement, check_run_sampling, require_run_gpu
from ..sampling import SamplerChoice
from ..sampling.temporal import TEMPORAL_STRATEGIES
from ..storage import STORAGE_KINDS, storage_kind
from .link_split import LinkOptions

__all__ = ['LoadingSpec', 'ModeOptions', 'EvalSettings', 'EVAL_ALIASES',
           'feature_cache_from', 'RANK_LOCAL', 'EVAL_METHODS', 'TASK_NAMES']

#: Settings a rank may hold on its own (not compared across ranks).
RANK_LOCAL = ('progress', )
#: How validation, test and prediction compute their outputs: on sampled
#: neighbourhoods, or layer-wise over every in-neighbour of every node.
EVAL_METHODS = ('sampled', 'layerwise')

#: What a run may train (``task``): the names of the task classes in
#: :data:`~pyg_fastload.modes.TASKS`, which build on this spec; only
#: ``'link'`` takes the ``link`` options.
TASK_NAMES = ('node', 'link')


@dataclass(frozen=True)
class EvalSettings:
    r"""How validation, test and prediction compute: the data module's
    ``evaluation`` (config key ``data.evaluation``; in Python also the
    keywords of :data:`EVAL_ALIASES`). :obj:`None` takes the training
    value.

    Args:
        num_neighbors (List[int], optional): fan-out per hop (default:
            the training ``num_neighbors``).
        batch_size (int, optional): seeds per batch (label edges with task
            ``'link'``; default: the training ``batch_size``).
        method (str): how a node's output is computed, one of
            :data:`EVAL_METHODS`: ``'sampled'`` (on sampled
            neighbourhoods, with :obj:`num_neighbors`) or ``'layerwise'``:
            every layer for every node over all its in-neighbours
            (:func:`~pyg_fastload.layerwise_inference`), the full-batch
            forward's outputs; task ``'node'``, a :obj:`dataset` given.
        inference (InferenceOptions): how ``'layerwise'`` computes
            (:class:`~pyg_fastload.inference.InferenceOptions`: chunk size,
            memory budget, the directory of the layers over it, streamed
            aggregation), a dict of its fields in a config.

    Example:
        >>> from pyg_fastload.modes import EvalSettings
        >>> EvalSettings(batch_size=4096).filled([10, 5], 1024).num_neighbors
        [10, 5]
        >>> EvalSettings(method='layerwise',
        ...              inference={'chunk_size': 512}).inference.chunk_size
        512
    """
    num_neighbors: Optional[List[int]] = None
    batch_size: Optional[int] = None
    method: str = 'sampled'
    inference: InferenceOptions = field(default_factory=InferenceOptions)

    def __post_init__(self) -> None:
        if self.num_neighbors is not None:
            try:
                fanouts = check_fanouts(self.num_neighbors)
            except (TypeError, ValueError, NotImplementedError) as error:
                raise SettingError('evaluation.num_neighbors',
                                   str(error)) from None
            object.__setattr__(self, 'num_neighbors', fanouts)
        size = self.batch_size
        if size is not None and (isinstance(size, bool) or not isinstance(
                size, int) or size < 1):
            raise SettingError('evaluation.batch_size', f"{size!r} must be "
                               f"a positive int")
        check_one_of('evaluation.method', self.method, EVAL_METHODS)
        try:
            inference = nested_setting('inference', InferenceOptions,
                                       self.inference)
        except SettingError as error:
            raise SettingError(f'evaluation.{error.key}', error.detail) \
                from None
        object.__setattr__(self, 'inference', inference or InferenceOptions())

    def filled(self, num_neighbors: List[int],
               batch_size: int) -> EvalSettings:
        r"""These settings with the training :obj:`num_neighbors` and
        :obj:`batch_size` where they are :obj:`None`."""
        return dataclasses.replace(
            self, num_neighbors=num_neighbors if self.num_neighbors is None
            else self.num_neighbors,
            batch_size=batch_size if self.batch_size is None
            else self.batch_size)


#: The data module's Python keywords for :class:`EvalSettings` fields, by
#: field name: its former arguments, kept as aliases.
EVAL_ALIASES = {'eval_num_neighbors': 'num_neighbors',
                'eval_batch_size': 'batch_size', 'eval': 'method',
                'inference': 'inference'}



@dataclass(frozen=True)
class ModeOptions:
    r"""Options of the partitioned modes (``docs/guide/distributed.md``).

    Args:
        sampling (str): ``'dsp'``'s collective sampling: ``'node'``-wise
            fan-outs or ``'layer'``-wise (DSP Eq. 2: ``num_neighbors`` are
            layer sizes).
        seeds (str): where ``'dsp'`` ranks draw their seeds: their ``'own'``
            part's (DSP), or the ``'global'`` training set as in data
            parallelism (the model-centric baseline of HopGNN).
        merges (int): ``'hopgnn'``'s time steps merged away per iteration
            (0: one time step per rank).
        merge_search (bool): ``'hopgnn'`` chooses :obj:`merges` by HopGNN's
            examination period (one more merge per epoch while epochs get
            faster; the counts are in ``dist_stats.json``).
        cold_rows (str): how ``'dsp'`` and ``'hopgnn'`` fetch other parts'
            cold rows (in no cache of their owner): ``'auto'`` reads them
            from the owner's files where this rank reaches them (ranks on
            one machine), beside the exchange of the hot rows, as DSP reads
            them directly; ``'owner'`` asks the owner for every row.
        remote (str): how ``'dsp'`` and ``'hopgnn'`` fetch the rows other
            ranks send, and how ``'dsp'`` sends its frontiers to their
            owners to be sampled: ``'async'`` requests to the owners, sent
            at once and served between the owners' own batches (ByteGNN;
            each frontier request drawn from a generator of its own), or
            ``'sync'`` collectives, every rank in lockstep. Temporal and
            layer-wise hops stay collective. The batches are the same.
        launch_order (str): how ``'dsp'`` keeps its pipelined stages'
            collectives apart: a process group each (``'groups'``), or one
            group with DSP's leader-ordered launch (``'coordinator'``).
    """
    sampling: Literal['node', 'layer'] = 'node'
    seeds: Literal['own', 'global'] = 'own'
    merges: int = 0
    merge_search: bool = False
    cold_rows: Literal['auto', 'owner'] = 'auto'
    remote: Literal['async', 'sync'] = 'async'
    launch_order: Literal['groups', 'coordinator'] = 'groups'

    def __post_init__(self) -> None:
        for key, value, allowed in (('sampling', self.sampling,
                                     ('node', 'layer')),
                                    ('seeds', self.seeds, ('own', 'global')),
                                    ('cold_rows', self.cold_rows,
                                     ('auto', 'owner')),
                                    ('remote', self.remote, REMOTE_MODES),
                                    ('launch_order', self.launch_order,
                                     LAUNCH_ORDERS)):
            check_one_of(f'mode_options.{key}', value, allowed)
        if isinstance(self.merges, bool) or not isinstance(
                self.merges, int) or self.merges < 0:
            raise SettingError('mode_options.merges', f"{self.merges!r} must "
                               f"be an int >= 0 (below the world size)")
        if not isinstance(self.merge_search, bool):
            raise SettingError('mode_options.merge_search',
                               f"{self.merge_search!r} must be true or false")


def feature_cache_from(cache: Any) -> Optional[FeatureCache]:
    r"""A :class:`FeatureCache` from one or a dict of its fields, its
    ``storage`` a kind of :data:`~pyg_fastload.storage.STORAGE_KINDS`.

    Args:
        cache: :obj:`None`, a :class:`FeatureCache` or a dict of its
            fields.
    """
    cache = nested_setting('feature_cache', FeatureCache, cache)
    if cache is not None:
        storage_kind(cache.storage, 'feature_cache.storage')
    return cache


@contextmanager
def _in_settings() -> Iterator[None]:
    r"""A run-level check of a :class:`PipelineSettings` field: its error
    named by its config key, ``pipeline_settings.<field>``."""
    try:
        yield
    except SettingError as error:
        raise SettingError(f'pipeline_settings.{error.key}',
                           error.detail) from None


def _positive_int(key: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SettingError(key, f"{value!r} must be a positive int")
    return value


def _fanouts(key: str, value: Any) -> List[int]:
    try:
        return check_fanouts(value)
    except (TypeError, ValueError, NotImplementedError) as error:
        raise SettingError(key, str(error)) from None


@dataclass(frozen=True)
class LoadingSpec:
    r"""How a run samples and loads its batches, on every rank and in every
    mode. Built once (checked in :meth:`__post_init__`, which also fills
    the evaluation defaults and accepts dicts for the nested settings);
    the modes, openers and loaders read it, never their own copies of its
    fields. Each field is the data module's option of the same name
    (:class:`~pyg_fastload.lightning.FastLoadDataModule`,
    ``docs/guide/configuration.md``).

    Attributes:
        num_neighbors (List[int]): training fan-out per hop.
        batch_size (int): seeds per training batch (positive label edges
            with task ``'link'``).
        evaluation (EvalSettings): evaluation fan-outs, batch size (filled
            with the training values), method and inference options.
        feature_cache (FeatureCache, optional): the feature caches.
        pipeline_settings (PipelineSettings): the loaders' pipeline; its
            ``sampling_device`` is ``'cpu'`` unless given.
        num_workers (int): PyG worker processes (0: pyg_fastload's
            threads).
        drop_last (bool): drop the last incomplete training batch.
        adjacency (str): ``'edge_index'`` or ``'sparse'`` (a torch_sparse
            ``adj_t``).
        seed (int): seed of the loaders' random streams.
        progress (bool): progress bars (the one field ranks may differ in).
        verify (str): how dataset files are checked when opened, one of
            ``'none'``, ``'size'``, ``'checksum'``.
        mode_options (ModeOptions): the partitioned modes' settings.
        dist_timeout (float): seconds a collective may take.
        task (str): ``'node'`` or ``'link'``
            (:data:`~pyg_fastload.modes.TASKS`).
        link (LinkOptions, optional): the link task's options (task
            ``'link'`` only; its defaults there).
        time_attr (str, optional): temporal sampling: the node array
            holding one time per node (task ``'link'``: the edge array
            holding one time per edge).
        temporal_strategy (str): ``'uniform'`` or ``'last'``.
        sampler: the sampler drawing every batch (a name of
            :data:`~pyg_fastload.sampling.SAMPLERS` or ``{class_path,
            init_args}``), kept as a
            :class:`~pyg_fastload.sampling.SamplerChoice`.

    Example:
        >>> from pyg_fastload.modes import LoadingSpec
        >>> spec = LoadingSpec(num_neighbors=[5, 5], batch_size=64,
        ...                    evaluation={'batch_size': 128})
        >>> spec.evaluation.num_neighbors, spec.evaluation.batch_size
        ([5, 5], 128)
    """
    num_neighbors: List[int] = field(default_factory=lambda: [15, 10, 5])
    batch_size: int = 1024
    evaluation: EvalSettings = field(default_factory=EvalSettings)
    feature_cache: Optional[FeatureCache] = None
    pipeline_settings: PipelineSettings = field(
        default_factory=PipelineSettings)
    num_workers: int = 0
    drop_last: bool = False
    adjacency: str = 'edge_index'
    seed: int = 0
    progress: bool = True
    verify: str = 'size'
    mode_options: ModeOptions = field(default_factory=ModeOptions)
    dist_timeout: float = 300.0
    task: str = 'node'
    link: Optional[LinkOptions] = None
    time_attr: Optional[str] = None
    temporal_strategy: str = 'uniform'
    sampler: Any = None

    def __post_init__(self) -> None:
        put = object.__setattr__  # frozen: normalised once, here
        put(self, 'num_neighbors', _fanouts('num_neighbors',
                                            self.num_neighbors))
        _positive_int('batch_size', self.batch_size)
        evaluation = nested_setting('evaluation', EvalSettings,
                                    self.evaluation) or EvalSettings()
        put(self, 'evaluation', evaluation.filled(self.num_neighbors,
                                                  self.batch_size))
        settings = PipelineSettings.of(self.pipeline_settings)
        put(self, 'pipeline_settings', settings if settings.sampling_device
            else dataclasses.replace(settings, sampling_device='cpu'))
        if isinstance(self.num_workers, bool) or not isinstance(
                self.num_workers, int) or self.num_workers < 0:
            raise SettingError('num_workers', f"{self.num_workers!r} must be "
                               f"an int >= 0")
        with _in_settings():
            check_run_sampling(self.pipeline_settings.sampling_device,
                               self.num_workers)
        put(self, 'feature_cache', feature_cache_from(self.feature_cache))
        if self.adjacency not in ('edge_index', 'sparse'):
            raise SettingError('adjacency', f"{self.adjacency!r} must be "
                               f"'edge_index' or 'sparse'")
        if self.adjacency == 'sparse' and \
                importlib.util.find_spec('torch_sparse') is None:
            raise SettingError('adjacency', "'sparse' needs torch_sparse "
                               "(pip install --no-build-isolation "
                               "torch_scatter torch_sparse); or use "
                               "'edge_index'")
        check_one_of('verify', self.verify, VERIFY_MODES)
        put(self, 'mode_options', nested_setting(
            'mode_options', ModeOptions, self.mode_options) or ModeOptions())
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise SettingError('seed', f"{self.seed!r} must be an int")
        for key in ('drop_last', 'progress'):
            if not isinstance(getattr(self, key), bool):
                raise SettingError(key, f"{getattr(self, key)!r} must be "
                                   f"true or false")
        if isinstance(self.dist_timeout, bool) or not isinstance(
                self.dist_timeout, (int, float)) or self.dist_timeout <= 0:
            raise SettingError('dist_timeout', f'{self.dist_timeout!r} must '
                               f'be a positive number of seconds')
        put(self, 'dist_timeout', float(self.dist_timeout))
        check_one_of('task', self.task, TASK_NAMES)
        if self.time_attr is not None and (
                not isinstance(self.time_attr, str) or not self.time_attr):
            raise SettingError('time_attr', f"{self.time_attr!r} must name "
                               f"a node array of the dataset (e.g. 'time'; "
                               f"with task 'link', an edge array)")
        check_one_of('temporal_strategy', self.temporal_strategy,
                     TEMPORAL_STRATEGIES)
        if self.temporal_strategy == 'last' and self.time_attr is None:
            raise SettingError('temporal_strategy', "'last' draws the most "
                               "recent neighbours and needs times: set "
                               "time_attr (a node array of the dataset; an "
                               "edge array with task 'link'), or use "
                               "'uniform'")
        if self.task == 'link':
            put(self, 'link', nested_setting('link', LinkOptions, self.link)
                or LinkOptions())
        elif self.link is not None:
            raise SettingError('link', f"options of task 'link', not of "
                               f"task {self.task!r}: set task: link, or "
                               f"leave 'link' out ('link' options need "
                               f"task: link)")
        try:
            put(self, 'sampler', SamplerChoice.of(self.sampler, 'sampler'))
        except ValueError as error:
            raise SettingError('sampler', str(error)) from None

    def digests(self) -> Dict[str, int]:
        r"""A 63-bit digest of every setting the ranks of a run must share
        (all but ``progress``), by name: ranks compare them at start-up."""
        return {name: digest(repr(getattr(self, name)))
                for name in sorted(self.__dataclass_fields__)
                if name not in RANK_LOCAL}

    def placement(self, device: torch.device) -> Placement:
        r"""The run's :class:`~pyg_fastload.placement.Placement` on the
        trainer's :obj:`device` (Lightning's ``root_device``); refuses
        ``sampling_device='cuda'`` and a storage kind reading into GPU
        memory (``'gds'``) on a run whose device is not CUDA, naming the
        setting and the fix."""
        with _in_settings():
            placement = Placement.of_run(
                device, self.pipeline_settings.sampling_device,
                self.num_workers)
        cache = self.feature_cache
        if cache is not None and STORAGE_KINDS[cache.storage].needs_cuda:
            require_run_gpu(device, 'feature_cache.storage',
                            f"{cache.storage!r} reads rows into GPU memory",
                            'storage: direct')
        return placement

    def fanouts(self, train: bool) -> List[int]:
        r"""The fan-outs of training or evaluation batches."""
        return self.num_neighbors if train else \
            self.evaluation.num_neighbors

    def batch(self, train: bool) -> int:
        r"""The seeds per training or evaluation batch."""
        return self.batch_size if train else self.evaluation.batch_size

    def transform(self) -> Optional[Callable]:
        r"""The batches' transform (``adjacency='sparse'``: a torch_sparse
        ``adj_t`` built in the loading stage)."""
        if self.adjacency == 'sparse':
            return T.ToSparseTensor(remove_edge_index=False)
        return None

    def cache(self) -> FeatureCache:
        r"""The feature cache settings (no caches if none were given)."""
        return self.feature_cache or FeatureCache()

    def scores(self) -> Scores:
        r"""What ranks the rows of each store the caches front: the
        ``feature_cache.policy``'s scores for the training fan-outs and
        batch size, seeded with :obj:`seed`, computed once per store."""
        return loader_scores(self.num_neighbors, self.batch_size,
                             seed=self.seed, progress=self.progress)

    def loader_kwargs(self, train: bool) -> Dict[str, Any]:
        r"""The :class:`~pyg_fastload.FastNeighborLoader` arguments this
        spec fixes for a training or evaluation loader: the :obj:`sampler`
        draws training batches (a subgraph sampler's estimate drawn with
        the run's ``seed``, its bar shown with ``progress``) and the
        evaluation ones if it is hop-wise; GraphSAINT's subgraphs are for
        training: evaluation samples neighbourhoods
        (``evaluation.num_neighbors``)."""
        sampler = self.sampler.with_defaults(
            progress=self.progress, seed=self.seed) if train else \
            self.sampler if self.sampler.hop_wise else None
        return dict(num_neighbors=self.fanouts(train),
                    batch_size=self.batch(train),
                    pipeline_settings=dataclasses.replace(
                        self.pipeline_settings, sampling_device=None),
                    num_workers=self.num_workers, time_attr=self.time_attr,
                    temporal_strategy=self.temporal_strategy,
                    neighbor_sampler=sampler,
                    persistent_workers=self.num_workers > 0)
