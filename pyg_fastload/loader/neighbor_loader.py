r"""``FastNeighborLoader``: PyG's ``NeighborLoader`` API over the vectorized
samplers (:class:`~pyg_fastload.sampling.FastNeighborSampler` by default,
any of :data:`~pyg_fastload.sampling.SAMPLERS` by name)."""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Union

import torch
from torch import Tensor
from torch.utils.data import get_worker_info
from torch_geometric.data import Data, HeteroData
from torch_geometric.loader import NodeLoader
from torch_geometric.sampler import HeteroSamplerOutput, SamplerOutput
from torch_geometric.sampler.base import SubgraphType

from ..config import PipelineSettings, check_hops
from ..graph.kind import graph_input, is_data, is_sampler_output
from ..placement import Placement
from ..sampling import GraphSampler, SamplerChoice
from ..storage import FeatureSource
from .feature_join import on_host, pooled_attrs, with_sampled
from .inputs import (
    built,
    check_has_features,
    check_hetero_features,
    check_hetero_input_nodes,
    check_not_link,
    check_input_nodes,
    check_input_time,
    check_sorted_by_destination,
    check_temporal,
    prepare_sampler,
)
from .pipelined import PIPELINE_MIN_LOAD_SHARE, PipelinedLoader, SampleFn

__all__ = ['FastNeighborLoader', 'PIPELINE_MIN_LOAD_SHARE']


class FastNeighborLoader(PipelinedLoader, NodeLoader):
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
            every relation or a dict naming every edge type (as in PyG).
        input_nodes (torch.Tensor, optional): seed nodes as an index or a
            boolean mask tensor; :obj:`None` means every node. As in PyG, a
            list, tuple, range or NumPy array holds node ids (a boolean one,
            which PyG would read as ids 0 and 1, is refused: pass a mask as
            a tensor). On a ``HeteroData`` the seeds' node type, or
            ``(node type, index or mask)``.
        replace (bool): sample with replacement. (default: :obj:`False`)
        subgraph_type (str): ``'directional'``, ``'bidirectional'`` or
            ``'induced'``. (default: ``'directional'``)
        disjoint (bool): one tree per seed. (default: :obj:`False`)
        weight_attr (str, optional): edge attribute with sampling weights.
        time_attr (str, optional): node or edge attribute holding times:
            temporal sampling draws only neighbours not later than their
            seed's time (PyG's semantics: every seed its own tree, so
            ``disjoint`` is on; no pyg-lib needed).
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
        filter_per_worker (bool, optional): join the features in the
            worker processes (``num_workers > 0``) rather than in the main
            one, as in PyG; :obj:`None` (default): as PyG decides for a
            ``Data`` or ``HeteroData``; for a ``(FeatureStore,
            GraphStore)`` pair in the workers, unless the feature store is
            pyg_fastload's (a :class:`~pyg_fastload.storage.FeatureSource`),
            whose caches live in the main process.
        neighbor_sampler (str, dict or sampler, optional): how batches are
            drawn: a name of :data:`~pyg_fastload.sampling.SAMPLERS`
            (``'neighbor'``, the default: node-wise neighbour sampling;
            ``'labor'``: layer-neighbour sampling,
            :class:`~pyg_fastload.sampling.LaborSampler`, far fewer
            distinct nodes for the same fan-outs; ``'random_walk'``: a
            walk of one step per hop from every seed,
            :class:`~pyg_fastload.sampling.RandomWalkSampler`;
            GraphSAINT's subgraphs ``'saint_node'``, ``'saint_edge'``,
            ``'saint_rw'``, :mod:`~pyg_fastload.sampling.saint`, whose
            normalisation is estimated here for this loader's seeds and
            batch size),
            ``{'class_path': name or 'module.Class', 'init_args': {...}}``
            (a class with its own options, built with this loader's
            arguments), or a sampler to reuse (e.g. one shared by the
            train/val/test loaders; see
            :class:`~pyg_fastload.sampling.GraphSampler`).
        directed (bool): deprecated, ``False`` means ``'induced'``.
        pipeline_settings (PipelineSettings or dict, optional): how
            batches are sampled and overlapped with the model
            (:class:`~pyg_fastload.PipelineSettings`; each field may also
            be given as a keyword of its own, ``pipeline=False``, which
            replaces the field's value):

            - ``pipeline`` (bool or str): sample and load features in
              background threads while the model trains. ``'auto'``
              (default) decides in the first epoch by measuring both: its
              first batches run in the consumer's thread and, if sampling
              and loading took at least :obj:`PIPELINE_MIN_LOAD_SHARE` of
              the time, the next ones in the pipeline, which stays for the
              rest of the epoch and later epochs unless it made the time
              per batch (model steps included) longer
              (:mod:`~pyg_fastload.loader.auto_pipeline`). Ignored with
              ``num_workers > 0``, where PyG's worker processes sample.
            - ``queue_capacity`` (int): batches ready ahead of the model
              (DSP: 2); with the feature store's look-ahead it bounds the
              batches in flight.
            - ``run_ahead`` (str or int): when the pipelined sampling stage
              starts the next batch: ``'adaptive'`` (default; ByteGNN's
              launch score from the measured sampling and model times,
              queue length and CPU utilisation,
              :class:`~pyg_fastload.loader.scheduler.RunAheadScheduler`),
              ``'trainer_first'`` (the same, but while the model works
              only on the cores it leaves idle,
              :class:`~pyg_fastload.loader.trainer_load.TrainerLoad`) or
              an int ``n``: ``n`` batches in flight.
            - ``sampling_workers`` (int): threads sampling batches at once
              when pipelined (ByteGNN's pool,
              :class:`~pyg_fastload.loader.sampling_pool.SamplingPool`;
              ``1``, the default: the sampling thread alone); each keeps
              a relabelling array of 4 bytes per node.
            - ``sampling_device`` (torch.device or str, optional): where
              the topology lives and sampling runs (DSP's and GIDS's GPU
              sampling): :obj:`None` (default) or ``'cpu'``, or a CUDA
              device, which gets a copy of the topology
              (``CSCTopology.nbytes()``) if it leaves the free memory
              sampling a batch of ``batch_size`` seeds takes there
              (:meth:`~pyg_fastload.sampling.HopSampler.scratch_bytes`),
              and returns batches there (:obj:`device` defaults to it).
              A GPU's random streams differ from the CPU's: batches are
              equal in distribution, reproducible under a seed on one
              device. Needs ``num_workers=0``.

            Batches are identical for every ``pipeline``, ``run_ahead`` and
            number of ``sampling_workers``.
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

    Example:
        >>> import torch
        >>> from torch_geometric.data import Data
        >>> from pyg_fastload import FastNeighborLoader
        >>> gen = torch.Generator().manual_seed(0)
        >>> data = Data(x=torch.randn(100, 8, generator=gen),
        ...             edge_index=torch.randint(0, 100, (2, 1000),
        ...                                      generator=gen))
        >>> loader = FastNeighborLoader(data, num_neighbors=[5, 3],
        ...                             batch_size=16,
        ...                             input_nodes=torch.arange(32))
        >>> batch = next(iter(loader))  # the seeds come first
        >>> batch.batch_size, batch.x.size(1), batch.n_id[:3].tolist()
        (16, 8, [0, 1, 2])
        >>> len(loader), batch.num_sampled_nodes[0]
        (2, 16)
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
        neighbor_sampler: Union[str, Dict[str, Any], GraphSampler,
                                None] = None,
        directed: bool = True,
        pipeline_settings: Optional[PipelineSettings] = None,
        device: Optional[Union[str, torch.device]] = None,
        **kwargs: Any,
    ):
        settings = PipelineSettings.of(pipeline_settings, kwargs)
        check_not_link(kwargs)
        kind = graph_input(data)
        hetero = kind.hetero
        choice = None if built(neighbor_sampler) else \
            SamplerChoice.of(neighbor_sampler)
        check_temporal(input_time, time_attr, choice is not None)
        num_workers = kwargs.get('num_workers', 0)
        placement = Placement.of_loader(
            device, settings.sampling_device, num_workers,
            given_sampler=choice is None)
        if is_sorted and not hetero:
            check_sorted_by_destination(data)
        batch_size = kwargs.get('batch_size', 1)
        if (isinstance(batch_size, bool) or not isinstance(batch_size, int)
                or batch_size < 1):
            raise ValueError(f"'batch_size' must be a positive int, got "
                             f"{batch_size!r}")
        if not kind.stores and hetero:
            check_hetero_features(data)
        elif not hetero:
            check_has_features(data)
        if filter_per_worker is None and kind.stores:
            # Join in the main process, where the store's caches live; the
            # sampling still runs in worker processes if there are any.
            filter_per_worker = not isinstance(data[0], FeatureSource)
        if choice is not None:
            on_device = {} if hetero else {'device': placement.sampling,
                                           'batch_size': batch_size}
            neighbor_sampler = choice.build(
                data,
                num_neighbors,
                replace=replace,
                subgraph_type=subgraph_type,
                disjoint=disjoint,
                weight_attr=weight_attr,
                share_memory=num_workers > 0,
                directed=directed,
                time_attr=time_attr,
                temporal_strategy=temporal_strategy,
                **on_device,
            )
        placement = placement.sampled_on(neighbor_sampler.device, num_workers)
        if hetero:
            topo = neighbor_sampler.topology
            input_nodes = check_hetero_input_nodes(
                input_nodes, {t: topo.num_nodes_of(t) for t in
                              topo.node_types})
        else:
            input_nodes = check_input_nodes(input_nodes,
                                            neighbor_sampler.num_nodes)
        check_hops(neighbor_sampler.num_hops)
        if input_nodes is None and (kind.stores or hetero):
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
        prepare_sampler(neighbor_sampler, self.input_data, batch_size,
                        self.drop_last)
        self.setup_pipeline(settings, placement)

    def filter_fn(self, out: SamplerOutput) -> Data:
        r"""Joins the sampled subgraph with its node and edge attributes.
        Feature matrices are gathered into recycled buffers, and a
        :class:`~pyg_fastload.storage.TieredFeatureStore` is read through its
        tiers directly (main process only: worker processes write into
        shared memory as in PyG)."""
        if get_worker_info() is not None:
            return with_sampled(super().filter_fn(out), out)
        if is_sampler_output(out, hetero=True):
            return self._hetero_filter(out)
        store = self._feature_source
        # What `data` holds now: a replaced `x` or `y` is served at once.
        pooled = pooled_attrs(self.data) if is_data(
            self.data, hetero=False) else []
        if store is None and not pooled:
            return with_sampled(super().filter_fn(on_host(out)), out)
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
        return self._finish(data, out)

    def _hetero_filter(self, out: HeteroSamplerOutput) -> HeteroData:
        r"""A heterogeneous batch in PyG's layout, its feature matrices
        gathered into pooled buffers (stores: PyG's join)."""
        if self.transform_sampler_output:
            out = self.transform_sampler_output(out)
        data = self.join_hetero(out)
        input_type = self.input_data.input_type
        data[input_type].input_id = out.metadata[0]
        data[input_type].seed_time = out.metadata[1]
        data[input_type].batch_size = out.metadata[0].size(0)
        return self._finish(data, out)

    def _finish(self, data: Any, out: Any) -> Any:
        r"""A sampler's own batch attributes (:func:`with_sampled`) on the
        batch, then the transform."""
        with_sampled(data, out)
        return data if self.transform is None else self.transform(data)

    def batch_sampling(self) -> SampleFn:
        sampler, inputs = self.node_sampler, self.input_data

        def sample(index: Any, generator: torch.Generator) -> SamplerOutput:
            return sampler.sample_from_nodes(inputs[index],
                                             generator=generator)
        return sample

    def __repr__(self) -> str:
        return f'{self.__class__.__name__}({self.node_sampler})'
