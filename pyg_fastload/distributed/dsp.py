r"""DSP and HopGNN modes on one rank: its part of a (METIS) partition, the
features of the whole graph through one partitioned cache (its own part's
hottest rows in its tiers, every other row from its owner: remote cache,
then the owner's storage), and the mode's samplers: DSP's collective
samplers (over every relation of a heterogeneous partition, every node
type's rows in the one cache), or HopGNN's root router over the whole
topology. Sampling and
feature loading run on process groups of their own (or one, in a leader's
launch order), so the pipeline's stages and DDP never interleave their
collectives."""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Type, Union

import torch
from torch import Tensor

from ..caching import Scores
from ..config import FeatureCache
from ..graph import CSCTopology, HeteroTopology
from ..graph.hetero_topology import EdgeType
from ..graph.kind import is_topology
from ..partition import HeteroPartitionBook, PartitionBook
from ..partition.part_dirs import full_topology, is_hetero_partition
from ..sampling import SamplerChoice
from ..storage import CSCGraphStore
from .cold_rows import ColdRows
from .collectives import Collectives
from .hopgnn import HeteroRootRouter, RootRouter, RootRouting
from .launch_order import LaunchCoordinator
from .rank_part import open_rank_part
from .remote import PartitionedFeatureStore
from .requests import REMOTE_MODES, RequestService
from .collective_sampling import (CollectiveHops, CollectiveSampler,
                                  HeteroCollectiveSampler)

__all__ = ['DSPRank', 'open_dsp_rank', 'LAUNCH_ORDERS']

#: How :func:`open_dsp_rank` keeps concurrent stages' collectives apart.
LAUNCH_ORDERS = ('groups', 'coordinator')


@dataclass
class DSPRank:
    r"""What one DSP or HopGNN (:obj:`feature_centric`) rank serves:
    ``data`` is the ``(feature store, graph store)`` pair a
    :class:`~pyg_fastload.FastNeighborLoader` takes (with a
    :meth:`sampler`), ids are the partition's new ids (typed on a
    heterogeneous partition, whose seeds are of node type
    :attr:`target`). Made by :func:`open_dsp_rank`.

    Attributes:
        features (PartitionedFeatureStore): the rows of every part, this
            rank's local, the others' fetched from their owners.
        graph: the graph store of this rank's part (HopGNN: of the whole
            topology).
        book (PartitionBook or HeteroPartitionBook): who owns which new id.
        part (int): the part this rank owns (its rank).
        sampling (Collectives): the sampling stage's collectives.
        fetching (Collectives): the feature loading stage's collectives.
        coordinator (LaunchCoordinator, optional): the leader-ordered
            launch of both stages' collectives (``launch_order=
            'coordinator'``).
        feature_centric (bool): HopGNN's rank rather than DSP's.
        meta (dict, optional): the partition's ``partition.json``.
        sampler_kind (type): the mode's sampler of the partition's kind of
            graph: DSP's collective sampler or HopGNN's root router.
        target (str, optional): the node type seeds are of (a
            heterogeneous partition's labelled type).
        requests (RequestService, optional): the request service of the
            remote rows and DSP's frontiers (``remote='async'``);
            :obj:`None`: collectives.
    """
    features: PartitionedFeatureStore
    graph: object
    book: Union[PartitionBook, HeteroPartitionBook]
    part: int
    sampling: Collectives
    fetching: Collectives
    coordinator: Optional[LaunchCoordinator] = None
    feature_centric: bool = False
    meta: Optional[dict] = None  # partition.json
    sampler_kind: Type[Any] = CollectiveSampler
    target: Optional[str] = None
    requests: Optional[RequestService] = None

    @property
    def data(self) -> tuple:
        return self.features, self.graph

    def sampler(self, num_neighbors: List[int],
                topology: Optional[CSCTopology] = None,
                choice: Optional[SamplerChoice] = None,
                **kwargs: object) -> Union[CollectiveHops, RootRouting]:
        r"""A collective sampler, or HopGNN's root router (a collective:
        every rank builds its samplers in the same order), over the rank's
        part or over :obj:`topology` (the part with fewer edges, e.g. a
        link split's message-passing ones), drawing each hop with the
        ``pick`` of :obj:`choice` (a hop-wise sampler; default: node-wise
        neighbour sampling)."""
        choice = SamplerChoice.of(choice)
        kind = choice.compose(self.sampler_kind,
                              is_topology(self.graph.topology, hetero=True))
        if not self.feature_centric:  # DSP's frontiers: by request too
            kwargs = {'requests': self.requests, **kwargs}
        return kind(self.graph.topology if topology is None else topology,
                    self.book, self.part, self.sampling, num_neighbors,
                    **kwargs, **choice.options)

    def topology_with(self, edges: Dict[Optional[EdgeType], Tensor]
                      ) -> Union[CSCTopology, HeteroTopology]:
        r"""The rank's part whose relations in :obj:`edges` (the key
        :obj:`None`: a homogeneous graph's edges) hold only those of the
        given edges (``[2, E]``, new ids) whose destination the part owns
        (e.g. a link split's message-passing edges); every other relation
        as it is."""
        def owned(edges: Tensor, dst_type: Optional[str],
                  num_sources: int) -> CSCTopology:
            src, dst = edges
            start, end = self.book.of_group(dst_type).part_range(self.part)
            mine = (dst >= start) & (dst < end)
            return CSCTopology.from_edge_index(
                torch.stack([src[mine], dst[mine] - start]), end - start,
                num_sources=num_sources)

        if None in edges:
            return owned(edges[None], None, self.book.num_nodes)
        topology = self.graph.topology
        relations = {
            e: owned(edges[e], e[2], self.book.num_nodes[e[0]])
            if e in edges else topology.relation_topology(e)
            for e in topology.edge_types}
        return HeteroTopology.from_csc(self.book.num_nodes, relations)

    def close(self) -> None:
        r"""Stops the request service (once every rank closed its) and the
        launch coordinator, if any (every rank calls it)."""
        if self.requests is not None:
            self.requests.close()
        if self.coordinator is not None:
            self.coordinator.close()
            self.coordinator = None
        self.features.close()

    def local_rows(self, name: str, node_type: Optional[str] = None
                   ) -> Optional[Tensor]:
        r"""Node array :obj:`name` of :obj:`node_type` (default: the seeds'
        type) for the nodes this part owns, in new-id order; :obj:`None` if
        the part has no such array."""
        rows = self.features.local.get_tensor(
            group_name=node_type or self.target, attr_name=name, index=None)
        return None if rows is None else torch.as_tensor(rows)

    def seeds(self, split: str, everyone: Optional[bool] = None) -> Tensor:
        r"""The seeds of :obj:`split` in new ids: this rank's own (DSP), or
        :obj:`everyone`'s (default for HopGNN, which draws from the global
        set; a collective)."""
        mask = self.local_rows(f'{split}_mask')
        start, _ = self.features.part_range(self.target)
        mine = mask.bool().nonzero().view(-1) + start
        if not (self.feature_centric if everyone is None else everyone):
            return mine
        world = self.sampling.world_size
        return torch.cat(self.sampling.exchange(
            [mine] * world, 'control', f'gather the {split} seeds'))


def open_dsp_rank(parts_dir: Union[str, 'os.PathLike[str]'],
                  collectives: Collectives,
                  cache: Optional[FeatureCache] = None, *,
                  device: Optional[Union[str, torch.device]] = None,
                  scores: Optional[Scores] = None,
                  launch_order: str = 'groups',
                  feature_centric: bool = False,
                  verify: str = 'size',
                  cold_rows: str = 'auto',
                  remote: str = 'async') -> DSPRank:
    r"""Opens part ``rank`` of :obj:`parts_dir` (checked on every rank, see
    :func:`open_rank_part`) for DSP: any partition whose parts do not
    overlap (``metis``, ``bytegnn``, ``hash``, ``random``). A collective:
    every rank calls it; :meth:`DSPRank.close` stops what it started.

    Args:
        parts_dir (str or Path): the partition directory.
        collectives (Collectives): this rank's collectives; the part
            opened is the one of its rank.
        cache (FeatureCache, optional): the part's feature caches.
        device (str or torch.device, optional): where batches are
            gathered.
        scores (Scores, optional): what ranks the part's rows for the caches
            (:func:`open_rank_part`).
        launch_order (str): how the concurrent stages' collectives are
            kept apart: ``'groups'`` gives sampling and feature loading a
            process group each; ``'coordinator'`` puts both on one and
            launches every collective in the order a leader decides (DSP's
            CCC, :class:`~pyg_fastload.distributed.launch_order.
            LaunchCoordinator`).
        feature_centric (bool): HopGNN (the whole topology, assembled from
            the parts, for local micrographs).
        verify (str): how the part's files are checked
            (:func:`open_rank_part`).
        cold_rows (str): ``'auto'`` reads other parts' cold rows (in no
            cache of their owner) from their files where this rank reaches
            them (one machine), beside the hot rows' exchange; ``'owner'``
            asks the owner for every remote row
            (:class:`~pyg_fastload.distributed.cold_rows.ColdRows`).
        remote (str): ``'async'`` asks the owners of a batch's remote rows
            (and, DSP's sampling, of each hop's frontier) when it needs
            them, each owner serving the requests between its own batches
            (:class:`~pyg_fastload.distributed.requests.RequestService`);
            ``'sync'`` exchanges them in collectives, every rank in
            lockstep. The batches are the same.
    """
    if launch_order not in LAUNCH_ORDERS:
        raise ValueError(f"'launch_order' = {launch_order!r} is not one of "
                         f"{', '.join(LAUNCH_ORDERS)}")
    if remote not in REMOTE_MODES:
        raise ValueError(f"'remote' = {remote!r} is not one of "
                         f"{', '.join(REMOTE_MODES)}")
    features, graph, book, meta = open_rank_part(
        parts_dir, collectives, cache, device=device, scores=scores,
        verify=verify)
    hetero = is_hetero_partition(meta)
    if meta['method'] == 'pagraph':
        raise ValueError(f"'{parts_dir}' holds PaGraph's overlapping parts; "
                         f"DSP needs disjoint ones: pyg-fastload partition "
                         f"DATASET_DIR --num-parts {book.num_parts} --method "
                         f"metis --out PARTS_DIR")
    coordinator = None
    if launch_order == 'groups':
        sampling = collectives.new_stage()
        fetching = collectives.new_stage()
    else:
        data = collectives.new_stage()
        coordinator = LaunchCoordinator(collectives.new_stage())
        sampling, fetching = (
            Collectives(data.context, data.counters, data.device, data.group,
                        coordinator, stage) for stage in (0, 1))
    part = collectives.rank
    cold = ColdRows(parts_dir, book, part, collectives, features, cold_rows,
                    meta)
    requests = RequestService(collectives) if remote == 'async' else None
    store = PartitionedFeatureStore(features, book, part, fetching, cold,
                                    requests)
    if requests is not None:
        requests.start()
    if feature_centric:
        graph = CSCGraphStore(full_topology(parts_dir))
    kinds = ((CollectiveSampler, HeteroCollectiveSampler),
             (RootRouter, HeteroRootRouter))[feature_centric]
    return DSPRank(store, graph, book, part, sampling, fetching, coordinator,
                   feature_centric, meta, kinds[hetero],
                   meta.get('target') if hetero else None, requests)
