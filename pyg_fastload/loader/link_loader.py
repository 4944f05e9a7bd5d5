r"""``FastLinkNeighborLoader``: a drop-in replacement for PyG's
``LinkNeighborLoader``, sampling with
:class:`~pyg_fastload.FastNeighborSampler` or any sampler of
:data:`~pyg_fastload.sampling.SAMPLERS` (neither pyg-lib nor torch-sparse)
and drawing negatives from the loader's generator."""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Union

import torch
from torch import Tensor
from torch.utils.data import get_worker_info
from torch_geometric.data import Data, HeteroData
from torch_geometric.loader import LinkLoader
from torch_geometric.sampler import HeteroSamplerOutput, SamplerOutput
from torch_geometric.sampler.base import NegativeSampling, SubgraphType

from ..config import PipelineSettings
from ..graph.kind import graph_input, is_data, is_sampler_output
from ..placement import Placement
from ..sampling import GraphSampler, HeteroNeighborSampler, SamplerChoice
from .feature_join import on_host, pooled_attrs, with_edge_weight
from .inputs import (built, check_has_features, check_hetero_features,
                     check_sorted_by_destination, prepare_sampler)
from .link_inputs import (
    check_label_edges,
    check_label_time,
    check_negative_spec,
    check_negatives,
    hetero_label_edges,
    names_edge_type,
)
from .pipelined import PipelinedLoader, SampleFn

__all__ = ['FastLinkNeighborLoader']


class FastLinkNeighborLoader(PipelinedLoader, LinkLoader):
    r"""Mini-batches of label edges with their sampled neighbourhoods:
    PyG's ``LinkNeighborLoader`` arguments and batches (``edge_label_index``
    in batch-local ids and ``edge_label``, or ``src_index`` /
    ``dst_pos_index`` / ``dst_neg_index`` with triplet negatives,
    ``input_id``, ``n_id``, ``e_id`` and the node attributes), on a
    ``Data``, a homogeneous ``(FeatureStore, GraphStore)`` tuple or one
    edge type of a ``HeteroData`` (PyG's per-type layout).

    The endpoints of a batch's label edges (and of its negatives) are the
    seeds of one neighbourhood sample. Negatives are drawn uniformly (or by
    ``src_weight`` / ``dst_weight``) with replacement, as PyG does (a
    negative may be a true edge, unless ``strict_negatives``), from the
    loader's ``generator`` (torch's global RNG without one; each worker's
    own RNG in worker processes).

    The arguments shared with :class:`~pyg_fastload.FastNeighborLoader`
    mean what they mean there (batches are identical pipelined or not).

    Args:
        data: a ``Data``, a ``(FeatureStore, GraphStore)`` tuple or a
            ``HeteroData``.
        num_neighbors (List[int] or Dict[EdgeType, List[int]]): fan-out per
            hop (``-1``: all; ``[]``: the label edges' endpoints alone); per
            edge type on a ``HeteroData``.
        edge_label_index (torch.Tensor, optional): the label edges ``[2,
            E]`` (default: every edge of ``data``); on a ``HeteroData`` an
            edge type or ``(edge_type, tensor)``, the type as ``(source,
            relation, destination)`` or, if only one relation joins them,
            ``(source, destination)``.
        edge_label (torch.Tensor, optional): one label per label edge.
        replace (bool): sample with replacement.
        subgraph_type (str): ``'directional'``, ``'bidirectional'`` or
            ``'induced'``.
        disjoint (bool): one tree per seed.
        weight_attr (str, optional): edge attribute with sampling weights.
        transform (callable, optional): applied to every mini-batch.
        transform_sampler_output (callable, optional): applied to every
            :class:`~torch_geometric.sampler.SamplerOutput`.
        is_sorted (bool): ``edge_index`` is sorted by destination
            (checked; needs a ``Data``).
        filter_per_worker (bool, optional): join the features in the
            worker processes rather than in the main one (:obj:`None`: as
            PyG decides).
        directed (bool): deprecated, ``False`` means ``'induced'``.
        pipeline_settings (PipelineSettings or dict, optional): how
            batches are sampled and overlapped with the model; each field
            may also be given as a keyword of its own (``pipeline=False``).
        device (torch.device or str, optional): where batches are returned
            (a CUDA device: copied from pinned memory on a side stream).
        neg_sampling (NegativeSampling or str or dict, optional): the
            ``'binary'`` or ``'triplet'`` negatives (``amount``,
            ``weight``; a batch draws at most
            :data:`~pyg_fastload.loader.link_inputs.MAX_NEGATIVES`).
        neg_sampling_ratio (float, optional): binary negatives per
            positive (PyG's older form of ``neg_sampling``).
        edge_label_time (torch.Tensor, optional): the time of every label
            edge, with :obj:`time_attr`: its endpoints' trees hold only
            neighbours not later than it, and negatives (node-level times)
            only nodes not later than it (``disjoint`` is then on).
        time_attr (str, optional): the node or edge attribute holding the
            graph's times (temporal sampling).
        temporal_strategy (str): ``'uniform'`` or ``'last'`` (the most
            recent valid neighbours).
        strict_negatives (bool): never draw a true edge as a negative
            (drawn pairs checked against the sorted edge keys and redrawn;
            an error names a source node linked to every node).
        neighbor_sampler (str, dict or sampler, optional): a sampler's name
            (``'neighbor'``, the default, ``'labor'``, ``'random_walk'``;
            GraphSAINT's subgraphs are for node losses and refused) or
            ``{'class_path': ..., 'init_args': {...}}``, built over
            :obj:`data` as :class:`~pyg_fastload.FastNeighborLoader`
            builds it; or the sampler to draw with (e.g. DSP's collective
            sampler over a rank's part; of :obj:`data`'s kind of graph),
            whose :obj:`num_neighbors` and sampling options are then its
            own.
        **kwargs: :class:`torch.utils.data.DataLoader` arguments
            (``batch_size``, ``shuffle``, ``num_workers``, ``generator``).

    Example:
        >>> import torch
        >>> from torch_geometric.data import Data
        >>> from pyg_fastload import FastLinkNeighborLoader
        >>> gen = torch.Generator().manual_seed(0)
        >>> data = Data(x=torch.randn(100, 8, generator=gen),
        ...             edge_index=torch.randint(0, 100, (2, 1000),
        ...                                      generator=gen))
        >>> loader = FastLinkNeighborLoader(
        ...     data, num_neighbors=[5, 3], batch_size=16,
        ...     edge_label_index=data.edge_index[:, :64],
        ...     neg_sampling='binary')  # one negative per label edge
        >>> batch = next(iter(loader))
        >>> batch.edge_label_index.size(1), batch.edge_label.sum().item()
        (32, 16.0)
        >>> bool((batch.edge_label_index < batch.num_nodes).all())
        True
    """
    def __init__(
        self,
        data: Union[Data, HeteroData, tuple],
        num_neighbors: List[int],
        edge_label_index: Optional[Tensor] = None,
        edge_label: Optional[Tensor] = None,
        edge_label_time: Optional[Tensor] = None,
        replace: bool = False,
        subgraph_type: Union[SubgraphType, str] = 'directional',
        disjoint: bool = False,
        temporal_strategy: str = 'uniform',
        neg_sampling: Optional[NegativeSampling] = None,
        neg_sampling_ratio: Optional[Union[int, float]] = None,
        time_attr: Optional[str] = None,
        weight_attr: Optional[str] = None,
        transform: Optional[Callable] = None,
        transform_sampler_output: Optional[Callable] = None,
        is_sorted: bool = False,
        filter_per_worker: Optional[bool] = None,
        neighbor_sampler: Union[str, Dict[str, Any], GraphSampler,
                                None] = None,
        directed: bool = True,
        strict_negatives: bool = False,
        pipeline_settings: Optional[PipelineSettings] = None,
        device: Optional[Union[str, torch.device]] = None,
        **kwargs: Any,
    ):
        settings = PipelineSettings.of(pipeline_settings, kwargs)
        kind = graph_input(data)
        hetero, stores = kind.hetero, kind.stores
        if is_sorted and not hetero:
            check_sorted_by_destination(data)
        if not hetero and names_edge_type(edge_label_index):
            raise ValueError("'edge_label_index' names an edge type, which "
                             "only a HeteroData has: pass a [2, num_edges] "
                             "tensor")
        if (edge_label_time is None) != (time_attr is None):
            given = 'time_attr' if edge_label_time is None \
                else 'edge_label_time'
            raise ValueError(
                f"temporal link sampling needs both 'edge_label_time' (the "
                f"time of every label edge) and 'time_attr' (the graph's "
                f"node or edge times); got only {given!r}")
        num_workers = kwargs.get('num_workers', 0)
        given = neighbor_sampler if built(neighbor_sampler) else None
        choice = SamplerChoice.of(None if given is not None
                                  else neighbor_sampler)
        placement = Placement.of_loader(
            device, settings.sampling_device, num_workers,
            given_sampler=given is not None)
        if given is not None and \
                isinstance(given, HeteroNeighborSampler) != hetero:
            kinds = ('homogeneous', 'heterogeneous')
            raise ValueError(
                f"'neighbor_sampler' ({type(neighbor_sampler).__name__}) "
                f"samples a {kinds[not hetero]} graph, 'data' is "
                f"{kinds[hetero]}: give a sampler of its kind "
                f"({'HeteroNeighborSampler' if hetero else 'FastNeighbor'}"
                f"{'' if hetero else 'Sampler'}), or leave it out")
        common = dict(num_neighbors=num_neighbors, replace=replace,
                      subgraph_type=subgraph_type, disjoint=disjoint,
                      weight_attr=weight_attr, directed=directed,
                      share_memory=num_workers > 0,
                      time_attr=time_attr,
                      temporal_strategy=temporal_strategy)
        if hetero:
            if not stores:
                check_hetero_features(data)
            sampler: Any = given or choice.build(data, **common)
            edge_label_index = hetero_label_edges(
                edge_label_index, edge_label, sampler.topology)
            check_label_time(edge_label_time, edge_label_index, sampler)
        else:
            if not stores:
                check_has_features(data, need_x=False)
            sampler = given or choice.build(data, **common,
                                            device=placement.sampling)
            if edge_label_index is None:
                if stores:
                    raise ValueError("'edge_label_index' is needed with a "
                                     "(FeatureStore, GraphStore) tuple")
                edge_label_index = data.edge_index
            check_label_edges(edge_label_index, edge_label,
                              sampler.num_nodes, sampler.num_nodes)
            check_label_time(edge_label_time, edge_label_index, sampler)
        placement = placement.sampled_on(sampler.device, num_workers)
        check_negative_spec(neg_sampling, neg_sampling_ratio)
        self.strict_negatives = bool(strict_negatives)
        super().__init__(
            data=data, link_sampler=sampler,
            # PyG reads stores' label edges as (edge type, tensor)
            edge_label_index=edge_label_index if hetero or not stores
            else (None, edge_label_index),
            edge_label=edge_label,
            edge_label_time=edge_label_time,
            neg_sampling=neg_sampling, neg_sampling_ratio=neg_sampling_ratio,
            transform=transform,
            transform_sampler_output=transform_sampler_output,
            filter_per_worker=filter_per_worker, **kwargs)
        # a batch_sampler's batches have no set size: the amount alone
        check_negatives(self.neg_sampling, self.batch_size or 1,
                        'neg_sampling.amount' if neg_sampling is not None
                        else 'neg_sampling_ratio')
        prepare_sampler(sampler, self.input_data, self.batch_size or 1,
                        self.drop_last)
        self.setup_pipeline(settings, placement)

    def batch_sampling(self) -> SampleFn:
        sampler, inputs = self.link_sampler, self.input_data
        neg_sampling, strict = self.neg_sampling, self.strict_negatives

        def sample(index: Any, generator: torch.Generator) -> SamplerOutput:
            return sampler.sample_from_edges(
                inputs[index], neg_sampling=neg_sampling,
                generator=generator, strict=strict)
        return sample

    def collate_fn(self, index: Union[Tensor, List[int]]) -> Any:
        r"""Samples a batch of label edges in a worker process
        (``num_workers > 0``), from the worker's RNG."""
        out = self.link_sampler.sample_from_edges(
            self.input_data[index], neg_sampling=self.neg_sampling,
            strict=self.strict_negatives)
        if self.filter_per_worker:
            out = self.filter_fn(out)
        return out

    def filter_fn(self, out: Union[SamplerOutput, HeteroSamplerOutput]
                  ) -> Union[Data, HeteroData]:
        r"""The batch with its features joined as the node loader joins
        them (a ``Data``'s or ``HeteroData``'s matrices into recycled
        buffers, a :class:`~pyg_fastload.storage.TieredFeatureStore`
        through its tiers; in the main process), and the label edges in
        PyG's layout."""
        if is_sampler_output(out, hetero=True):
            return self._hetero_filter(out)
        store = self._feature_source
        pooled = pooled_attrs(self.data) if is_data(
            self.data, hetero=False) else []
        if get_worker_info() is not None or (store is None and not pooled):
            return with_edge_weight(super().filter_fn(on_host(out)), out)
        if self.transform_sampler_output:
            out = self.transform_sampler_output(out)
        if store is not None:
            data = self._join.from_source(store, out, self.time_breakdown)
        else:
            data = self._join.from_data(self.data, pooled, out,
                                        self.time_breakdown)
        data.n_id, data.e_id, data.batch = out.node, out.edge, out.batch
        with_edge_weight(data, out)
        data.num_sampled_nodes = out.num_sampled_nodes
        data.num_sampled_edges = out.num_sampled_edges
        data.input_id = out.metadata[0]
        if self.neg_sampling is None or self.neg_sampling.is_binary():
            data.edge_label_index = out.metadata[1]
            data.edge_label = out.metadata[2]
            data.edge_label_time = out.metadata[3]
        else:
            data.src_index = out.metadata[1]
            data.dst_pos_index = out.metadata[2]
            data.dst_neg_index = out.metadata[3]
            data.seed_time = out.metadata[4]
        return data if self.transform is None else self.transform(data)

    def _hetero_filter(self, out: HeteroSamplerOutput) -> HeteroData:
        if get_worker_info() is not None:
            return with_edge_weight(super().filter_fn(out), out)
        if self.transform_sampler_output:
            out = self.transform_sampler_output(out)
        data = with_edge_weight(self.join_hetero(out), out)
        input_type = self.input_data.input_type
        data[input_type].input_id = out.metadata[0]
        if self.neg_sampling is None or self.neg_sampling.is_binary():
            data[input_type].edge_label_index = out.metadata[1]
            data[input_type].edge_label = out.metadata[2]
            data[input_type].edge_label_time = out.metadata[3]
        else:
            data[input_type[0]].src_index = out.metadata[1]
            data[input_type[-1]].dst_pos_index = out.metadata[2]
            data[input_type[-1]].dst_neg_index = out.metadata[3]
            data[input_type[0]].seed_time = out.metadata[4]
            data[input_type[-1]].seed_time = out.metadata[4]
        return data if self.transform is None else self.transform(data)
