r"""``FastLoadDataModule``: a ``LightningDataModule`` serving
:class:`~pyg_fastload.FastNeighborLoader` batches from a synthetic preset, a
prepared dataset directory or a PyG ``Data``, on one rank or several
(``mode``: the whole graph on every rank, PaGraph's self-reliant parts, or
DSP's parts served collectively)."""
from __future__ import annotations

import importlib.util
from datetime import timedelta
from pathlib import Path
from typing import Any, Dict, List, Literal, Optional, Tuple, Union

import pytorch_lightning as pl
import torch
import torch_geometric.transforms as T
from torch import Tensor
from torch_geometric.data import Data

from pyg_fastload import FastNeighborLoader
from pyg_fastload.caching import open_dataset, stores_from_data
from pyg_fastload.config import FeatureCache, check_fanouts
from pyg_fastload.datasets import PRESETS, load_synthetic
from pyg_fastload.distributed import (
    Collectives,
    DistContext,
    DistributedError,
    TrafficCounters,
)
from pyg_fastload.distributed.dsp import LAUNCH_ORDERS, DSPRank
from pyg_fastload.distributed.seeds import (
    RankSeedSampler,
    rank_seed_sampler,
    shard,
)
from pyg_fastload.io import DatasetFormatError, open_dataset_dir
from pyg_fastload.io.format import VERIFY_MODES
from pyg_fastload.storage import FeatureSource

from .data_sources import (
    ModeOptions,
    check_feature_cache,
    split_seeds,
    load_data_file_checked,
    resolve_dataset,
)
from .errors import ConfigError, config_section
from .rank_parts import mode_loader_args, setup_part

__all__ = ['FastLoadDataModule', 'FeatureCache', 'check_storage_device']

_SPLITS = ('train', 'val', 'test', 'predict')

#: The values of ``mode``.
MODES = ('replicated', 'pagraph', 'dsp', 'hopgnn')


def check_storage_device(cache: Optional[FeatureCache],
                         device: torch.device) -> None:
    r"""Refuses ``storage: gds`` (reads into GPU memory) on a run whose
    device is not CUDA, naming the setting and the fix."""
    if cache is not None and cache.storage == 'gds' and \
            device.type != 'cuda':
        raise ConfigError('feature_cache.storage', f"'gds' reads rows into "
                          f"GPU memory, but this run's device is {device}: "
                          f"use storage: direct", section='data')


class FastLoadDataModule(pl.LightningDataModule):
    r"""Serves node-classification mini-batches through
    :class:`~pyg_fastload.FastNeighborLoader`.

    The stores and caches are built once per process in :meth:`setup`, with
    the device cache on the trainer's device. The loaders' random streams
    (shuffling and sampling) come from generators seeded with :obj:`seed`,
    and their states are saved in checkpoints, so a resumed run draws the
    same next batches as an uninterrupted one (resuming at an epoch
    boundary).

    Args:
        dataset: a synthetic preset name (``'tiny'``, ``'arxiv-like'``,
            ``'products-like'``: generated once and cached), a directory
            written by ``pyg-fastload prepare`` (features stay on disk), a
            ``.pt`` file holding a saved ``Data``, or a ``Data`` object
            (default: ``'arxiv-like'``, or none with :obj:`partitions`).
        num_neighbors (List[int]): fan-out per hop for training.
        batch_size (int): seed nodes per training batch.
        eval_num_neighbors (List[int], optional): fan-outs for validation,
            test and prediction (default: :obj:`num_neighbors`).
        eval_batch_size (int, optional): seeds per evaluation batch
            (default: :obj:`batch_size`).
        feature_cache (FeatureCache, optional): host buffer / device cache
            budgets and policy; without it features are read from where the
            dataset keeps them (memory, or disk for a directory).
        pipeline (bool or str): the loaders' ``pipeline`` option.
        queue_capacity (int): batches ready ahead of the model.
        num_workers (int): PyG worker processes (0: pyg_fastload's threads).
        drop_last (bool): drop the last incomplete training batch.
        adjacency (str): what the batches hand the convolutions:
            ``'edge_index'`` (default; with :class:`NodeClassifier`'s
            per-layer trimming the fastest for SAGE and GAT on CPU) or
            ``'sparse'``: a torch_sparse ``SparseTensor`` ``adj_t`` built in
            the loading stage, off the model's path (faster for untrimmed
            GCN and SAGE; ``pyg-fastload bench model``).
        seed (int): seed of the loaders' random streams (the synthetic
            presets are always generated with seed 0).
        cache_dir (str, optional): cache root of the synthetic presets.
        progress (bool): progress bars while preparing data and caches.
        verify (str): how a dataset directory is checked when opened:
            ``'size'`` (file sizes and the topology's id ranges, one pass),
            ``'checksum'`` (also every SHA-256) or ``'none'``.
        mode (str): how several ranks (DDP) share the work
            (``docs/guide/distributed.md``): ``'replicated'`` (default;
            the whole :obj:`dataset` on every rank, the seeds split),
            ``'pagraph'`` (rank ``r`` trains on PaGraph part ``r`` alone,
            exchanging only gradients), ``'dsp'`` (disjoint parts serving
            the whole graph collectively: collective sampling and one
            partitioned cache) or ``'hopgnn'`` (the same parts; roots drawn
            globally, trained where their features live, the same update as
            ``'replicated'``). Partitioned modes evaluate on
            :obj:`dataset` if given, else on the parts. Every rank runs the
            same number of steps per epoch; the logged accuracy is global.
            Needs ``trainer.use_distributed_sampler: false``.
        partitions (str, optional): the partition directory of the modes
            ``'pagraph'``, ``'dsp'`` and ``'hopgnn'``.
        dist_timeout (float): seconds any collective between ranks may
            take before it ends with an error naming it.
        launch_order (str): how ``'dsp'`` keeps its pipelined stages'
            collectives apart: a process group each (``'groups'``), or one
            group with DSP's leader-ordered launch (``'coordinator'``).
        mode_options (ModeOptions, optional): ``'dsp'``'s layer-wise
            sampling and global seeds, ``'hopgnn'``'s micrograph merging.
    """
    @config_section('data')
    def __init__(
        self,
        dataset: Union[str, Path, Data, None] = None,
        num_neighbors: List[int] = [15, 10, 5],  # noqa: B006 (CLI default)
        batch_size: int = 1024,
        eval_num_neighbors: Optional[List[int]] = None,
        eval_batch_size: Optional[int] = None,
        feature_cache: Optional[FeatureCache] = None,
        pipeline: Union[bool, Literal['auto']] = 'auto',
        queue_capacity: int = 2,
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
        launch_order: Literal['groups', 'coordinator'] = 'groups',
        mode_options: Optional[ModeOptions] = None,
    ):
        super().__init__()
        if mode not in MODES:
            raise ConfigError('mode', f"{mode!r} is not one of "
                              f"{', '.join(MODES)}")
        if (mode != 'replicated') != (partitions is not None):
            raise ConfigError(
                'partitions', f"mode {mode!r} needs a partition directory "
                f"(pyg-fastload partition DATASET_DIR --method "
                f"{'pagraph' if mode == 'pagraph' else 'metis'} --out "
                f"PARTS_DIR)" if partitions is None else
                f"{partitions!r} is only used by modes 'pagraph' and 'dsp' "
                f"(mode 'replicated' holds the whole 'dataset' on every "
                f"rank)")
        if isinstance(dist_timeout, bool) or not isinstance(
                dist_timeout, (int, float)) or dist_timeout <= 0:
            raise ConfigError('dist_timeout', f'{dist_timeout!r} must be a '
                              f'positive number of seconds')
        if launch_order not in LAUNCH_ORDERS:
            raise ConfigError('launch_order', f"{launch_order!r} is not one "
                              f"of {', '.join(LAUNCH_ORDERS)}")
        self.launch_order = launch_order
        if isinstance(mode_options, dict):
            mode_options = ModeOptions(**mode_options)
        self.mode_options = mode_options or ModeOptions()
        self.mode_options.check(mode)
        self.mode = mode
        self.partitions = partitions
        self.dist_timeout = float(dist_timeout)
        self.kind: Optional[str] = None
        self.source: Any = None
        if dataset is not None or partitions is None:
            self.kind, self.source = resolve_dataset(
                'arxiv-like' if dataset is None else dataset)
        self.num_neighbors = self._fanouts(num_neighbors, 'num_neighbors')
        self.eval_num_neighbors = self._fanouts(
            num_neighbors if eval_num_neighbors is None
            else eval_num_neighbors, 'eval_num_neighbors')
        for key, value in (('batch_size', batch_size),
                           ('eval_batch_size', eval_batch_size),
                           ('queue_capacity', queue_capacity)):
            if value is not None and (isinstance(value, bool)
                                      or not isinstance(value, int)
                                      or value < 1):
                raise ConfigError(key, f"{value!r} must be a positive int")
        if not isinstance(num_workers, int) or num_workers < 0:
            raise ConfigError('num_workers', f"{num_workers!r} must be an "
                              f"int >= 0")
        if pipeline not in (True, False, 'auto'):
            raise ConfigError('pipeline', f"{pipeline!r} must be true, "
                              f"false or 'auto'")
        self.batch_size = batch_size
        self.eval_batch_size = eval_batch_size or batch_size
        self.feature_cache = check_feature_cache(feature_cache)
        if self.feature_cache and self.feature_cache.in_memory \
                and self.kind != 'dir':
            raise ConfigError('feature_cache.in_memory',
                              'only applies to a dataset directory')
        if adjacency not in ('edge_index', 'sparse'):
            raise ConfigError('adjacency', f"{adjacency!r} must be "
                              f"'edge_index' or 'sparse'")
        self.transform = None
        if adjacency == 'sparse':
            if importlib.util.find_spec('torch_sparse') is None:
                raise ConfigError('adjacency', "'sparse' needs torch_sparse "
                                  "(pip install --no-build-isolation "
                                  "torch_scatter torch_sparse); or use "
                                  "'edge_index'")
            self.transform = T.ToSparseTensor(remove_edge_index=False)
        self.pipeline = pipeline
        self.queue_capacity = queue_capacity
        self.num_workers = num_workers
        self.drop_last = drop_last
        self.seed = seed
        self.cache_dir = cache_dir
        self.progress = progress
        if verify not in VERIFY_MODES:
            raise ConfigError('verify', f"{verify!r} is not one of "
                              f"{', '.join(VERIFY_MODES)}")
        self.verify = verify
        self.save_hyperparameters(ignore=['dataset'] if self.kind == 'data'
                                  and isinstance(self.source, Data) else [])
        self.generators = {split: torch.Generator().manual_seed(seed + i)
                           for i, split in enumerate(_SPLITS)}
        self.data: Any = None  # a Data or a (FeatureStore, GraphStore) pair
        self.eval_data: Any = None  # what validation/test/predict read
        self._meta: Optional[Tuple[int, int]] = None
        self.traffic = TrafficCounters()
        self.context = DistContext()
        self.collectives: Optional[Collectives] = None
        self.dsp: Optional[DSPRank] = None
        self.samplers: Dict[str, Any] = {}

    @staticmethod
    def _fanouts(value: Any, key: str) -> List[int]:
        try:
            return check_fanouts(value)
        except (TypeError, ValueError, NotImplementedError) as error:
            raise ConfigError(key, str(error)) from None

    @property
    def global_seeds(self) -> bool:
        r"""Ranks draw their seeds from the whole training set."""
        return self.mode in ('replicated', 'hopgnn') or (
            self.mode == 'dsp' and self.mode_options.seeds == 'global')

    # What the model needs to know before setup ##############################

    @property
    def num_features(self) -> int:
        r"""Width of the node features ``x``."""
        return self._metadata()[0]

    @property
    def num_classes(self) -> int:
        r"""Number of label classes."""
        return self._metadata()[1]

    def _metadata(self) -> Tuple[int, int]:
        if self._meta is not None:
            return self._meta
        if self.kind == 'preset':
            config = PRESETS[self.source]
            self._meta = (config.num_features, config.num_classes)
        elif self.kind in ('dir', None):  # None: a part of 'partitions'
            path = self.source if self.kind else next(
                iter(sorted(Path(self.partitions).glob('part-*'))), None)
            if path is None:
                raise ConfigError('partitions', f"no part-* directory in "
                                  f"{self.partitions!r}")
            dataset = open_dataset_dir(path, verify='none')
            num_classes = dataset.num_classes
            if num_classes is None:
                num_classes = int(dataset.arrays['y'].max()) + 1
            self._meta = (dataset.num_features, num_classes)
        else:
            data = self._in_memory_data()
            self._meta = (data.num_features, int(data.y.max()) + 1)
        return self._meta

    def _in_memory_data(self) -> Data:
        if self.kind == 'preset':
            return load_synthetic(self.source, root=self.cache_dir,
                                  progress=self.progress).to_data()
        if isinstance(self.source, Path):
            self.source = load_data_file_checked(self.source)
        return self.source

    # Set-up, once per process ################################################

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

    def prepare_data(self) -> None:
        r"""Generates and caches a synthetic preset (once per machine)."""
        if self.kind == 'preset':
            load_synthetic(self.source, root=self.cache_dir,
                           progress=self.progress)

    @config_section('data')
    def setup(self, stage: Optional[str] = None) -> None:
        if self.data is not None:
            return
        self.context = DistContext.current(
            timedelta(seconds=self.dist_timeout))
        self._check_trainer()
        self.collectives = Collectives(self.context, self.traffic)
        check_storage_device(self.feature_cache, self.device)
        if self.mode != 'replicated':
            setup_part(self)
        if self.kind is not None:
            self._setup_dataset()
        if self.data is None:
            self.data = self.eval_data
        if self.eval_data is None:
            self.eval_data = self.data

    def _check_trainer(self) -> None:
        trainer = self.trainer
        if trainer is None or not self.context.is_distributed:
            return
        if trainer._accelerator_connector.use_distributed_sampler:
            raise ConfigError('use_distributed_sampler', 'must be false: '
                              'FastLoadDataModule splits the seeds across '
                              'ranks itself (set trainer.'
                              'use_distributed_sampler: false)',
                              section='trainer')

    def _setup_dataset(self) -> None:
        r"""The whole dataset: what every rank trains on (``replicated``),
        or what ``pagraph`` ranks evaluate on."""
        cache = self.feature_cache or FeatureCache()
        batch_size = self.batch_size
        if self.kind == 'dir':
            try:
                self.eval_data = open_dataset(
                    self.source, cache, device=self.device,
                    num_neighbors=self.num_neighbors, batch_size=batch_size,
                    verify=self.verify, progress=self.progress)
            except DatasetFormatError as error:
                raise ConfigError('dataset', str(error)) from None
            return
        data = self._in_memory_data()
        if self.feature_cache is None:
            self.eval_data = data
            return
        try:
            self.eval_data = stores_from_data(
                data, cache, device=self.device,
                num_neighbors=self.num_neighbors, batch_size=batch_size,
                progress=self.progress)
        except ValueError as error:
            raise ConfigError('feature_cache', str(error)) from None

    def _seeds(self, split: str) -> Tuple[Any, Optional[Tensor],
                                          Optional[RankSeedSampler]]:
        r"""``(data, seeds, sampler)`` of this rank for :obj:`split`."""
        train = split == 'train'
        data = self.data if train else self.eval_data
        ctx = self.context
        if split == 'predict':
            if self.dsp is not None and data is self.data:
                raise ConfigError('dataset', f"mode {self.mode!r} predicts "
                                  f"on the whole graph: give 'dataset'")
            seeds = None
            if ctx.is_distributed:
                num_nodes = (data.num_nodes if isinstance(data, Data) else
                             data[1].topology.num_nodes)
                seeds = shard(torch.arange(num_nodes), ctx.rank,
                              ctx.world_size)
            return data, seeds, None
        dsp_part = self.dsp is not None and data is self.data
        seeds = self.dsp.seeds(split, self.global_seeds) if dsp_part \
            else split_seeds(data, split)
        if not ctx.is_distributed and self.mode == 'replicated':
            return data, seeds, None  # one process: the plain loader
        if not train and not dsp_part:
            if self.mode == 'pagraph' and data is self.data:
                return data, seeds, None  # each part evaluates its own
            return data, shard(seeds, ctx.rank, ctx.world_size), None
        try:
            sampler = rank_seed_sampler(
                self.collectives, seeds.numel(),
                self.batch_size if train else self.eval_batch_size,
                self.generators[split], train,
                self.global_seeds,
                train and self.drop_last)
        except DistributedError as error:
            raise ConfigError('mode', str(error)) from None
        return data, seeds, sampler

    @config_section('data')
    def _loader(self, split: str) -> FastNeighborLoader:
        if self.data is None:
            self.setup(split)
        train = split == 'train'
        data, nodes, sampler = self._seeds(split)
        extra, transform = mode_loader_args(self, split, data, sampler)
        return FastNeighborLoader(
            data,
            num_neighbors=self.num_neighbors if train
            else self.eval_num_neighbors,
            input_nodes=nodes,
            batch_size=self.batch_size if train else self.eval_batch_size,
            shuffle=train and sampler is None,
            drop_last=train and self.drop_last and sampler is None,
            generator=self.generators[split],
            transform=transform,
            pipeline=self.pipeline,
            queue_capacity=self.queue_capacity,
            num_workers=self.num_workers,
            persistent_workers=self.num_workers > 0,
            # On CUDA the loader's own transfer stage copies from pinned
            # buffers on a side stream (PyG's worker processes cannot).
            device=(self.device if self.device.type == 'cuda'
                    and self.num_workers == 0 else None),
            **extra,
        )

    def teardown(self, stage: Optional[str] = None) -> None:
        r"""Stops DSP's launch coordinator (every rank, at the end of
        fit)."""
        if self.dsp is not None and stage == 'fit':
            self.dsp.close()

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
        r"""The loaders' random-stream states."""
        return {'generators': {split: gen.get_state()
                               for split, gen in self.generators.items()}}

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        for split, state in state_dict.get('generators', {}).items():
            if split in self.generators:
                self.generators[split].set_state(state)
