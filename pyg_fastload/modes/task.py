r"""What a run trains (:class:`Task`): node-level batches of seed nodes
(:class:`NodeTask`) or link-level batches of label edges with negatives
(:class:`LinkTask`), by the name configs use in :data:`TASKS`. A mode is
given its task by its :class:`~pyg_fastload.modes.LoadingSpec`
(:meth:`LoadingSpec.make_task`); the task opens on the mode's data and
makes the loader of a split from what the mode plans (its data, seeds and
rank sampler). Nothing outside these classes asks which task a run has."""
from __future__ import annotations

from dataclasses import dataclass
from typing import (TYPE_CHECKING, Any, ClassVar, Dict, Optional, Tuple,
                    Type, Union)

import torch
from torch import Tensor

from ..config import SettingError
from ..distributed.collectives import Collectives
from ..distributed.seeds import in_order, rank_seed_sampler, shard
from ..graph.view import GraphView
from ..inference import WholeGraph, WholeGraphLoader
from ..loader import FastLinkNeighborLoader, FastNeighborLoader
from ..placement import Placement
from .link_split import LinkOptions, LinkSplit, link_split

if TYPE_CHECKING:  # the mode hands itself to its task
    from .base import LoadingMode
    from .spec import LoadingSpec

__all__ = ['Task', 'NodeTask', 'LinkTask', 'LinkTraining', 'TASKS',
           'node_times']

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
    def settings(cls, link: Any) -> Optional[LinkOptions]:
        r"""The spec's ``link`` setting for this task, checked (given as
        :class:`LinkOptions`, a dict of its fields or :obj:`None`)."""
        if link is not None:
            raise SettingError('link', f"options of task 'link', not of "
                               f"task {cls.name!r}: set task: link, or "
                               f"leave 'link' out ('link' options need "
                               f"task: link)")
        return None

    @classmethod
    def of(cls, spec: 'LoadingSpec') -> 'Task':
        r"""The task of a run loading by :obj:`spec`."""
        return cls()

    def check(self, mode: 'LoadingMode') -> None:
        r"""Refuses a :obj:`mode` this task cannot run in."""

    #: The ranks' group of their own for layer-wise inference (after
    #: :meth:`open`, where the task infers layer-wise).
    inference: Optional[Collectives] = None

    def open(self, mode: 'LoadingMode') -> None:
        r"""Prepares the task once :obj:`mode` opened its data (every rank
        the same, in the same order: it may build collectives)."""
        if self.infers_layerwise(mode.spec):
            self.inference = mode.collectives.new_stage()

    def infers_layerwise(self, spec: 'LoadingSpec') -> bool:
        r"""Whether a loader gives the whole graph (:class:`WholeGraph`),
        whose layers the ranks compute together."""
        return False

    def loader(self, mode: 'LoadingMode', split: str,
               generator: torch.Generator, placement: Placement) -> Loader:
        r"""The loader of :obj:`split` on this rank of :obj:`mode`."""
        raise NotImplementedError


def _whole_graph(mode: 'LoadingMode', data: Any, seeds: Optional[Tensor],
                 target: Optional[str],
                 collectives: Optional[Collectives]) -> WholeGraphLoader:
    r"""The loader of :obj:`mode`'s whole graph :obj:`data`, its
    :obj:`seeds` (of type :obj:`target`) evaluated layer-wise with the
    run's ``inference`` options, by the ranks of :obj:`collectives`."""
    spec = mode.spec
    return WholeGraphLoader(WholeGraph(
        data, seeds, target, progress=spec.progress, collectives=collectives,
        **spec.inference.kwargs()))


class NodeTask(Task):
    r"""Seed nodes of the labelled node type, with their sampled
    neighbourhoods (for :class:`NodeClassifier`)."""
    name = 'node'

    def infers_layerwise(self, spec: 'LoadingSpec') -> bool:
        return spec.eval == 'layerwise'

    def check(self, mode: 'LoadingMode') -> None:
        spec = mode.spec
        if spec.eval == 'layerwise' and mode.source is None:
            raise SettingError('eval', "'layerwise' evaluates on the whole "
                               "graph: give 'dataset' (not only "
                               "'partitions'); or use eval: sampled")
        if spec.time_attr is None:
            return
        if spec.eval == 'layerwise':
            raise SettingError('eval', "'layerwise' aggregates every "
                               "in-neighbour, later ones too, while "
                               "time_attr samples each seed's past: use "
                               "eval: sampled")
        if mode.temporal_refusal is not None:
            raise SettingError('time_attr', f"{spec.time_attr!r} with mode "
                               f"{mode.name!r}: {mode.temporal_refusal}")

    def loader(self, mode: 'LoadingMode', split: str,
               generator: torch.Generator, placement: Placement
               ) -> Union[FastNeighborLoader, WholeGraphLoader]:
        train = split == 'train'
        data, seeds, sampler = mode.plan(split, generator)
        target = mode.target(data)
        if not train and mode.spec.eval == 'layerwise':  # every in-edge
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
    def settings(cls, link: Any) -> Optional[LinkOptions]:
        if link is None:
            return LinkOptions()
        if isinstance(link, dict):
            known = sorted(LinkOptions.__dataclass_fields__)
            unknown = sorted(set(link) - set(known))
            if unknown:
                raise SettingError('link', f"unknown keys {unknown}; known: "
                                   f"{known}")
            return LinkOptions(**link)
        if not isinstance(link, LinkOptions):
            raise SettingError('link', f"must be a LinkOptions or a dict, "
                               f"got {type(link).__name__}")
        return link

    @classmethod
    def of(cls, spec: 'LoadingSpec') -> 'LinkTask':
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

    def check(self, mode: 'LoadingMode') -> None:
        if mode.spec.eval != 'sampled':
            raise SettingError('eval', f"{mode.spec.eval!r} is for task "
                               f"'node': link batches are evaluated on "
                               f"sampled neighbourhoods (eval: sampled)")
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

    def infers_layerwise(self, spec: 'LoadingSpec') -> bool:
        return True  # every node's embedding, to predict

    def open(self, mode: 'LoadingMode') -> None:
        super().open(mode)
        data = mode.eval_data  # the whole graph, in the dataset's ids
        self.split = link_split(data, self.options, self.seed,
                                mode.spec.time_attr)
        self.graphs = {split: self.split.graph(data, split)
                       for split in ('train', 'test')}
        self.training = mode.link_training(self.split, self.graphs['train'])

    def loader(self, mode: 'LoadingMode', split: str,
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


#: Every task by the name configs use (``data.task``).
TASKS: Dict[str, Type[Task]] = {task.name: task for task in (NodeTask,
                                                             LinkTask)}
