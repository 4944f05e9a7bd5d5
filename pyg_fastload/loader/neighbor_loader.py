r"""``FastNeighborLoader``: PyG's ``NeighborLoader`` API over the vectorized
:class:`~pyg_fastload.sampling.FastNeighborSampler` (and
:class:`~pyg_fastload.sampling.HeteroNeighborSampler` on ``HeteroData``)."""
from __future__ import annotations

import threading
import weakref
from typing import Any, Callable, Iterator, List, Optional, Union

import torch
from torch import Tensor
from torch.utils.data import get_worker_info
from torch_geometric.data import Data, FeatureStore, GraphStore, HeteroData
from torch_geometric.loader import NodeLoader
from torch_geometric.sampler import HeteroSamplerOutput, SamplerOutput
from torch_geometric.sampler.base import SubgraphType

from ..config import PipelineSettings
from ..sampling import FastNeighborSampler, HeteroNeighborSampler, HopSampler
from ..storage import FeatureSource
from .feature_join import FeatureJoin, pooled_attrs
from .inputs import (
    check_device,
    check_has_features,
    check_hetero_features,
    check_hetero_input_nodes,
    check_not_link,
    check_input_nodes,
    check_input_time,
    check_sorted_by_destination,
    check_temporal,
)
from .pipeline import (
    DeviceTransfer,
    PipelineIterator,
    SequentialIterator,
    new_breakdown,
)
from .scheduler import RunAheadScheduler

__all__ = ['FastNeighborLoader', 'PIPELINE_MIN_LOAD_SHARE']

#: ``pipeline='auto'`` pipelines once sampling + loading took at least this
#: share of a sequential epoch.
PIPELINE_MIN_LOAD_SHARE = 0.1
#: ... measured over at least this many batches (or a whole shorter epoch).
AUTO_MIN_BATCHES = 4


def _weak_join(loader: 'FastNeighborLoader') -> Callable[[Any], Any]:
    r"""The loader's join for its loading thread, without keeping the
    loader alive."""
    method = weakref.WeakMethod(loader.filter_fn)

    def join(out: SamplerOutput) -> Any:
        filter_fn = method()
        if filter_fn is None:
            raise RuntimeError('the loader was deleted')
        return filter_fn(out)
    return join


class FastNeighborLoader(NodeLoader):
    r"""A drop-in replacement for
    :class:`torch_geometric.loader.NeighborLoader`.

    It takes the same arguments and yields the same
    :class:`~torch_geometric.data.Data` (or
    :class:`~torch_geometric.data.HeteroData`) mini-batches (``x``, ``y``,
    ``edge_index``, ``n_id``, ``e_id``, ``input_id``, ``batch_size``,
    ``num_sampled_nodes``, ``num_sampled_edges`` and every other node or edge
    attribute, sliced; per type on a ``HeteroData``, ``batch_size`` and
    ``input_id`` on the seeds' type), but samples with pyg_fastload's
    vectorized samplers, which need neither pyg-lib nor torch-sparse.

    Args:
        data: a :class:`~torch_geometric.data.Data`, a
            :class:`~torch_geometric.data.HeteroData` or a ``(FeatureStore,
            GraphStore)`` tuple.
        num_neighbors (List[int] or Dict[EdgeType, List[int]]): fan-out per
            hop (``-1``: all neighbours); on a ``HeteroData`` one list for
            every relation or a dict by edge type (relations it leaves out
            sample none).
        input_nodes (torch.Tensor, optional): seed nodes as an index or a
            boolean mask; :obj:`None` means every node. On a ``HeteroData``
            the seeds' node type, or ``(node type, index or mask)``.
        replace (bool): sample with replacement. (default: :obj:`False`)
        subgraph_type (str): ``'directional'``, ``'bidirectional'`` or
            ``'induced'``. (default: ``'directional'``)
        disjoint (bool): one tree per seed. (default: :obj:`False`)
        weight_attr (str, optional): edge attribute with sampling weights.
        time_attr (str, optional): node or edge attribute holding times:
            temporal sampling draws only neighbours not later than their
            seed's time (PyG's semantics; homogeneous graphs, needs
            ``disjoint=True``; no pyg-lib needed).
        input_time (torch.Tensor, optional): every seed's time (default:
            the seeds' node times).
        temporal_strategy (str): ``'uniform'`` among the valid neighbours,
            or ``'last'``: the most recent ones. (default: ``'uniform'``)
        transform (callable, optional): applied to every mini-batch.
        transform_sampler_output (callable, optional): applied to every
            :class:`~torch_geometric.sampler.SamplerOutput`.
        is_sorted (bool): ``edge_index`` is sorted by destination. PyG then
            skips its sort (and samples wrongly if the claim is false); the
            claim is checked here (``ValueError`` if false) and batches are
            the same either way. Needs a ``Data``.
        neighbor_sampler (HopSampler, optional): a sampler to reuse (e.g.
            one shared by the train/val/test loaders).
        directed (bool): deprecated, ``False`` means ``'induced'``.
        pipeline (bool or str): sample and load features in background
            threads while the model trains. ``'auto'`` (default) runs the
            first epoch in the consumer's thread and pipelines later epochs
            if sampling and loading took at least
            :obj:`PIPELINE_MIN_LOAD_SHARE` of it (on a CPU-bound model the
            stage threads cost the model more than they hide). Ignored with
            ``num_workers > 0``, where PyG's worker processes sample.
            Batches are identical either way.
        queue_capacity (int): batches ready ahead of the model (DSP: 2).
            With the feature store's look-ahead depth it bounds the batches
            in flight (the memory bound of :obj:`run_ahead`).
        run_ahead (str or int): when the pipelined sampling stage starts
            the next batch. ``'adaptive'`` (default): ByteGNN's launch score
            from the measured sampling and model times, queue length, time
            since the last launch and CPU utilisation
            (:class:`~pyg_fastload.loader.scheduler.RunAheadScheduler`),
            always while no batch is in flight and never beyond the queues'
            bound. An int ``n``: keep ``n`` batches in flight (the queues
            still bound it). Batches are identical either way.
        device (torch.device or str, optional): where batches are returned.
            :obj:`None` (default) or ``'cpu'`` leave them on the CPU; a CUDA
            device gets them copied from pinned memory with non-blocking
            copies on a side stream in the loading stage, and the current
            stream waits for the copy before the batch is returned
            (:class:`~pyg_fastload.loader.pipeline.DeviceTransfer`). Needs
            ``num_workers=0``.
        **kwargs: :class:`torch.utils.data.DataLoader` arguments such as
            ``batch_size``, ``shuffle``, ``drop_last``, ``num_workers`` and
            ``generator`` (which then also drives the sampler).
    """
    def __init__(
        self,
        data: Union[Data, HeteroData, tuple],
        num_neighbors: List[int],
        input_nodes: Any = None,
        input_time: Optional[Tensor] = None,
        replace: bool = False,
        subgraph_type: Union[SubgraphType, str] = 'directional',
        disjoint: bool = False,
        temporal_strategy: str = 'uniform',
        time_attr: Optional[str] = None,
        weight_attr: Optional[str] = None,
        transform: Optional[Callable] = None,
        transform_sampler_output: Optional[Callable] = None,
        is_sorted: bool = False,
        filter_per_worker: Optional[bool] = None,
        neighbor_sampler: Optional[HopSampler] = None,
        directed: bool = True,
        pipeline: Union[bool, str] = 'auto',
        queue_capacity: int = 2,
        run_ahead: Union[str, int] = 'adaptive',
        device: Optional[Union[str, torch.device]] = None,
        **kwargs: Any,
    ):
        check_not_link(kwargs)
        stores = isinstance(data, (tuple, list)) and len(data) == 2 and \
            isinstance(data[0], FeatureStore) and \
            isinstance(data[1], GraphStore)
        hetero = isinstance(data, HeteroData) or stores and any(
            a.edge_type is not None for a in data[1].get_all_edge_attrs())
        if not isinstance(data, (Data, HeteroData)) and not (
                isinstance(data, (tuple, list)) and len(data) == 2
                and isinstance(data[0], FeatureStore)
                and isinstance(data[1], GraphStore)):
            raise TypeError(f"'data' must be a torch_geometric.data.Data, a "
                            f"HeteroData or a (FeatureStore, GraphStore) "
                            f"tuple, got {type(data).__name__}")
        check_temporal(input_time, time_attr, temporal_strategy, hetero,
                       neighbor_sampler)
        if is_sorted and not hetero:
            check_sorted_by_destination(data)
        batch_size = kwargs.get('batch_size', 1)
        if (isinstance(batch_size, bool) or not isinstance(batch_size, int)
                or batch_size < 1):
            raise ValueError(f"'batch_size' must be a positive int, got "
                             f"{batch_size!r}")
        if isinstance(data, HeteroData):
            check_hetero_features(data)
        elif not hetero:
            check_has_features(data)
        if filter_per_worker is None and not isinstance(data, (Data,
                                                               HeteroData)):
            # Join in the main process, where the store's caches live; the
            # sampling still runs in worker processes if there are any.
            filter_per_worker = not isinstance(data[0], FeatureSource)
        if neighbor_sampler is None:
            kind = HeteroNeighborSampler if hetero else FastNeighborSampler
            neighbor_sampler = kind(
                data,
                num_neighbors=num_neighbors,
                replace=replace,
                subgraph_type=subgraph_type,
                disjoint=disjoint,
                weight_attr=weight_attr,
                share_memory=kwargs.get('num_workers', 0) > 0,
                directed=directed,
                **({} if hetero else dict(
                    time_attr=time_attr,
                    temporal_strategy=temporal_strategy)),
            )
        if hetero:
            topo = neighbor_sampler.topology
            input_nodes = check_hetero_input_nodes(
                input_nodes, {t: topo.num_nodes_of(t) for t in
                              topo.node_types})
        else:
            input_nodes = check_input_nodes(input_nodes,
                                             neighbor_sampler.num_nodes)
        if input_nodes is None and not isinstance(data, Data):
            input_nodes = torch.arange(neighbor_sampler.num_nodes)
        check_input_time(input_time, input_nodes, neighbor_sampler.num_nodes)
        super().__init__(
            data=data,
            node_sampler=neighbor_sampler,
            input_nodes=input_nodes,
            input_time=input_time,
            transform=transform,
            transform_sampler_output=transform_sampler_output,
            filter_per_worker=filter_per_worker,
            **kwargs,
        )
        self.settings = PipelineSettings(pipeline, queue_capacity, run_ahead)
        self.device = check_device(device, self.num_workers)
        self._transfer = DeviceTransfer(self.device)
        self._scheduler: Optional[RunAheadScheduler] = None
        self.time_breakdown = new_breakdown()
        self._auto_decision: Optional[bool] = None
        # The consumer's batch, the queued ones and the one being loaded.
        self._join = FeatureJoin(self._transfer,
                                 max_buffers=queue_capacity + 3)
        # The stop flags of this loader's running pipelines (set when the
        # loader is deleted; the loader holds no iterator).
        self._stops: List[threading.Event] = []

    @property
    def pipeline(self) -> Union[bool, str]:
        return self.settings.pipeline

    @property
    def queue_capacity(self) -> int:
        return self.settings.queue_capacity

    @property
    def run_ahead(self) -> Union[str, int]:
        return self.settings.run_ahead

    @property
    def _feature_source(self) -> Optional[FeatureSource]:
        if isinstance(self.data, (tuple, list)) and isinstance(
                self.data[0], FeatureSource):
            return self.data[0]
        return None

    def filter_fn(self, out: SamplerOutput) -> Data:
        r"""Joins the sampled subgraph with its node and edge attributes.
        Feature matrices are gathered into recycled buffers, and a
        :class:`~pyg_fastload.storage.TieredFeatureStore` is read through its
        tiers directly (main process only: worker processes write into
        shared memory as in PyG)."""
        if get_worker_info() is not None:
            return super().filter_fn(out)
        if isinstance(out, HeteroSamplerOutput):
            return self._hetero_filter(out)
        store = self._feature_source
        # What `data` holds now: a replaced `x` or `y` is served at once.
        pooled = pooled_attrs(self.data) if isinstance(self.data,
                                                       Data) else []
        if store is None and not pooled:
            return super().filter_fn(out)
        if self.transform_sampler_output:
            out = self.transform_sampler_output(out)
        if store is not None:
            data = self._join.from_source(store, out, self.time_breakdown)
        else:
            data = self._join.from_data(self.data, pooled, out,
                                        self.time_breakdown)
        data.n_id = out.node
        data.e_id = out.edge
        data.batch = out.batch
        data.num_sampled_nodes = out.num_sampled_nodes
        data.num_sampled_edges = out.num_sampled_edges
        data.input_id = out.metadata[0]
        data.seed_time = out.metadata[1]
        data.batch_size = out.metadata[0].size(0)
        if len(out.metadata) > 2:  # a sampler's own batch attributes
            for key, value in out.metadata[2].items():
                data[key] = value
        return data if self.transform is None else self.transform(data)

    def _hetero_filter(self, out: HeteroSamplerOutput) -> HeteroData:
        r"""A heterogeneous batch in PyG's layout, its feature matrices
        gathered into pooled buffers (stores: PyG's join)."""
        if not isinstance(self.data, HeteroData):
            return super().filter_fn(out)
        if self.transform_sampler_output:
            out = self.transform_sampler_output(out)
        data = self._join.from_hetero_data(self.data, out,
                                           self.time_breakdown)
        for key, node in out.node.items():
            data[key].n_id = node
        for key, edge in out.edge.items():
            if edge is not None:  # (bidirectional: no edge ids)
                data[key].e_id = edge
        data.set_value_dict('batch', out.batch)
        data.set_value_dict('num_sampled_nodes', out.num_sampled_nodes)
        data.set_value_dict('num_sampled_edges', out.num_sampled_edges)
        input_type = self.input_data.input_type
        data[input_type].input_id = out.metadata[0]
        data[input_type].seed_time = out.metadata[1]
        data[input_type].batch_size = out.metadata[0].size(0)
        return data if self.transform is None else self.transform(data)

    def _get_iterator(self) -> Iterator:
        if self.num_workers > 0:  # PyG's path: sampling in worker processes
            return super()._get_iterator()
        # Everything random is drawn here, in the consumer's thread and in
        # order, so pipelined and sequential iteration give the same batches.
        batches = list(self.batch_sampler)
        epoch_seed = int(torch.randint(0, 2**62, (1, ),
                                       generator=self.generator))

        # The stage threads hold no reference to the loader (see below).
        sampler, inputs = self.node_sampler, self.input_data

        def sampled() -> Iterator[SamplerOutput]:
            for i, index in enumerate(batches):
                generator = torch.Generator().manual_seed(
                    (epoch_seed + i * 0x9E3779B97F4A7C15) % 2**63)
                yield sampler.sample_from_nodes(inputs[index],
                                                generator=generator)

        store = self._feature_source
        depth = store.lookahead_depth if store is not None else 0

        def on_sampled(out: SamplerOutput) -> None:
            if depth and isinstance(out, SamplerOutput):
                store.announce(out.node)

        pipelined = self._use_pipeline()
        self.time_breakdown = new_breakdown()
        if pipelined:
            sample_capacity = max(self.queue_capacity, depth)
            iterator = PipelineIterator(
                sampled(), on_sampled, _weak_join(self), self.queue_capacity,
                sample_capacity, self.time_breakdown,
                self._new_scheduler(sample_capacity + self.queue_capacity),
                self._transfer)
            # The iterator keeps the loader alive (`next(iter(Loader(...)))`
            # must work); the threads do not, so dropping the iterator, or
            # the loader with its iterators, stops them.
            iterator.owner = self
            self._stops = [e for e in self._stops if not e.is_set()]
            self._stops.append(iterator.shared.stop)
            return iterator
        return SequentialIterator(sampled(), on_sampled, self.filter_fn,
                                  depth, self.time_breakdown, self._transfer)

    def _new_scheduler(self, bound: int) -> RunAheadScheduler:
        r"""This epoch's run-ahead scheduler; an adaptive one starts from the
        sampling and model times measured in the previous epoch."""
        if self.run_ahead != 'adaptive':
            return RunAheadScheduler(self.run_ahead, self.run_ahead)
        last = self._scheduler
        self._scheduler = RunAheadScheduler(
            1, bound, avg_sample=last and last.avg_sample,
            avg_train=last and last.avg_train)
        return self._scheduler

    def _use_pipeline(self) -> bool:
        if self.pipeline != 'auto':
            return bool(self.pipeline)
        if self._auto_decision is None:
            last = self.time_breakdown
            # Decide on a full epoch, or on the batches a consumer took
            # before it stopped (e.g. Lightning's limit_train_batches).
            if last['batches'] < min(len(self), AUTO_MIN_BATCHES):
                return False
            share = (last['sampling'] + last['feature_loading']) / max(
                last['epoch'], 1e-9)
            self._auto_decision = share >= PIPELINE_MIN_LOAD_SHARE
        return self._auto_decision

    def __getstate__(self) -> dict:
        r"""What worker processes get (``num_workers > 0``, e.g. with
        ``multiprocessing_context='spawn'``): not the generator, whose state
        cannot travel through shared memory and which the workers never use
        (shuffling happens here; workers are seeded from it), nor the stop
        flags of this process's pipelines."""
        state = self.__dict__.copy()
        state['generator'] = None
        state['_stops'] = []
        return state

    def __del__(self) -> None:
        for stop in getattr(self, '_stops', ()):
            stop.set()

    def __repr__(self) -> str:
        return f'{self.__class__.__name__}({self.node_sampler})'
