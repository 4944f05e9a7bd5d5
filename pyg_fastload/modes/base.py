r"""What every loading mode answers (:class:`LoadingMode`): open this rank's
stores and samplers, the seeds of a split, the loader of a split, and
teardown. A mode is one subclass; nothing outside the mode classes compares
mode names."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, ClassVar, Dict, Optional, Tuple, Union

import torch
from torch import Tensor

from ..config import SettingError
from ..distributed import Collectives, DistributedError
from ..distributed.collectives import digest
from ..distributed.seeds import (RankSeedSampler, in_order,
                                 rank_seed_sampler, shard)
from ..graph.view import GraphView
from ..partition.part_dirs import feature_source, read_partition_meta
from ..placement import Placement
from ..sampling import SamplerChoice
from .schema import target_of
from .source import DatasetSource, directory_metadata, split_seeds
from .spec import LoadingSpec, ModeOptions
from .link_split import LinkSplit
from .task import LinkTraining, Loader, Task

__all__ = ['LoadingMode', 'Plan']


#: The groups of :class:`ModeOptions`: their fields and the mode they
#: belong to.
_OPTION_GROUPS = {'dsp': (('sampling', 'seeds'), "mode 'dsp'"),
                  'hopgnn': (('merges', 'merge_search'), "mode 'hopgnn'"),
                  'cold': (('cold_rows', ), "modes 'dsp' and 'hopgnn'")}

#: ``(data, seeds, rank sampler)`` of one split's loader.
Plan = Tuple[Any, Optional[Tensor], Optional[RankSeedSampler]]


class LoadingMode:
    r"""How the ranks of a run share the graph and the seeds.

    Args:
        spec (LoadingSpec): the run's loading settings.
        source (DatasetSource, optional): the whole dataset (what
            ``replicated`` trains on; the partitioned modes evaluate on it
            if given, else on their parts).
        partitions (str, optional): the partition directory of a
            partitioned mode.
    """
    #: The name ``FastLoadDataModule(mode=...)`` and configs use.
    name: ClassVar[str] = ''
    #: The ``pyg-fastload partition --method`` its parts need (None: the
    #: mode reads no partition).
    partition_method: ClassVar[Optional[str]] = None
    #: Every rank must take part in every batch (collective sampling or
    #: feature fetching over the parts).
    collective: ClassVar[bool] = False
    #: The groups of :class:`ModeOptions` the mode takes (others must stay
    #: at their defaults).
    option_groups: ClassVar[Tuple[str, ...]] = ()
    #: Why the mode cannot train links, if it cannot (task ``'link'``).
    link_refusal: ClassVar[Optional[str]] = None

    def __init__(self, spec: LoadingSpec,
                 source: Optional[DatasetSource] = None,
                 partitions: Optional[str] = None):
        self._check_options(spec)
        if (self.partition_method is None) != (partitions is None):
            raise SettingError('partitions', self._partitions_hint(
                partitions))
        if source is None and partitions is None:
            raise SettingError('dataset', f"mode {self.name!r} needs a "
                               f"dataset")
        self.spec = spec
        self.source = source
        self.partitions = None if partitions is None else Path(partitions)
        #: What the run trains (``spec.task``): it makes the loaders.
        self.task: Task = spec.make_task()
        if source is not None:
            source.check(spec)
        refusal = self._sampler_refusal(spec.sampler)
        if refusal is not None:
            raise SettingError('sampler', f"{spec.sampler.describe()} with "
                               f"mode {self.name!r}: {refusal}")
        self._check_workload()
        self.task.check(self)
        self.collectives: Optional[Collectives] = None
        self.data: Any = None  # a Data or a (FeatureStore, GraphStore)
        self.eval_data: Any = None  # what validation/test/predict read
        #: The mode's samplers of the parts (``'train'``, ``'eval'``).
        self.samplers: Dict[str, Any] = {}
        #: Per split, where the loop stops its epochs (Lightning's
        #: ``limit_train_batches``, ...: a number of batches or a share of
        #: them; :func:`~pyg_fastload.distributed.seeds.rank_seed_sampler`).
        self.batch_limits: Dict[str, Union[int, float]] = {}

    def _check_workload(self) -> None:
        r"""Refuses the dataset and settings this mode cannot serve (each
        refusal where its combination is decided; the whole dataset on
        every rank takes any)."""

    def _sampler_refusal(self, choice: SamplerChoice) -> Optional[str]:
        r"""Why this mode cannot draw its batches with :obj:`choice`, if it
        cannot: the whole dataset on every rank takes any sampler of its
        kind of graph."""
        if choice.homogeneous_only and self.source is not None and \
                self.source.is_hetero:
            return ("it samples homogeneous graphs, and 'dataset' is "
                    "heterogeneous: use sampler: neighbor or labor")
        return None

    @classmethod
    def accepts_partition(cls, method: str) -> bool:
        r"""Whether parts made by ``pyg-fastload partition --method``
        :obj:`method` suit this mode."""
        return cls.partition_method == method

    def _check_options(self, spec: LoadingSpec) -> None:
        r"""Refuses mode options this mode would ignore (those outside
        :attr:`option_groups`)."""
        options = spec.mode_options
        for group, (keys, owner) in _OPTION_GROUPS.items():
            default = ModeOptions()
            if group not in self.option_groups and any(
                    getattr(options, k) != getattr(default, k) for k in keys):
                names = ' and '.join(map(repr, keys))
                raise SettingError('mode_options', f"{names} are options of "
                                   f"{owner}, not of mode {self.name!r}")

    def _partitions_hint(self, partitions: Optional[str]) -> str:
        if partitions is None:
            return (f"mode {self.name!r} needs a partition directory "
                    f"(pyg-fastload partition DATASET_DIR --method "
                    f"{self.partition_method} --out PARTS_DIR)")
        return (f"{partitions!r} is only used by the partitioned modes "
                f"(mode {self.name!r} holds the whole 'dataset' on every "
                f"rank)")

    @property
    def temporal_refusal(self) -> Optional[str]:
        r"""Why the mode cannot sample in time (``time_attr``), if it
        cannot: the whole dataset on every rank samples as the loaders do."""
        return None

    @property
    def global_seeds(self) -> bool:
        r"""Whether ranks draw their training seeds from the whole training
        set (else each from its own part)."""
        return True

    def metadata(self) -> Tuple[int, int]:
        r"""``(num_features, num_classes)`` of the dataset, or of a part."""
        if self.source is not None:
            return self.source.metadata(self.task.labelled)
        part = next(iter(sorted(self.partitions.glob('part-*'))), None)
        if part is None:
            raise SettingError('partitions', f"no part-* directory in "
                               f"'{self.partitions}'")
        features, classes = directory_metadata(part, self.task.labelled)
        if features == 0:  # the parts may read theirs from the dataset
            try:
                meta = read_partition_meta(self.partitions)
            except ValueError as error:
                raise SettingError('partitions', str(error)) from None
            source = feature_source(meta)
            if source is not None:
                features, _ = directory_metadata(source, False)
        return features, classes

    # Opening, once per process ##############################################

    def open(self, collectives: Collectives, device: torch.device) -> None:
        r"""Opens this rank's stores (and samplers: collectives, built in
        the same order on every rank) with the caches on :obj:`device`."""
        self.collectives = collectives
        self._agree()
        self._open_parts(device)
        if self.source is not None:
            self.eval_data = self.source.open(self.spec, device)
        if self.data is None:
            self.data = self.eval_data
        if self.eval_data is None:
            self.eval_data = self.data
        self.task.open(self)  # the same on every rank

    def _agree(self) -> None:
        r"""Every rank compares its mode, loading spec, global seed
        (``seed_everything``) and dataset (its content's identity) with the
        others' in one collective, and all stop naming the settings that
        differ: ranks that disagree would otherwise train silently on
        different batches."""
        collectives = self.collectives
        if collectives.world_size == 1:
            return
        # Lightning's seed_everything records the global seed here.
        seed = os.environ.get('PL_GLOBAL_SEED', 'unset')
        shared = {'mode': self.name, 'seed_everything': seed}
        if self.source is not None:
            shared['dataset'] = self.source.identity()
        mine = dict(self.spec.digests(),
                    **{k: digest(v) for k, v in shared.items()})
        names = sorted(mine)
        table = collectives.all_gather_ints(
            [mine[n] for n in names], 'compare the loading settings')
        differ = [n for i, n in enumerate(names)
                  if bool((table[:, i] != table[0, i]).any())]
        if differ:
            values = {n: shared[n] if n in shared else getattr(self.spec, n)
                      for n in differ}
            fix = ('give every rank the same dataset (copy one '
                   'machine\'s to the others)' if 'dataset' in differ else
                   'start every rank with the same configuration')
            raise SettingError(differ[0], f"the ranks were started with "
                               f"different {', '.join(differ)} (rank "
                               f"{collectives.rank}: {values}); {fix}")

    def _open_parts(self, device: torch.device) -> None:
        r"""Opens this rank's part (partitioned modes)."""

    def close(self) -> None:
        r"""Releases what the mode holds beyond its stores (every rank)."""

    # Seeds and loaders ######################################################

    def on_parts(self, transform: Optional[Any]) -> Optional[Any]:
        r"""The transform of the loaders reading this rank's own data
        (:attr:`data`): :obj:`transform`, or for a heterogeneous partition
        one that first sets the dataset's ids of the batch's nodes."""
        return transform

    def _own_seeds(self, split: str) -> Tensor:
        r"""The seeds of :obj:`split` in the mode's own data."""
        return split_seeds(self.data, split)

    def link_training(self, split: LinkSplit, graph: Any) -> LinkTraining:
        r"""What this rank trains links on, given the link :obj:`split`
        and its training message-passing :obj:`graph` (the whole graph's):
        that graph and every training link, shared across the ranks as
        training seeds are."""
        return LinkTraining(graph, split.supervision('train')[0],
                            label_time=split.label_time('train'))

    def neighbor_sampler(self, train: bool) -> Optional[Any]:
        r"""A sampler of the parts the loaders share, if the mode has one."""
        return None

    def plan(self, split: str, generator: torch.Generator) -> Plan:
        r"""``(data, seeds, sampler)`` of this rank for :obj:`split`."""
        train = split == 'train'
        data = self.data if train else self.eval_data
        collectives = self.collectives
        distributed = collectives.world_size > 1
        on_parts = data is self.data and self.partitions is not None
        if split == 'predict':
            return self._predict_plan(data, on_parts)
        seeds = self._own_seeds(split) if data is self.data else \
            split_seeds(data, split)
        if not distributed and self.partitions is None:
            return data, seeds, None  # one process: the plain loader
        if not train and not (on_parts and self.collective):
            if not on_parts:  # each part evaluates its own, else a share
                seeds = shard(seeds, collectives.rank, collectives.world_size)
            return data, seeds, in_order(seeds.numel(), collectives)
        spec = self.spec
        try:
            sampler = rank_seed_sampler(
                collectives, seeds.numel(), spec.batch(train), generator,
                train, self.global_seeds, train and spec.drop_last,
                self.batch_limits.get(split))
        except DistributedError as error:
            raise SettingError('mode', str(error)) from None
        return data, seeds, sampler

    def _predict_plan(self, data: Any, on_parts: bool) -> Plan:
        if on_parts and self.collective:
            raise SettingError('dataset', f"mode {self.name!r} predicts on "
                               f"the whole graph: give 'dataset'")
        collectives = self.collectives
        if collectives.world_size == 1:
            return data, None, None
        num_nodes = GraphView.of(data).num_nodes(self.target(data))
        seeds = shard(torch.arange(num_nodes), collectives.rank,
                      collectives.world_size)
        return data, seeds, in_order(seeds.numel(), collectives)

    def loader(self, split: str, generator: torch.Generator,
               placement: Placement = Placement()) -> Loader:
        r"""The loader of :obj:`split` (``'train'``, ``'val'``, ``'test'``,
        ``'predict'``) on this rank, made by the run's :attr:`task`,
        drawing from :obj:`generator`, sampling and returning its batches
        where the run's :obj:`placement` says
        (:meth:`LoadingSpec.placement`; default: the CPU)."""
        return self.task.loader(self, split, generator, placement)

    def target(self, data: Any) -> Optional[str]:
        r"""The node type seeds are drawn of (heterogeneous data)."""
        return target_of(data, None if self.source is None
                         else self.source.schema())

    def train_transform(self, train: bool,
                         sampler: Optional[RankSeedSampler],
                         transform: Any) -> Any:
        r"""The transform of the mode's own loaders (HopGNN adds its loss
        normalisation)."""
        return transform
