r"""The partitioned modes: ``pagraph`` (each rank trains on its self-reliant
part alone), ``dsp`` (disjoint parts serving the whole graph collectively)
and ``hopgnn`` (the same parts, roots trained where their features live)."""
from __future__ import annotations

from typing import Any, Dict, Optional

import torch
from torch import Tensor
from torch_geometric.data import Data

from ..config import SettingError
from ..distributed import DistributedError
from ..distributed.dsp import DSPRank, open_dsp_rank
from ..distributed.hopgnn import RootRouting
from ..distributed.rank_part import (new_edge_ids, open_rank_part,
                                     read_new_ids)
from ..distributed.seeds import RankSeedSampler
from ..graph.view import GraphView
from ..io.format import sha256_file
from ..partition import PartitionBook
from ..partition.pagraph_link import TASK_HOPS, PartRows, part_links
from ..sampling import FastNeighborSampler, SamplerChoice
from ..partition.part_dirs import (is_hetero_partition,
                                   read_partition_meta)
from .base import LinkTraining, LoadingMode, node_times
from .link_split import LinkSplit, put_edge_times

__all__ = ['PaGraph', 'DSP', 'HopGNN', 'LossNorm']


class LossNorm:
    r"""A batch transform for HopGNN mode: sets ``loss_norm`` (the per-rank
    batch size the summed loss is divided by), then applies
    :obj:`inner`.

    Args:
        batch_size (int): the per-rank batch size.
        inner (Callable, optional): the transform applied after.
    """
    def __init__(self, batch_size: int, inner: Optional[Any] = None):
        self.batch_size = batch_size
        self.inner = inner

    def __call__(self, batch: Data) -> Data:
        batch.loss_norm = self.batch_size
        return batch if self.inner is None else self.inner(batch)


class DatasetIds:
    r"""A batch transform of the loaders reading a heterogeneous
    partition: sets every node type's ``dataset_id``, the dataset's
    type-local id of each node of ``n_id`` (which is in the partition's
    ids), then applies :obj:`inner`. What a model's learnt per-node
    embeddings are looked up by, so that training on the parts and
    evaluating on the dataset read the same rows.

    Args:
        ids (dict): per node type, the dataset id of every id ``n_id``
            holds.
        inner (callable, optional): the transform to apply after.
    """
    def __init__(self, ids: Dict[str, Tensor], inner: Optional[Any] = None):
        self.ids = ids
        self.inner = inner

    def __call__(self, batch: Any) -> Any:
        for node_type, ids in self.ids.items():
            store = batch[node_type]
            if 'n_id' in store:
                store.dataset_id = ids[store.n_id.to(ids.device)].to(
                    store.n_id.device)
        return batch if self.inner is None else self.inner(batch)


class _Partitioned(LoadingMode):
    r"""A mode over one part per rank of :obj:`partitions`."""
    meta: Dict[str, Any]
    #: Whether the partition is of a heterogeneous graph.
    hetero = False
    _dataset_ids: Optional[Dict[str, Tensor]] = None

    @property
    def book(self) -> Any:
        r"""The partition book (after :meth:`open`)."""
        raise NotImplementedError

    def on_parts(self, transform: Optional[Any]) -> Optional[Any]:
        r"""A heterogeneous partition's batches carry every node type's
        ``dataset_id`` (:class:`DatasetIds`): the dataset's ids of their
        nodes."""
        if not self.hetero:
            return transform  # (no learnt embeddings to look up)
        if self._dataset_ids is None:
            book = self.book
            try:
                order = torch.argsort(read_new_ids(self.partitions, book))
            except ValueError as error:
                raise SettingError('partitions', str(error)) from None
            self._dataset_ids = {}
            for node_type in book.node_types:
                first = book.first_id(node_type)
                ids = order[first:first + book.num_nodes[node_type]] - first
                rows = self._row_ids(node_type)
                self._dataset_ids[node_type] = ids if rows is None \
                    else ids[rows]
        return DatasetIds(self._dataset_ids, transform)

    def _row_ids(self, node_type: str) -> Optional[Tensor]:
        r"""The (type-local) new id of every row of :obj:`node_type` that
        batches' ``n_id`` name, where they are not new ids."""
        return None

    def _check_workload(self) -> None:
        spec = self.spec
        sampling_device = spec.pipeline_settings.sampling_device
        if sampling_device != 'cpu':
            raise SettingError('pipeline_settings.sampling_device',
                               f"{sampling_device!r} is for mode "
                               f"'replicated' (mode {self.name!r} samples "
                               f"its parts on the CPU): use sampling_device: "
                               f"cpu")
        try:  # (an unreadable partition: opening it names the fault)
            meta: Optional[Dict[str, Any]] = read_partition_meta(
                self.partitions)
        except ValueError:
            meta = None
        parts = None if meta is None else is_hetero_partition(meta)
        given = None if self.source is None else self.source.is_hetero
        kinds = ('homogeneous', 'heterogeneous')
        if None not in (parts, given) and parts != given:
            raise SettingError(
                'partitions', f"'{self.partitions}' partitions a "
                f"{kinds[parts]} graph, while 'dataset' is "
                f"{kinds[given]}: give the dataset that was partitioned "
                f"(or partition it: pyg-fastload partition DATASET_DIR "
                f"--out PARTS_DIR)")
        self.hetero = hetero = bool(parts or given)
        if hetero and self.source is None:
            raise SettingError(
                'dataset', f"'{self.partitions}' partitions a heterogeneous "
                f"graph: give 'dataset' too (the directory that was "
                f"partitioned), whose node and edge types the model is "
                f"built from and whose graph validation reads")
        if meta is not None:
            self._check_parts(meta)

    def _check_parts(self, meta: Dict[str, Any]) -> None:
        r"""Refuses parts (their ``partition.json`` :obj:`meta`) that
        cannot serve this run's task and sampling."""

    def _check_origin(self) -> None:
        r"""The dataset given for evaluation must be the partitioned one."""
        meta = None if self.source is None else self.source.meta_file()
        if meta is None:
            return
        origin = self.meta['dataset']
        if sha256_file(meta) != origin['meta_sha256']:
            raise SettingError('dataset', f"'{meta.parent}' is not the "
                               f"dataset '{self.partitions}' was partitioned "
                               f"from ({origin.get('path', origin['name'])})")


class PaGraph(_Partitioned):
    r"""Rank ``r`` opens only PaGraph part ``r`` (relabelled to its own
    rows) and trains on its own seeds: sampling never leaves the part, so
    only gradients cross ranks. Evaluation reads :obj:`source` if given
    (seeds sharded), else each part's own nodes. Task ``'link'`` trains
    the label edges into each part's own nodes, negatives drawn among the
    nodes whose trees the part holds, on parts made for it
    (:mod:`~pyg_fastload.partition.pagraph_link`)."""
    name = 'pagraph'
    partition_method = 'pagraph'
    _book: Optional[PartitionBook] = None

    @property
    def book(self) -> Any:
        return self._book

    def _row_ids(self, node_type: Optional[str]) -> Optional[Tensor]:
        return self.data[0].get_tensor(group_name=node_type,
                                       attr_name='global_id', index=None)

    @property
    def global_seeds(self) -> bool:
        return False

    def _sampler_refusal(self, choice: SamplerChoice) -> Optional[str]:
        if choice.reach(len(self.spec.num_neighbors)) is None:
            return ("it draws its batches anywhere in the graph, and a "
                    "PaGraph part holds its training nodes' neighbourhoods "
                    "alone: use mode 'replicated' (or sampler: saint_rw, "
                    "whose walks stay within them)")
        return super()._sampler_refusal(choice)

    def _check_parts(self, meta: Dict[str, Any]) -> None:
        spec, task = self.spec, self.task.name
        train = spec.sampler.reach(len(spec.num_neighbors))
        depth = max(train, len(spec.fanouts(False))
                    if self.source is None else 0)
        made_for, hops = meta.get('task', 'node'), meta.get('num_hops')
        fix = (f"partition for it (pyg-fastload partition DATASET_DIR "
               f"--method pagraph --task {task} --num-hops {depth} "
               f"--num-parts {meta.get('num_parts')} --out PARTS_DIR)")
        if made_for != task:
            raise SettingError('partitions', f"'{self.partitions}' holds "
                               f"PaGraph parts for task {made_for!r}, and "
                               f"this run's task is {task!r}: {fix}")
        if isinstance(hops, int) and depth > hops:
            walk = '' if train == len(spec.num_neighbors) else (
                f" ({spec.sampler.describe()}: a walk's steps and the "
                f"in-edges of its last node)")
            raise SettingError('num_neighbors' if not walk else 'sampler',
                               f"{depth} hops sampled from the PaGraph "
                               f"parts in '{self.partitions}'{walk}, which "
                               f"hold {hops}-hop neighbourhoods: the deeper "
                               f"hops would miss neighbours; sample at most "
                               f"{hops} hops, or {fix}")

    def _open_parts(self, device: torch.device) -> None:
        spec = self.spec
        try:
            features, graph, self._book, self.meta = open_rank_part(
                self.partitions, self.collectives, spec.feature_cache,
                method='pagraph', local=True, device=device,
                scores=spec.scores(), verify=spec.verify)
        except (DistributedError, ValueError) as error:
            raise SettingError('partitions', str(error)) from None
        self.data = (features, graph)
        self._check_origin()

    def link_training(self, split: LinkSplit, graph: Any) -> LinkTraining:
        r"""The training links into this part's own nodes, sampled inside
        the part over the split's training edges (on a heterogeneous graph
        those of the supervised relation and its reverse, every other
        relation as the part holds it), negatives drawn among the nodes
        whose trees the part holds (``negative_weight``). Ids are the
        part's rows (the split was drawn in the dataset's)."""
        part_graph = self.data[1]
        book, part = self.book, self.collectives.rank
        try:
            new_id = read_new_ids(self.partitions, book)
        except ValueError as error:
            raise SettingError('partitions', str(error)) from None
        edge_type = None if split.relation is None else split.relation[0]
        types = [None] if edge_type is None else book.node_types
        books = {t: book.of_group(t) for t in types}
        rows = PartRows(
            part_graph.topology,
            {t: self._row_ids(t) for t in types},
            {t: b.part_range(part)[1] - b.part_range(part)[0]
             for t, b in books.items()},
            {t: b.num_nodes for t, b in books.items()})
        try:
            links = part_links(
                rows, self.meta['num_hops'] + TASK_HOPS['link'],
                len(self.spec.num_neighbors), split.relation,
                new_edge_ids(new_id, book, split.message_passing('train'),
                             edge_type),
                new_edge_ids(new_id, book, split.supervision('train')[0],
                             edge_type))
        except ValueError as error:
            raise SettingError('link', f"mode 'pagraph', part {part}: "
                               f"{error}") from None
        data = GraphView.of(self.data).with_edges(links.edge_index)
        passing_time = split.passing_time('train')
        if passing_time is not None:  # each kept edge's
            put_edge_times(data, {e: passing_time[kept] for e, kept in
                                  links.passing.items()}, split.time_attr)
        label_time = split.label_time('train')
        return LinkTraining(
            data, links.label_index, shared=False,
            label_time=None if label_time is None
            else label_time[links.labels],
            negative_weight=links.negative_weight)


class DSP(_Partitioned):
    r"""Rank ``r`` opens part ``r`` of a disjoint partition; the ranks serve
    the whole graph together: collective sampling and one partitioned
    feature cache, each pipelined stage on a process group of its own (or
    one group in a leader's launch order)."""
    name = 'dsp'
    partition_method = 'metis'
    collective = True
    option_groups = ('dsp', 'cold')
    #: HopGNN: the whole topology on every rank, a root router.
    feature_centric = False
    dsp: Optional[DSPRank] = None

    @property
    def book(self) -> Any:
        return self.dsp.book

    @classmethod
    def accepts_partition(cls, method: str) -> bool:
        return method != 'pagraph'  # any disjoint partition

    @property
    def global_seeds(self) -> bool:
        return self.spec.mode_options.seeds == 'global'

    def _check_workload(self) -> None:
        super()._check_workload()
        if self.hetero and self.spec.mode_options.sampling == 'layer':
            raise SettingError('mode_options', "sampling: layer (DSP's "
                               "layer-wise draw) is for homogeneous graphs; "
                               "a heterogeneous one is sampled node-wise "
                               "(sampling: node)")

    def _sampler_refusal(self, choice: SamplerChoice) -> Optional[str]:
        r"""Why this mode's own hops (DSP's collective sampling, HopGNN's
        routing) cannot draw with :obj:`choice`, if they cannot."""
        if not choice.hop_wise:
            elsewhere = "mode 'replicated'" if choice.reach(
                len(self.spec.num_neighbors)) is None else \
                "mode 'replicated' or 'pagraph'"
            return (f"{self.name}'s ranks sample hop by hop together, "
                    f"which a sampler that is not hop-wise (a "
                    f"FastNeighborSampler subclass drawing through pick; "
                    f"GraphSAINT draws whole subgraphs) cannot join: use "
                    f"{elsewhere}, or sampler: random_walk, whose walks "
                    f"the ranks draw together")
        if choice.options.get('importance_sampling'):
            return ("LABOR-*'s vertex probabilities come from iterations "
                    "over a hop's whole frontier, which the ranks split "
                    "between them (each sees its share): use "
                    "importance_sampling: 0 (LABOR-0), or mode "
                    "'replicated' or 'pagraph'")
        if self.spec.mode_options.sampling == 'layer' and \
                choice.kind is not FastNeighborSampler:
            return ("mode_options.sampling: layer draws DSP's layer-wise "
                    "picks itself: use sampler: neighbor, or sampling: "
                    "node")
        return super()._sampler_refusal(choice)

    @property
    def temporal_refusal(self) -> Optional[str]:
        if self.spec.mode_options.sampling == 'layer':
            return ("DSP's layer-wise draw (mode_options.sampling: layer) "
                    "picks over a hop's whole frontier, not each seed's "
                    "past: use sampling: node")
        return super().temporal_refusal

    def _sampler_options(self) -> Dict[str, Any]:
        r"""The collective samplers' options: layer-wise or node-wise,
        in time with ``time_attr`` (:meth:`_time_options`)."""
        return {'layer_wise': self.spec.mode_options.sampling == 'layer',
                **self._time_options()}

    def _time_options(self) -> Dict[str, Any]:
        r"""The samplers' options for ``time_attr``: this part's rows of
        that node array, which the ranks share once; on a heterogeneous
        partition those of every node type that has it (the seeds' type
        must; a type without it has no time constraint, as in pyg-lib and
        mode 'replicated')."""
        spec, dsp = self.spec, self.dsp
        if spec.time_attr is None or self.task.timed != 'node':
            return {}  # (link times: the link training's own sampler)

        def own(node_type: Optional[str], rows: Optional[Tensor]) -> Tensor:
            start, end = dsp.features.part_range(node_type)
            where = f'part {dsp.part}' if node_type is None else \
                f"part {dsp.part}'s {node_type!r} nodes"
            return node_times(rows, end - start, spec.time_attr, where)

        if not self.hetero:
            node_time: Any = own(None, dsp.local_rows(spec.time_attr))
        else:
            held = {t: dsp.local_rows(spec.time_attr, t)
                    for t in dsp.book.node_types}
            node_time = {t: own(t, rows) for t, rows in held.items()
                         if rows is not None or t == dsp.target}
        return {'temporal_strategy': spec.temporal_strategy,
                'node_time': node_time}

    def _open_parts(self, device: torch.device) -> None:
        spec = self.spec
        try:
            self.dsp = open_dsp_rank(
                self.partitions, self.collectives, spec.feature_cache,
                device=device, scores=spec.scores(),
                launch_order=spec.mode_options.launch_order,
                feature_centric=self.feature_centric, verify=spec.verify,
                cold_rows=spec.mode_options.cold_rows,
                remote=spec.mode_options.remote)
            self.meta = self.dsp.meta
            self.data = self.dsp.data
            options = dict(self._sampler_options(), choice=spec.sampler)
            self.samplers = {
                'train': self.dsp.sampler(spec.num_neighbors, **options,
                                          **self._train_options()),
                'eval': self.dsp.sampler(spec.fanouts(False), **options)}
        except SettingError:
            raise  # (the sampler options': they name their key)
        except (DistributedError, ValueError) as error:
            raise SettingError('partitions', str(error)) from None
        self._check_origin()

    def _train_options(self) -> Dict[str, Any]:
        return {}

    def _own_seeds(self, split: str) -> Tensor:
        return self.dsp.seeds(split, self.global_seeds)

    def link_training(self, split: LinkSplit, graph: Any) -> LinkTraining:
        r"""The links whose source this rank owns, sampled collectively
        over every part's training message-passing edges (each part keeps
        its nodes' in-edges; on a heterogeneous graph the supervised
        relation and its reverse hold those, the other relations every
        edge), their features from the partitioned cache; negatives are
        drawn over the whole graph. Ids are the partition's new ids (the
        split was drawn in the dataset's, the same on every rank). In time,
        the collective sampler holds the part's edges with their times:
        the split's for the supervised relation (and its reverse), every
        other relation's edge array of that name."""
        dsp = self.dsp
        book, part = dsp.book, dsp.part
        try:
            new_id = read_new_ids(self.partitions, book)
        except ValueError as error:
            raise SettingError('partitions', str(error)) from None
        edge_type, reverse = split.relation or (None, None)
        passing = new_edge_ids(new_id, book, split.message_passing('train'),
                               edge_type)
        options = self._sampler_options()
        passing_time = split.passing_time('train')
        relations = [(edge_type, passing)]
        if reverse is not None:
            relations.append((reverse, passing.flip(0)))
        replaced: Dict[Any, Tensor] = {}
        times: Dict[Any, Tensor] = {}  # of the edges this part keeps
        for relation, edges in relations:
            if passing_time is not None:
                start, end = book.of_group(
                    None if relation is None else relation[2]).part_range(
                    part)
                mine = (edges[1] >= start) & (edges[1] < end)
                edges, times[relation] = edges[:, mine], passing_time[mine]
            replaced[relation] = edges
        topology = dsp.topology_with(replaced)
        if passing_time is not None:
            options.update(edge_time=self._edge_times(topology, times),
                           temporal_strategy=self.spec.temporal_strategy)
        sampler = dsp.sampler(self.spec.num_neighbors, topology,
                              choice=self.spec.sampler, **options)
        labels = new_edge_ids(new_id, book, split.supervision('train')[0],
                              edge_type)
        source_type = None if edge_type is None else edge_type[0]
        own = book.of_group(source_type).owner(labels[0]) == part
        label_time = split.label_time('train')
        return LinkTraining(self.data, labels[:, own], sampler, shared=False,
                            label_time=None if label_time is None
                            else label_time[own])

    def _edge_times(self, topology: Any, times: Dict[Any, Tensor]) -> Any:
        r"""The collective sampler's ``edge_time``: :obj:`times` (the
        replaced relations' edges' times, by relation: :obj:`None` on a
        homogeneous graph) in :obj:`topology`'s CSC order, and on a
        heterogeneous graph every other relation's edge array
        ``time_attr`` of the part, where it has one (else no time
        constraint, as in pyg-lib)."""
        if None in times:
            return topology.csc_order(times[None])
        stored = self.dsp.graph.edge_array
        out = {e: stored(self.spec.time_attr, e) for e in topology.edge_types
               if e not in times}
        out.update({e: topology.relation_topology(e).csc_order(t)
                    for e, t in times.items()})
        return {e: t for e, t in out.items() if t is not None}

    def neighbor_sampler(self, train: bool) -> Optional[Any]:
        return self.samplers['train' if train else 'eval']

    def close(self) -> None:
        r"""Stops DSP's launch coordinator (every rank)."""
        if self.dsp is not None:
            self.dsp.close()


class HopGNN(DSP):
    r"""HopGNN's feature-centric training on DSP's parts: every rank draws
    from the global training set, roots go to the rank holding their
    features, which trains their micrographs in time steps (the same update
    as ``replicated``); ``mode_options.merges``/``merge_search`` merge time
    steps."""
    name = 'hopgnn'
    feature_centric = True
    option_groups = ('hopgnn', 'cold')
    link_refusal = ("HopGNN routes each seed node to the rank holding its "
                    "features and trains its micrograph there; a label "
                    "edge joins two nodes (and its negatives) that other "
                    "ranks may own, which that routing does not serve yet: "
                    "use mode 'dsp'")

    @property
    def global_seeds(self) -> bool:
        return True

    def _sampler_refusal(self, choice: SamplerChoice) -> Optional[str]:
        if getattr(choice.kind, 'walks', False):
            return ("HopGNN's time steps split a batch by its per-hop node "
                    "counts, which a random walk's batch does not keep (a "
                    "walker revisits nodes): use mode 'dsp' or "
                    "'replicated'")
        return super()._sampler_refusal(choice)

    def _sampler_options(self) -> Dict[str, Any]:
        return self._time_options()  # (micrographs: node-wise)

    def _train_options(self) -> Dict[str, Any]:
        options = self.spec.mode_options
        return {'merges': options.merges,
                'merge_search': options.merge_search}

    def train_transform(self, train: bool,
                         sampler: Optional[RankSeedSampler],
                         transform: Any) -> Any:
        router = self.samplers['train']
        if not train or not isinstance(router, RootRouting):
            return transform
        batch_size = self.spec.batch_size
        if sampler is not None:  # the merge search's epochs
            full, part = divmod(len(sampler), batch_size)
            router.batches_per_epoch = full + (
                1 if part and not self.spec.drop_last else 0)
        return LossNorm(batch_size, transform)
