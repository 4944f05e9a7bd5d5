r"""What every loading mode answers (:class:`LoadingMode`): open this rank's
stores and samplers, the seeds of a split, the loader of a split, and
teardown; and what a run trains (:class:`Task`): node-level batches of
seed nodes (:class:`NodeTask`) or link-level batches of label edges with
negatives (:class:`LinkTask`), by the name configs use in :data:`TASKS`.
The mode makes its task from its :class:`~pyg_fastload.modes.LoadingSpec`;
the task opens on the mode's data and makes the loader of a split from what
the mode plans (its data, seeds and rank sampler). The two hand themselves
to each other, so they share this module. A mode is one subclass; nothing
outside these classes compares mode names or asks which task a run has."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Dict, Optional, Tuple, Type, Union

import torch
from torch import Tensor

from ..config import SettingError
from ..distributed import Collectives, DistributedError
from ..distributed.collectives import digest
from ..distributed.seeds import (RankSeedSampler, in_order,
                                 rank_seed_sampler, shard)
from ..graph.view import GraphView
from ..inference import WholeGraph, WholeGraphLoader
from ..loader import FastLinkNeighborLoader, FastNeighborLoader
from ..partition.part_dirs import feature_source, read_partition_meta
from ..placement import Placement
from ..sampling import SamplerChoice
from .link_split import LinkOptions, LinkSplit, link_split
from .schema import target_of
from .source import DatasetSource, directory_metadata, split_seeds
from .spec import LoadingSpec, ModeOptions

__all__ = ['LoadingMode', 'Plan', 'Task', 'NodeTask', 'LinkTask',
           'LinkTraining', 'TASKS', 'node_times']

#: The groups of :class:`ModeOptions`: their fields and the mode they
#: belong to.
_OPTION_GROUPS = {'dsp': (('sampling', 'seeds'), "mode 'dsp'"),
                  'hopgnn': (('merges', 'merge_search'), "mode 'hopgnn'"),
                  'cold': (('cold_rows', 'remote'),
                           "modes 'dsp' and 'hopgnn'")}

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
        self.task: Task = TASKS[spec.task].of(spec)
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


Loader = Union[FastNeighborLoader, FastLinkNeighborLoader, WholeGraphLoader]


def node_times(time: Optional[Tensor], num_nodes: int, time_attr: str,
               where: str) -> Tensor:
    r""":obj:`time`, the node array :obj:`time_attr` of :obj:`where`
    (:obj:`None`: it has none), as one time per node of its
    :obj:`num_nodes`; else a :class:`SettingError` naming ``time_attr``."""
    if time is None or time.numel() != num_nodes:
        held = 'no such node array' if time is None else \
            f"{list(time.shape)} entries for {num_nodes} nodes"
        raise SettingError('time_attr', f"{time_attr!r} is not a node array "
                           f"of {where} with one time per node ({held}): "
                           f"name the dataset's array of node times (a "
                           f"Data's 'time' attribute is kept by "
                           f"'pyg-fastload prepare --pyg-data FILE.pt'), "
                           f"or leave time_attr out")
    return time.reshape(-1)


class Task:
    r"""What the batches of a run are: one subclass per task."""
    #: The name ``FastLoadDataModule(task=...)`` and configs use.
    name: ClassVar[str] = ''
    #: Whether the dataset must carry node labels (a heterogeneous graph's
    #: labelled type is then its target).
    labelled: ClassVar[bool] = True
    #: What ``time_attr`` times: seed ``'node'``s (a node array) or label
    #: ``'edge'``s (an edge array, which the samplers read from the
    #: task's own graphs).
    timed: ClassVar[str] = 'node'

    @classmethod
    def of(cls, spec: LoadingSpec) -> 'Task':
        r"""The task of a run loading by :obj:`spec`."""
        return cls()

    def check(self, mode: LoadingMode) -> None:
        r"""Refuses a :obj:`mode` this task cannot run in."""

    #: The ranks' group of their own for layer-wise inference (after
    #: :meth:`open`, where the task infers layer-wise).
    inference: Optional[Collectives] = None

    def open(self, mode: LoadingMode) -> None:
        r"""Prepares the task once :obj:`mode` opened its data (every rank
        the same, in the same order: it may build collectives)."""
        if self.infers_layerwise(mode.spec):
            self.inference = mode.collectives.new_stage()

    def infers_layerwise(self, spec: LoadingSpec) -> bool:
        r"""Whether a loader gives the whole graph (:class:`WholeGraph`),
        whose layers the ranks compute together."""
        return False

    def loader(self, mode: LoadingMode, split: str,
               generator: torch.Generator, placement: Placement) -> Loader:
        r"""The loader of :obj:`split` on this rank of :obj:`mode`."""
        raise NotImplementedError


def _whole_graph(mode: LoadingMode, data: Any, seeds: Optional[Tensor],
                 target: Optional[str],
                 collectives: Optional[Collectives]) -> WholeGraphLoader:
    r"""The loader of :obj:`mode`'s whole graph :obj:`data`, its
    :obj:`seeds` (of type :obj:`target`) evaluated layer-wise with the
    run's ``inference`` options, by the ranks of :obj:`collectives`."""
    spec = mode.spec
    return WholeGraphLoader(WholeGraph(
        data, seeds, target, progress=spec.progress, collectives=collectives,
        **spec.evaluation.inference.kwargs()))


class NodeTask(Task):
    r"""Seed nodes of the labelled node type, with their sampled
    neighbourhoods (for :class:`NodeClassifier`)."""
    name = 'node'

    def infers_layerwise(self, spec: LoadingSpec) -> bool:
        return spec.evaluation.method == 'layerwise'

    def check(self, mode: LoadingMode) -> None:
        spec = mode.spec
        method = spec.evaluation.method
        if method == 'layerwise' and mode.source is None:
            raise SettingError('evaluation.method', "'layerwise' evaluates "
                               "on the whole graph: give 'dataset' (not "
                               "only 'partitions'); or use method: sampled")
        if spec.time_attr is None:
            return
        if method == 'layerwise':
            raise SettingError('evaluation.method', "'layerwise' aggregates "
                               "every in-neighbour, later ones too, while "
                               "time_attr samples each seed's past: use "
                               "method: sampled")
        if mode.temporal_refusal is not None:
            raise SettingError('time_attr', f"{spec.time_attr!r} with mode "
                               f"{mode.name!r}: {mode.temporal_refusal}")

    def loader(self, mode: LoadingMode, split: str,
               generator: torch.Generator, placement: Placement
               ) -> Union[FastNeighborLoader, WholeGraphLoader]:
        train = split == 'train'
        data, seeds, sampler = mode.plan(split, generator)
        target = mode.target(data)
        if not train and self.infers_layerwise(mode.spec):  # every in-edge
            return _whole_graph(mode, data, seeds, target, self.inference)
        extra: Dict[str, Any] = {}
        if sampler is not None:
            extra['sampler'] = sampler
        spec = mode.spec
        transform = spec.transform()
        neighbor_sampler = None
        if data is mode.data:  # the rank's own (the dataset's: its n_id)
            transform = mode.on_parts(transform)
            neighbor_sampler = mode.neighbor_sampler(train)
        if neighbor_sampler is not None:  # the mode's (times of its own)
            extra['neighbor_sampler'] = neighbor_sampler
            transform = mode.train_transform(train, sampler, transform)
        elif spec.time_attr is not None:  # the loader reads them
            view = GraphView.of(data)
            node_times(view.node_attr(spec.time_attr, target),
                       view.num_nodes(target), spec.time_attr, 'the dataset')
        if target is not None:  # the labelled type's seeds
            seeds = (target, seeds)
        return FastNeighborLoader(
            data, input_nodes=seeds, shuffle=train and sampler is None,
            drop_last=train and spec.drop_last and sampler is None,
            generator=generator, transform=transform,
            device=placement.batches, sampling_device=placement.sampling,
            **{**spec.loader_kwargs(train), **extra})


@dataclass
class LinkTraining:
    r"""What a rank trains links on (:meth:`LoadingMode.link_training`).

    Attributes:
        data: the graph the training loader reads.
        label_index (torch.Tensor): ``[2, E]`` training label edges in its
            ids.
        neighbor_sampler (optional): the sampler to draw with (the mode's
            own, e.g. DSP's collective sampler), else one over
            :attr:`data`.
        shared (bool): every rank holds all label edges and takes a share
            (else each its own).
        label_time (torch.Tensor, optional): the time of every label edge
            of :attr:`label_index` (``time_attr``).
        negative_weight (tuple, optional): the weight of every node of the
            label edges' source and of their destination type in
            :attr:`data` as a negative (PyG's ``NegativeSampling``
            ``src_weight``, ``dst_weight``; :obj:`None`: uniform over
            all).
    """
    data: Any
    label_index: Tensor
    neighbor_sampler: Optional[Any] = None
    shared: bool = True
    label_time: Optional[Tensor] = None
    negative_weight: Optional[Tuple[Tensor, Tensor]] = None


class LinkTask(Task):
    r"""Label edges with negatives through
    :class:`~pyg_fastload.FastLinkNeighborLoader` (for
    :class:`LinkPredictor`): the graph's links split as PyG's
    ``RandomLinkSplit`` does (:class:`LinkSplit`, the same on every rank
    under :obj:`seed`), training links shared across the ranks as
    training seeds are, evaluation edges sharded with their negatives.
    With the spec's ``time_attr`` (an edge array of a dataset directory,
    of the supervised relation on a heterogeneous one; modes
    ``'replicated'``, ``'dsp'`` and ``'pagraph'``) every label edge
    carries its edge's time (``edge_label_time``; a negative its
    positive's) and no sampled edge is later than it
    (:meth:`LinkSplit.label_time`).

    Args:
        options (LinkOptions): negatives, split ratios and evaluation.
        seed (int): the seed of the split and the evaluation negatives.
    """
    name = 'link'
    labelled = False
    timed = 'edge'

    @classmethod
    def of(cls, spec: LoadingSpec) -> 'LinkTask':
        return cls(spec.link, spec.seed)

    def __init__(self, options: LinkOptions, seed: int):
        self.options = options
        self.seed = seed
        #: The split of the links (after :meth:`open`).
        self.split: Optional[LinkSplit] = None
        #: The message-passing graphs of training/validation and of test.
        self.graphs: Dict[str, Any] = {}
        #: What this rank trains on (after :meth:`open`).
        self.training: Optional[LinkTraining] = None

    def check(self, mode: LoadingMode) -> None:
        method = mode.spec.evaluation.method
        if method != 'sampled':
            raise SettingError('evaluation.method', f"{method!r} is for "
                               f"task 'node': link batches are evaluated "
                               f"on sampled neighbourhoods (method: "
                               f"sampled)")
        if mode.link_refusal is not None:
            raise SettingError('mode', f"task 'link' with mode "
                               f"{mode.name!r}: {mode.link_refusal}")
        if not mode.spec.sampler.hop_wise:
            raise SettingError('sampler', f"{mode.spec.sampler.describe()} "
                               f"with task 'link': it draws subgraphs whose "
                               f"nodes carry the loss, and a link batch is "
                               f"the neighbourhood of its label edges, drawn "
                               f"hop by hop: use sampler: neighbor, labor or "
                               f"random_walk")
        if mode.partition_method is not None and mode.source is None:
            raise SettingError('dataset', f"task 'link' with mode "
                               f"{mode.name!r} draws the link split over "
                               f"the whole graph and evaluates on it: give "
                               f"'dataset' (the directory that was "
                               f"partitioned) besides 'partitions'")
        if mode.collective and self.options.strict_negatives:
            raise SettingError('link.strict_negatives', f"mode "
                               f"{mode.name!r} draws negatives over the "
                               f"whole graph while each rank holds its "
                               f"part's edges only, so no rank can tell a "
                               f"drawn pair from an edge: leave it out")
        if mode.spec.time_attr is not None and \
                mode.temporal_refusal is not None:
            raise SettingError('time_attr', f"{mode.spec.time_attr!r} with "
                               f"mode {mode.name!r}: "
                               f"{mode.temporal_refusal}")

    def infers_layerwise(self, spec: LoadingSpec) -> bool:
        return True  # every node's embedding, to predict

    def open(self, mode: LoadingMode) -> None:
        super().open(mode)
        data = mode.eval_data  # the whole graph, in the dataset's ids
        self.split = link_split(data, self.options, self.seed,
                                mode.spec.time_attr)
        self.graphs = {split: self.split.graph(data, split)
                       for split in ('train', 'test')}
        self.training = mode.link_training(self.split, self.graphs['train'])

    def loader(self, mode: LoadingMode, split: str,
               generator: torch.Generator,
               placement: Placement) -> Loader:
        if split == 'predict':  # every node's embedding, over every edge
            data, seeds, _ = mode.plan(split, generator)
            return _whole_graph(mode, data, seeds, mode.target(data),
                                self.inference)
        links = self.split
        spec = mode.spec
        train = split == 'train'
        data = self.graphs['test' if split == 'test' else 'train']
        label_index, label = links.supervision(split)
        label_time = links.label_time(split)  # in time: every label edge's
        collectives = mode.collectives
        extra: Dict[str, Any] = {}
        batch = spec.batch(train)
        if train:  # where this rank trains: the whole graph, or its part
            training = self.training
            data, label_index = training.data, training.label_index
            label_time = training.label_time
            if training.neighbor_sampler is not None:
                extra['neighbor_sampler'] = training.neighbor_sampler
        else:  # whole groups (an edge and its negatives) per batch
            group = links.group
            batch = max(1, batch // group) * group
        if collectives.world_size > 1:
            if train:
                extra['sampler'] = rank_seed_sampler(
                    collectives, label_index.size(1), batch, generator, True,
                    training.shared, spec.drop_last)
            else:
                groups = shard(torch.arange(label_index.size(1) // group),
                               collectives.rank, collectives.world_size)
                index = (groups.view(-1, 1) * group +
                         torch.arange(group)).view(-1)
                label_index, label = label_index[:, index], label[index]
                if label_time is not None:
                    label_time = label_time[index]
                # in order (a DistributedSampler: Lightning keeps it)
                extra['sampler'] = in_order(index.numel(), collectives)
        kwargs = spec.loader_kwargs(train)
        kwargs['batch_size'] = batch
        if train:
            kwargs.update(self.options.loader_kwargs(
                self.training.negative_weight))
        if links.relation is not None:  # the supervised edge type's edges
            label_index = (links.relation[0], label_index)
        return FastLinkNeighborLoader(
            data, edge_label_index=label_index, edge_label=label,
            edge_label_time=label_time,
            shuffle=train and 'sampler' not in extra,
            drop_last=train and spec.drop_last and 'sampler' not in extra,
            generator=generator, transform=mode.on_parts(spec.transform())
            if train else spec.transform(),
            device=placement.batches, sampling_device=placement.sampling,
            **{**kwargs, **extra})


#: Every task by the name configs use (``data.task``; the spec checks the
#: name against :data:`~pyg_fastload.modes.spec.TASK_NAMES`).
TASKS: Dict[str, Type[Task]] = {task.name: task for task in (NodeTask,
                                                             LinkTask)}
