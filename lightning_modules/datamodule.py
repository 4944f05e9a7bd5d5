r"""``FastLoadDataModule``: a ``LightningDataModule`` serving
:class:`~pyg_fastload.FastNeighborLoader` batches from a synthetic preset, a
prepared dataset directory or a PyG ``Data``, on one rank or several. It
builds one :class:`~pyg_fastload.modes.LoadingSpec` from its arguments,
picks the loading mode object (:data:`~pyg_fastload.modes.MODES`) and hands
off to it: the mode opens the stores and makes the loaders."""
from __future__ import annotations

import dataclasses
from datetime import timedelta
from pathlib import Path
from typing import Any, Dict, List, Literal, Optional, Tuple, Union

import pytorch_lightning as pl
import torch
from torch_geometric.data import Data, HeteroData

from pyg_fastload import FastNeighborLoader
from pyg_fastload.config import (FeatureCache, PipelineSettings,
                                 folded_setting)
from pyg_fastload.distributed import Collectives, DistContext, TrafficCounters
from pyg_fastload.graph import is_data
from pyg_fastload.modes import (EVAL_ALIASES, MODES, DatasetSource,
                                EvalSettings, LoadingSpec, ModeOptions)
from pyg_fastload.modes.schema import HeteroSchema
from pyg_fastload.modes.link_split import LinkOptions
from pyg_fastload.placement import Placement
from pyg_fastload.storage import FeatureSource

from . import random_streams
from .errors import ConfigError, config_section

__all__ = ['FastLoadDataModule', 'FeatureCache', 'LinkOptions',
           'PipelineSettings', 'EvalSettings']

_SPLITS = ('train', 'val', 'test', 'predict')


class FastLoadDataModule(pl.LightningDataModule):
    r"""Serves node-classification mini-batches through
    :class:`~pyg_fastload.FastNeighborLoader`; the stores and caches are
    built once per process in :meth:`setup`, on the trainer's device. The
    loaders' random streams are seeded with :obj:`seed` and saved in
    checkpoints with the training loader's place in its epoch (a run
    resumed from a checkpoint, taken mid-epoch or at an epoch's end, draws
    the batches the uninterrupted run draws from there on, in every mode;
    ``docs/guide/distributed.md``, "Resuming a killed run").

    Args:
        dataset: a synthetic preset name (``'tiny'``, ``'arxiv-like'``,
            ``'products-like'``: generated once and cached; heterogeneous
            ``'hetero-tiny'``, ``'mag-like'``: generated in memory), a
            directory written by ``pyg-fastload prepare`` (features on disk),
            a ``.pt`` file holding a ``Data`` or ``HeteroData``, or either
            object (default: ``'arxiv-like'``, or none with
            :obj:`partitions`). Heterogeneous data trains on its labelled
            node type, mode ``'replicated'``, one static cache for all types.
        num_neighbors (List[int]): fan-out per hop for training.
        batch_size (int): seed nodes per training batch.
        evaluation (EvalSettings, optional): how validation, test and
            prediction compute (:class:`~pyg_fastload.modes.EvalSettings`:
            ``num_neighbors`` and ``batch_size``, each the training value
            unless given; ``method``: ``'sampled'`` or ``'layerwise'``;
            ``inference``: the layer-wise options). In Python also the
            keywords ``eval_num_neighbors``, ``eval_batch_size``, ``eval``
            and ``inference``, aliases of its fields.
        feature_cache (FeatureCache, optional): host buffer / device cache
            budgets and policy; without it features are read from where the
            dataset keeps them (memory, or disk for a directory).
        pipeline_settings (PipelineSettings, optional): how the loaders
            sample and overlap their work with the model
            (:class:`~pyg_fastload.PipelineSettings`: ``pipeline``,
            ``queue_capacity``, ``run_ahead``, ``sampling_workers``,
            ``sampling_device``: ``'cpu'`` or ``'cuda'``, the trainer's
            GPU). In Python each field may also be given as a keyword of
            its own (``pipeline=False``).
        num_workers (int): PyG worker processes (0: pyg_fastload's threads).
        drop_last (bool): drop the last incomplete training batch.
        adjacency (str): ``'edge_index'`` (default; fastest with per-layer
            trimming) or ``'sparse'``: a torch_sparse ``adj_t`` built in the
            loading stage (faster for untrimmed GCN and SAGE). Refused by
            :class:`NodeClassifier` and :class:`LinkPredictor` (on a
            homogeneous graph) for batches whose edges carry estimator
            weights: LABOR's importance weights (``importance_sampling``
            not 0) and GraphSAINT's normalisation, which an aggregation
            over ``adj_t`` would drop.
        seed (int): seed of the loaders' random streams (the synthetic
            presets are always generated with seed 0).
        cache_dir (str, optional): cache root of the synthetic presets.
        progress (bool): progress bars while preparing data and caches.
        verify (str): how a dataset directory is checked when opened:
            ``'size'`` (file sizes and the topology's id ranges, one pass),
            ``'checksum'`` (also every SHA-256) or ``'none'``.
        mode (str): how several ranks share the work
            (``docs/guide/distributed.md``, :data:`~pyg_fastload.modes.MODES`):
            ``'replicated'`` (default; the whole :obj:`dataset` on every
            rank), ``'pagraph'`` (each rank on its self-reliant part),
            ``'dsp'`` (disjoint parts serving the graph collectively) or
            ``'hopgnn'`` (roots trained where their features live).
            Partitioned modes evaluate on :obj:`dataset` if given, else on
            the parts. Each loader's sampler is a ``DistributedSampler``
            over this rank's seeds, which Lightning keeps as it is.
        partitions (str, optional): the partition directory of the modes
            ``'pagraph'``, ``'dsp'`` and ``'hopgnn'``.
        dist_timeout (float): seconds any collective between ranks may
            take before it ends with an error naming it.
        mode_options (ModeOptions, optional): ``'dsp'``'s layer-wise
            sampling, global seeds and launch order (``launch_order``, in
            Python also a keyword of its own), ``'hopgnn'``'s micrograph
            merging.
        task (str): ``'node'`` (default: seed nodes, for
            :class:`NodeClassifier`) or ``'link'``: label edges with
            negatives through :class:`~pyg_fastload.FastLinkNeighborLoader`
            (for :class:`LinkPredictor`; homogeneous data, mode
            ``'replicated'``), the edges split as PyG's ``RandomLinkSplit``
            does; :obj:`batch_size` counts positive edges,
            ``evaluation.batch_size`` evaluation label edges.
        link (LinkOptions, optional): the link task's negatives, split
            ratios and evaluation (default: :class:`LinkOptions`'s).
        time_attr (str, optional): temporal sampling. Task ``'node'``: the name
            of the dataset's node array holding one time per node (e.g. a
            ``Data``'s ``time``, kept by ``pyg-fastload prepare --pyg-data``);
            every seed is sampled at its own time, with no neighbour later than
            it (PyG's ``time_attr``). Modes ``'replicated'`` and ``'pagraph'``,
            and ``'dsp'`` on a homogeneous partition (its collective sampler
            gets each part's times); ``evaluation.method`` ``'sampled'``. Task
            ``'link'``: the name of an edge array of a dataset directory
            holding one time per edge (a ``Data``'s edge-level ``time``, kept
            by ``prepare --pyg-data``; of the supervised relation on a
            heterogeneous graph, ``data[edge_type].time``); every label edge
            (training, validation, test) is sampled at its edge's time, its
            negatives at the same, with no sampled edge later than it; modes
            ``'replicated'`` and ``'dsp'``, and on homogeneous graphs
            ``'pagraph'``.
        temporal_strategy (str): ``'uniform'`` (default) among the
            neighbours not later than the seed, or ``'last'``: the most
            recent ones (needs :obj:`time_attr`).
        sampler (str or dict, optional): what draws every batch:
            ``'neighbor'`` (default: node-wise neighbour sampling),
            ``'labor'`` (layer-neighbour sampling,
            :class:`~pyg_fastload.sampling.LaborSampler`: the same
            fan-outs, far fewer distinct nodes per batch),
            ``'random_walk'`` (a walk of one step per hop from every seed,
            :obj:`num_neighbors` all 1), GraphSAINT's ``'saint_node'``,
            ``'saint_edge'`` or ``'saint_rw'`` (training on subgraphs, the
            loss weighed by their normalisation, evaluation on
            neighbourhoods sampled with ``evaluation.num_neighbors``;
            :mod:`pyg_fastload.sampling.saint`), or ``{class_path: NAME
            or module.Class, init_args: {...}}`` (a sampler class with its
            own options, e.g. ``{class_path: labor, init_args:
            {importance_sampling: 1}}``; a user's own class from a package
            the config may import). Every mode takes a hop-wise sampler
            (``'dsp'`` and ``'hopgnn'`` draw its hops together: LABOR-0
            there; random walks in ``'dsp'``); GraphSAINT runs in
            ``'replicated'`` (and its walks in ``'pagraph'``), on
            homogeneous graphs, for task ``'node'``; a mode that cannot
            take a sampler says why.

    Example:
        >>> from pyg_fastload.lightning import FastLoadDataModule
        >>> data = FastLoadDataModule('tiny', num_neighbors=[5, 5],
        ...                           batch_size=256, progress=False)
        >>> data.setup('fit')
        >>> batch = next(iter(data.train_dataloader()))
        >>> batch.batch_size, batch.x.size(1), data.num_classes
        (256, 16, 4)
    """
    @config_section('data')
    def __init__(
        self,
        dataset: Union[str, Path, Data, HeteroData, None] = None,
        num_neighbors: List[int] = [15, 10, 5],  # noqa: B006 (CLI default)
        batch_size: int = 1024,
        evaluation: Optional[EvalSettings] = None,
        feature_cache: Optional[FeatureCache] = None,
        pipeline_settings: Optional[PipelineSettings] = None,
        num_workers: int = 0,
        drop_last: bool = False,
        adjacency: Literal['edge_index', 'sparse'] = 'edge_index',
        seed: int = 0,
        cache_dir: Optional[str] = None,
        progress: bool = True,
        verify: Literal['none', 'size', 'checksum'] = 'size',
        mode: Literal['replicated', 'pagraph', 'dsp', 'hopgnn'] = 'replicated',
        partitions: Optional[str] = None,
        dist_timeout: float = 300.0,
        mode_options: Optional[ModeOptions] = None,
        task: Literal['node', 'link'] = 'node',
        link: Optional[LinkOptions] = None,
        time_attr: Optional[str] = None,
        temporal_strategy: Literal['uniform', 'last'] = 'uniform',
        sampler: Union[str, Dict[str, Any], None] = None,
        **kwargs: Any,
    ):
        super().__init__()
        pipeline_settings = PipelineSettings.of(pipeline_settings, kwargs)
        evaluation = folded_setting('evaluation', EvalSettings, evaluation,
                                    kwargs, EVAL_ALIASES)
        mode_options = folded_setting('mode_options', ModeOptions,
                                      mode_options, kwargs,
                                      {'launch_order': 'launch_order'})
        if kwargs:
            raise TypeError(f"FastLoadDataModule() got unexpected keyword "
                            f"arguments {sorted(kwargs)}")
        if mode not in MODES:
            raise ConfigError('mode', f"{mode!r} is not one of "
                              f"{', '.join(MODES)}")
        #: Every loading setting, validated once.
        self.spec = LoadingSpec(
            num_neighbors=num_neighbors, batch_size=batch_size,
            evaluation=evaluation, feature_cache=feature_cache,
            pipeline_settings=pipeline_settings, num_workers=num_workers,
            drop_last=drop_last,
            adjacency=adjacency, seed=seed, progress=progress, verify=verify,
            mode_options=mode_options,
            dist_timeout=dist_timeout, task=task, link=link,
            time_attr=time_attr,
            temporal_strategy=temporal_strategy, sampler=sampler)
        source = None
        if dataset is not None or partitions is None:
            source = DatasetSource.of('arxiv-like' if dataset is None
                                      else dataset, cache_dir, progress)
        #: The loading mode object (``spec.mode``'s class).
        self.loading = MODES[mode](self.spec, source, partitions)
        self.save_hyperparameters(ignore=['dataset'] if is_data(dataset)
                                  else [])
        # the keywords folded in, as plain values (a checkpoint is read by
        # torch's weights-only unpickler, which refuses other classes)
        for key, value in (('pipeline_settings', pipeline_settings),
                           ('evaluation', evaluation),
                           ('mode_options', mode_options)):
            self.hparams[key] = dataclasses.asdict(value)
        self.generators = {split: torch.Generator().manual_seed(seed + i)
                           for i, split in enumerate(_SPLITS)}
        self.traffic = TrafficCounters()
        self.collectives: Optional[Collectives] = None
        #: Where the loaders sample and return batches, resolved in
        #: :meth:`setup` from the trainer's ``root_device``.
        self.placement = Placement()
        self._meta: Optional[Tuple[int, int]] = None
        # The training loader made last, and a checkpoint's place of it
        # (restored on the next one made).
        self._train: Optional[FastNeighborLoader] = None
        self._train_state: Optional[Dict[str, Any]] = None

    @property
    def num_features(self) -> int:
        r"""Width of the node features ``x``."""
        return self._metadata()[0]

    @property
    def num_classes(self) -> int:
        r"""Number of label classes."""
        return self._metadata()[1]

    @property
    def hetero_schema(self) -> Optional[HeteroSchema]:
        r"""A heterogeneous dataset's types, target and widths (what a model
        builds itself from); :obj:`None` for a homogeneous one."""
        source = self.loading.source
        return None if source is None else source.schema(
            labelled=self.loading.task.labelled)

    @config_section('data')
    def _metadata(self) -> Tuple[int, int]:
        if self._meta is None:
            self._meta = self.loading.metadata()
        return self._meta

    @property
    def data(self) -> Any:
        r"""What the training loaders read (``None`` before setup): a
        ``Data`` or a ``(FeatureStore, GraphStore)`` pair."""
        return self.loading.data

    @property
    def device(self) -> torch.device:
        r"""The trainer's device (CPU without a trainer)."""
        trainer = self.trainer
        if trainer is None:
            return torch.device('cpu')
        return trainer.strategy.root_device

    @property
    def feature_store(self) -> Optional[FeatureSource]:
        r"""The feature store once set up (:obj:`None` for an
        in-memory ``Data`` without :obj:`feature_cache`)."""
        if isinstance(self.data, tuple):
            return self.data[0]
        return None

    # Lightning hooks #########################################################

    @config_section('data')
    def prepare_data(self) -> None:  # a preset is generated once per machine
        if self.loading.source is not None:
            self.loading.source.prepare()

    @config_section('data')
    def setup(self, stage: Optional[str] = None) -> None:
        r"""Opens this rank's stores and samplers through the mode (once per
        process)."""
        if self.collectives is not None:
            return
        context = DistContext.current(
            timedelta(seconds=self.spec.dist_timeout))
        placement = self.spec.placement(self.device)
        self.collectives = Collectives(context, self.traffic)
        self.collectives.start_heartbeat()
        self.loading.open(self.collectives, self.device)
        self.placement = placement

    @property
    def task(self) -> str:
        r"""``'node'`` or ``'link'`` (the name of the mode's task)."""
        return self.loading.task.name

    @property
    def edge_weights(self) -> bool:
        r"""Whether the batches carry the sampler's estimator weights on
        their edges (``edge_weight``: LABOR with ``importance_sampling``),
        which a model must aggregate with."""
        return self.spec.sampler.gives_edge_weight

    def features_only(self) -> None:
        r"""Batches of the seeds alone (fan-out 0), for a model that reads
        no neighbours (the MLP baseline); modes that built their own
        samplers (``'dsp'``, ``'hopgnn'``) keep them."""
        if self.loading.samplers:
            return
        self.spec = dataclasses.replace(
            self.spec, num_neighbors=[0], evaluation=dataclasses.replace(
                self.spec.evaluation, num_neighbors=[0]))
        self.loading.spec = self.spec

    @config_section('data')
    def _loader(self, split: str) -> FastNeighborLoader:
        self.setup(split)
        limit = getattr(getattr(self, 'trainer', None),
                        f'limit_{split}_batches', None)
        if isinstance(limit, (int, float)):  # the epoch ends there
            self.loading.batch_limits[split] = limit
        loader = self.loading.loader(split, self.generators[split],
                                     self.placement)
        if split == 'train':
            self._train = loader
            if self._train_state is not None:
                loader.load_state_dict(self._train_state)
                self._train_state = None
        return loader

    def teardown(self, stage: Optional[str] = None) -> None:
        r"""Stops what the mode runs beside the stores (DSP's launch
        coordinator) at the end of fit, and the heartbeat, on every rank."""
        if stage == 'fit':
            self.loading.close()
        if self.collectives is not None:
            self.collectives.stop_heartbeat()

    def train_dataloader(self) -> FastNeighborLoader:
        return self._loader('train')

    def val_dataloader(self) -> FastNeighborLoader:
        return self._loader('val')

    def test_dataloader(self) -> FastNeighborLoader:
        return self._loader('test')

    def predict_dataloader(self) -> FastNeighborLoader:
        r"""Every node of the graph."""
        return self._loader('predict')

    # Checkpointing ###########################################################

    def state_dict(self) -> Dict[str, Any]:
        r"""The loaders' random-stream states, the training loader's place
        in its epochs (its ``state_dict``, the same on every rank), which
        the next training loader made resumes from (Lightning hands a
        checkpoint's place to the loader itself only mid-epoch, and a
        rank's stream at an epoch's end is its own), and every rank's
        global random streams (``'streams'``, in rank order: dropout's,
        which Lightning does not keep). A collective once set up: every
        rank calls it, as Lightning's checkpointing does."""
        state: Dict[str, Any] = {'generators': {
            split: gen.get_state() for split, gen in self.generators.items()}}
        if self._train is not None:
            state['train_loader'] = self._train.state_dict()
        if self.collectives is not None:
            state['streams'] = random_streams.gather(self.collectives)
        return state

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        r"""Resumes from :meth:`state_dict` (rank 0's, as a checkpoint
        holds it): the loaders' streams and place, and this rank's global
        random streams where the checkpoint holds one per rank of this
        run."""
        for split, state in state_dict.get('generators', {}).items():
            if split in self.generators:
                self.generators[split].set_state(state)
        self._train_state = state_dict.get('train_loader')
        streams = state_dict.get('streams', [])
        context = DistContext.current()
        if len(streams) == context.world_size:
            random_streams.restore(streams[context.rank])
