r"""``FastNeighborLoader``: PyG's ``NeighborLoader`` API over the vectorized
:class:`~pyg_fastload.sampling.FastNeighborSampler`."""
from __future__ import annotations

import copy
import time
from typing import Any, Callable, Dict, Iterator, List, Optional, Union

import numpy as np
import torch
from torch import Tensor
from torch.utils.data import get_worker_info
from torch_geometric.data import Data, FeatureStore, GraphStore, HeteroData
from torch_geometric.loader import NodeLoader
from torch_geometric.loader.utils import filter_data
from torch_geometric.sampler import SamplerOutput
from torch_geometric.sampler.base import SubgraphType

from ..errors import HETERO_UNSUPPORTED
from ..sampling import FastNeighborSampler, HopSampler
from ..storage import TieredFeatureStore
from ..storage.buffer_pool import BufferPool
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


def _check_input_nodes(input_nodes: Any, num_nodes: int) -> Optional[Tensor]:
    r"""Validates :obj:`input_nodes` (``None``, a boolean mask or an index)
    and returns it as a tensor."""
    if input_nodes is None:
        return None
    if isinstance(input_nodes, str) or isinstance(input_nodes, tuple):
        raise NotImplementedError(
            f"'input_nodes={input_nodes!r}' names a node type, which only "
            f"heterogeneous graphs have. " + HETERO_UNSUPPORTED)
    if isinstance(input_nodes, np.ndarray):
        input_nodes = torch.from_numpy(input_nodes)
    elif not isinstance(input_nodes, Tensor):
        input_nodes = torch.as_tensor(input_nodes)
    if input_nodes.dtype == torch.bool:
        if input_nodes.numel() != num_nodes:
            raise ValueError(
                f"'input_nodes' is a boolean mask of length "
                f"{input_nodes.numel()}, but the graph has {num_nodes} nodes; "
                f"pass a mask with one entry per node or an index tensor")
        return input_nodes.view(-1)
    if input_nodes.dtype.is_floating_point or input_nodes.dtype.is_complex:
        raise TypeError(
            f"'input_nodes' has dtype {input_nodes.dtype}: pass node ids as "
            f"an integer tensor (e.g. torch.long) or a boolean mask")
    input_nodes = input_nodes.view(-1).long()
    if input_nodes.numel() > 0:
        low, high = int(input_nodes.min()), int(input_nodes.max())
        if low < 0 or high >= num_nodes:
            raise IndexError(
                f"'input_nodes' holds node id {low if low < 0 else high}, "
                f"outside [0, {num_nodes}) for this graph")
    return input_nodes


def _check_device(device: Optional[Union[str, torch.device]],
                  num_workers: int) -> Optional[torch.device]:
    r"""Validates the loader's :obj:`device`."""
    if device is None:
        return None
    try:
        device = torch.device(device)
    except (RuntimeError, TypeError) as error:
        raise ValueError(f"'device={device!r}' is not a torch device: pass "
                         f"None, 'cpu' or 'cuda[:index]'") from error
    if device.type not in ('cpu', 'cuda'):
        raise ValueError(f"'device={device}' is not supported: pass None, "
                         f"'cpu' or 'cuda[:index]'")
    if device.type == 'cuda':
        if not torch.cuda.is_available():
            raise ValueError(f"'device={device}' needs CUDA, which this "
                             f"PyTorch build or machine lacks: pass None or "
                             f"'cpu'")
        if device.index is None:
            device = torch.device('cuda', torch.cuda.current_device())
        if num_workers > 0:
            raise ValueError(f"'device={device}' needs 'num_workers=0' (got "
                             f"{num_workers}): the loader's own pipeline "
                             f"moves batches; with worker processes, move "
                             f"them in the training loop")
    return device


def _check_has_features(data: Any) -> None:
    if isinstance(data, Data):
        if 'x' not in data or data.x is None:
            raise ValueError(
                "the data object has no node features 'x': set 'data.x' "
                "(a [num_nodes, num_features] tensor) before building the "
                "loader")
        return
    feature_store: FeatureStore = data[0]
    names = {attr.attr_name for attr in feature_store.get_all_tensor_attrs()}
    if 'x' not in names:
        raise ValueError(f"the FeatureStore has no 'x' tensor (found "
                         f"{sorted(names)}); put the node features under "
                         f"attr_name='x'")


class FastNeighborLoader(NodeLoader):
    r"""A drop-in replacement for
    :class:`torch_geometric.loader.NeighborLoader` on homogeneous graphs.

    It takes the same arguments and yields the same
    :class:`~torch_geometric.data.Data` mini-batches (``x``, ``y``,
    ``edge_index``, ``n_id``, ``e_id``, ``input_id``, ``batch_size``,
    ``num_sampled_nodes``, ``num_sampled_edges`` and every other node or edge
    attribute, sliced), but samples with pyg_fastload's vectorized sampler,
    which needs neither pyg-lib nor torch-sparse.

    Args:
        data: a :class:`~torch_geometric.data.Data` or a ``(FeatureStore,
            GraphStore)`` tuple.
        num_neighbors (List[int]): fan-out per hop (``-1``: all neighbours).
        input_nodes (torch.Tensor, optional): seed nodes as an index or a
            boolean mask; :obj:`None` means every node.
        replace (bool): sample with replacement. (default: :obj:`False`)
        subgraph_type (str): ``'directional'``, ``'bidirectional'`` or
            ``'induced'``. (default: ``'directional'``)
        disjoint (bool): one tree per seed. (default: :obj:`False`)
        weight_attr (str, optional): edge attribute with sampling weights.
        transform (callable, optional): applied to every mini-batch.
        transform_sampler_output (callable, optional): applied to every
            :class:`~torch_geometric.sampler.SamplerOutput`.
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
        if isinstance(data, HeteroData):
            raise NotImplementedError(HETERO_UNSUPPORTED)
        if not isinstance(data, Data) and not (
                isinstance(data, (tuple, list)) and len(data) == 2
                and isinstance(data[0], FeatureStore)
                and isinstance(data[1], GraphStore)):
            raise TypeError(f"'data' must be a torch_geometric.data.Data or a "
                            f"(FeatureStore, GraphStore) tuple, got "
                            f"{type(data).__name__}")
        if input_time is not None or time_attr is not None:
            raise NotImplementedError(
                "temporal sampling ('input_time'/'time_attr') is not "
                "supported by pyg_fastload yet")
        batch_size = kwargs.get('batch_size', 1)
        if (isinstance(batch_size, bool) or not isinstance(batch_size, int)
                or batch_size < 1):
            raise ValueError(f"'batch_size' must be a positive int, got "
                             f"{batch_size!r}")
        _check_has_features(data)
        if filter_per_worker is None and not isinstance(data, Data):
            # Join in the main process, where the store's caches live; the
            # sampling still runs in worker processes if there are any.
            filter_per_worker = not isinstance(data[0], TieredFeatureStore)
        if neighbor_sampler is None:
            neighbor_sampler = FastNeighborSampler(
                data,
                num_neighbors=num_neighbors,
                replace=replace,
                subgraph_type=subgraph_type,
                disjoint=disjoint,
                weight_attr=weight_attr,
                share_memory=kwargs.get('num_workers', 0) > 0,
                directed=directed,
            )
        input_nodes = _check_input_nodes(input_nodes,
                                         neighbor_sampler.num_nodes)
        if input_nodes is None and not isinstance(data, Data):
            input_nodes = torch.arange(neighbor_sampler.num_nodes)
        super().__init__(
            data=data,
            node_sampler=neighbor_sampler,
            input_nodes=input_nodes,
            transform=transform,
            transform_sampler_output=transform_sampler_output,
            filter_per_worker=filter_per_worker,
            **kwargs,
        )
        if queue_capacity < 1:
            raise ValueError(f"'queue_capacity' must be >= 1, got "
                             f"{queue_capacity}")
        if pipeline not in (True, False, 'auto'):
            raise ValueError(f"'pipeline' must be True, False or 'auto', "
                             f"got {pipeline!r}")
        if run_ahead != 'adaptive' and (isinstance(run_ahead, bool)
                                        or not isinstance(run_ahead, int)
                                        or run_ahead < 1):
            raise ValueError(f"'run_ahead' must be 'adaptive' or an int >= "
                             f"1 (batches in flight), got {run_ahead!r}")
        self.pipeline = pipeline
        self.queue_capacity = queue_capacity
        self.run_ahead = run_ahead
        self.device = _check_device(device, self.num_workers)
        self._transfer = DeviceTransfer(self.device)
        self._scheduler: Optional[RunAheadScheduler] = None
        self.time_breakdown = new_breakdown()
        self._auto_decision: Optional[bool] = None
        # The consumer's batch, the queued ones and the one being loaded.
        self._pool = BufferPool(max_buffers=queue_capacity + 3)
        self._pooled: Dict[str, Tensor] = {}
        self._rest: Optional[Data] = None
        if isinstance(data, Data):
            self._split_feature_matrices(data)

    def _split_feature_matrices(self, data: Data) -> None:
        r"""Node feature matrices (2+ dims, CPU) are gathered into pooled
        buffers; PyG's ``filter_data`` slices everything else."""
        for key, value in data.items():
            if (isinstance(value, Tensor) and value.dim() >= 2
                    and not value.is_cuda and data.is_node_attr(key)
                    and data.__cat_dim__(key, value) == 0):
                self._pooled[key] = value
        if self._pooled:
            self._rest = copy.copy(data)
            self._rest.num_nodes = data.num_nodes
            for key in self._pooled:
                del self._rest[key]

    @property
    def _tiered_store(self) -> Optional[TieredFeatureStore]:
        if isinstance(self.data, (tuple, list)) and isinstance(
                self.data[0], TieredFeatureStore):
            return self.data[0]
        return None

    def filter_fn(self, out: SamplerOutput) -> Data:
        r"""Joins the sampled subgraph with its node and edge attributes.
        Feature matrices are gathered into recycled buffers, and a
        :class:`~pyg_fastload.storage.TieredFeatureStore` is read through its
        tiers directly (main process only: worker processes write into
        shared memory as in PyG)."""
        store = self._tiered_store
        if (get_worker_info() is not None
                or (self._rest is None and store is None)):
            return super().filter_fn(out)
        if self.transform_sampler_output:
            out = self.transform_sampler_output(out)
        if store is not None:
            data = self._join_store(store, out)
        else:
            data = filter_data(self._rest, out.node, out.row, out.col,
                               out.edge)
            if 'num_nodes' not in self.data._store:
                del data._store['num_nodes']
            started = time.perf_counter()
            for key, value in self._pooled.items():
                data[key] = torch.index_select(
                    value, 0, out.node,
                    out=self._buffer((out.node.numel(), *value.shape[1:]),
                                     value.dtype))
            self.time_breakdown['feature_loading.storage'] += (
                time.perf_counter() - started)
        data.n_id = out.node
        data.e_id = out.edge
        data.batch = out.batch
        data.num_sampled_nodes = out.num_sampled_nodes
        data.num_sampled_edges = out.num_sampled_edges
        data.input_id = out.metadata[0]
        data.seed_time = out.metadata[1]
        data.batch_size = out.metadata[0].size(0)
        return data if self.transform is None else self.transform(data)

    def _join_store(self, store: TieredFeatureStore,
                    out: SamplerOutput) -> Data:
        store.retire(out.node)
        data = Data(edge_index=torch.stack([out.row, out.col]))
        timings: Dict[str, float] = {}
        for attr in store.get_all_tensor_attrs():
            if attr.group_name is not None:
                continue
            size = store.get_tensor_size(attr)
            buffer = None
            if len(size) >= 2 and store.device.type == 'cpu':
                buffer = self._buffer((out.node.numel(), *size[1:]),
                                      store.dtype_of(attr.attr_name))
            data[attr.attr_name] = store.gather(attr.attr_name, out.node,
                                                out=buffer, timings=timings)
        for tier, seconds in timings.items():
            self.time_breakdown[f'feature_loading.{tier}'] += seconds
        return data

    def _buffer(self, shape: tuple, dtype: torch.dtype) -> Tensor:
        r"""A feature buffer: recycled, or pinned (from torch's caching host
        allocator, which keeps it until its copy is done) for a CUDA
        :attr:`device`."""
        if self._transfer.active:
            return torch.empty(shape, dtype=dtype, pin_memory=True)
        return self._pool.empty(shape, dtype)

    def _get_iterator(self) -> Iterator:
        if self.num_workers > 0:  # PyG's path: sampling in worker processes
            return super()._get_iterator()
        # Everything random is drawn here, in the consumer's thread and in
        # order, so pipelined and sequential iteration give the same batches.
        batches = list(self.batch_sampler)
        epoch_seed = int(torch.randint(0, 2**62, (1, ),
                                       generator=self.generator))

        def sampled() -> Iterator[SamplerOutput]:
            for i, index in enumerate(batches):
                generator = torch.Generator().manual_seed(
                    (epoch_seed + i * 0x9E3779B97F4A7C15) % 2**63)
                yield self.node_sampler.sample_from_nodes(
                    self.input_data[index], generator=generator)

        store = self._tiered_store
        depth = store.lookahead_depth if store is not None else 0

        def on_sampled(out: SamplerOutput) -> None:
            if depth:
                store.announce(out.node)

        pipelined = self._use_pipeline()
        self.time_breakdown = new_breakdown()
        if pipelined:
            sample_capacity = max(self.queue_capacity, depth)
            return PipelineIterator(sampled(), on_sampled, self.filter_fn,
                                    self.queue_capacity, sample_capacity,
                                    self.time_breakdown,
                                    self._new_scheduler(sample_capacity +
                                                        self.queue_capacity),
                                    self._transfer)
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

    def __repr__(self) -> str:
        return f'{self.__class__.__name__}({self.node_sampler})'
