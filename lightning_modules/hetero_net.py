r"""The network :class:`~pyg_fastload.lightning.NodeClassifier` trains on a
``HeteroData``: every node type's input projected to the hidden width (a
linear layer over its features; for types without features a learned
embedding per node, or zeros), then layers of one GraphSAGE or GAT
convolution per relation, summed per destination type (what PyG's
``to_hetero`` makes of ``GraphSAGE``/``GAT``), each layer trimmed to the
hops it still needs (PyG's ``trim_to_layer``). Also the check of the sizes
every model of :class:`~pyg_fastload.lightning.NodeClassifier` and
:class:`~pyg_fastload.lightning.LinkPredictor` is built with
(:func:`check_sizes`)."""
from __future__ import annotations

from typing import Any, Dict, List, Optional

import torch
from torch import Tensor
from torch_geometric.data import HeteroData
from torch_geometric.nn import GATConv, HeteroConv
from torch_geometric.utils import trim_to_layer

from pyg_fastload.config import available_memory, format_bytes
from pyg_fastload.modes import HeteroSchema

from .errors import ConfigError
from .sage import WeightedSAGEConv

__all__ = ['HeteroNet', 'HETERO_MODELS', 'MAX_LAYERS', 'check_graph_kind',
           'check_sizes',
           'unused']

#: The models a ``HeteroData`` can be trained with.
HETERO_MODELS = ('sage', 'gat')
#: The most layers a model is built with: PyG's basic GNNs (no residual
#: connections) over-smooth long before, and DeeperGCN's deepest had 112.
MAX_LAYERS = 128


def check_sizes(hidden_channels: int, num_layers: int, heads: int,
                widths: Dict[str, Optional[int]]) -> None:
    r"""Refuses, naming the argument, sizes that are not positive ints, more
    than :data:`MAX_LAYERS` layers, and weights larger than the memory
    available: a :obj:`widths` x :obj:`hidden_channels` layer for each of
    :obj:`widths` (``in_channels``, ``num_classes``; :obj:`None`: not known
    yet), and ``num_layers - 1`` hidden ``hidden_channels`` x
    ``hidden_channels`` layers, before anything is allocated (also for a
    checkpoint's hyper-parameters)."""
    for key, value in (('hidden_channels', hidden_channels),
                       ('num_layers', num_layers), ('heads', heads),
                       *widths.items()):
        if value is not None and (isinstance(value, bool) or not
                                  isinstance(value, int) or value < 1):
            raise ConfigError(key, f"{value!r} must be a positive int")
    if num_layers > MAX_LAYERS:
        raise ConfigError('num_layers', f"{num_layers:,} layers: give at most "
                          f"{MAX_LAYERS} (deeper stacks of these layers "
                          f"train no better and take minutes to build)")
    for key, width in widths.items():
        if width is not None:
            _check_layers_fit(key, width, hidden_channels, 1)
    _check_layers_fit('hidden_channels', hidden_channels, hidden_channels,
                      num_layers - 1)


def _check_layers_fit(key: str, width: int, hidden: int, count: int) -> None:
    r"""Refuses :obj:`count` layers of :obj:`width` x :obj:`hidden` float32
    weights larger than the memory available, naming :obj:`key`, or
    ``hidden_channels`` where it is the larger side of the layer."""
    available = available_memory()
    size = count * width * hidden * 4
    if available and size > available:
        layers = f'a {width:,} x {hidden:,} layer' if count == 1 else \
            f'{count:,} layers of {width:,} x {hidden:,}'
        if hidden > width:
            key, width = 'hidden_channels', hidden
        raise ConfigError(key, f"{width:,} needs {layers} "
                          f"({format_bytes(size)}), more than the "
                          f"{format_bytes(available)} of memory available")


def _conv(model: str, hidden: int, out: int, last: bool, heads: int,
          dropout: float) -> torch.nn.Module:
    r"""One relation's convolution, as PyG's ``GraphSAGE`` / ``GAT`` build
    their layers (GAT: heads concatenated, averaged in the last layer)."""
    if model == 'sage':
        return WeightedSAGEConv((hidden, hidden), out)
    return GATConv((hidden, hidden), out if last else out // heads,
                   heads=heads, concat=not last, dropout=dropout,
                   add_self_loops=False)


class HeteroNet(torch.nn.Module):
    r"""Logits of the target node type's nodes of a heterogeneous batch
    (:meth:`forward`), or every type's output (:meth:`embed`).

    Args:
        schema (HeteroSchema): the dataset's types, target and widths.
        model (str): ``'sage'`` or ``'gat'`` (one convolution per relation,
            summed per node type; ReLU and dropout between layers).
        hidden_channels, num_layers, dropout, heads: as in
            :class:`~pyg_fastload.lightning.NodeClassifier`.
        node_embeddings (bool): learn an embedding per node of the types
            without features (dense: an optimizer step updates every row);
            :obj:`False`: they enter as zeros and learn from their
            neighbours only.
        trim (bool): when a batch carries per-hop counts for as many hops
            as there are layers, layer ``l`` drops the outermost ``l`` hops
            (the seeds' outputs are unchanged; most of the work is saved).
        out_channels (int, optional): the last layer's width (default: the
            target's classes).
    """
    def __init__(self, schema: HeteroSchema, model: str,
                 hidden_channels: int, num_layers: int, dropout: float,
                 heads: int = 4, node_embeddings: bool = True,
                 trim: bool = True, out_channels: Optional[int] = None):
        super().__init__()
        self.target = schema.target
        self.hidden_channels = hidden_channels
        self.num_layers = num_layers
        self.dropout = dropout
        self.trim = trim
        self.featureless = [t for t in schema.node_types
                            if t not in schema.num_features]
        self.encoders = torch.nn.ModuleDict({
            t: torch.nn.Linear(schema.num_features[t], hidden_channels)
            for t in schema.node_types if t in schema.num_features})
        self.embeddings = torch.nn.ModuleDict({
            t: torch.nn.Embedding(schema.num_nodes[t], hidden_channels)
            for t in self.featureless if node_embeddings})
        self.convs = torch.nn.ModuleList()
        for layer in range(num_layers):
            last = layer == num_layers - 1
            out = hidden_channels if not last else (
                schema.num_classes if out_channels is None else out_channels)
            self.convs.append(HeteroConv({
                tuple(e): _conv(model, hidden_channels, out, last, heads,
                                dropout)
                for e in schema.edge_types}, aggr='sum'))

    def forward(self, batch: HeteroData, edge_weights: bool = False
                ) -> Tensor:
        x = self.embed(batch, edge_weights)
        # The other types' outputs enter with weight 0: every relation's
        # weights are then part of the loss, as DDP requires of parameters.
        return x[self.target] + 0.0 * unused(x, [self.target])

    def node_inputs(self, node_type: str, n_id: Optional[Tensor],
                    x: Optional[Tensor]) -> Tensor:
        r"""What the nodes :obj:`n_id` of :obj:`node_type` (features
        :obj:`x`) enter the first layer with: their encoded features, their
        learnt embeddings, or zeros (layer-wise inference reads it too)."""
        if node_type in self.encoders:
            return self.encoders[node_type](x)
        if node_type in self.embeddings:
            return self.embeddings[node_type](n_id)
        return torch.zeros(n_id.numel(), self.hidden_channels,
                           device=n_id.device)

    def between(self, layer: int, x: Tensor) -> Tensor:
        r"""What follows every layer but the last, on a type's rows."""
        return torch.nn.functional.dropout(x.relu(), self.dropout,
                                           self.training)

    def embed(self, batch: HeteroData,
              edge_weights: bool = False) -> Dict[str, Tensor]:
        r"""The last layer's output of every node type a relation leads
        into (the seeds of each type first); with :obj:`edge_weights`, each
        relation aggregates with its edges' ``edge_weight`` (a sampler's
        estimator weights; ``'sage'``)."""
        # the dataset's ids where n_id is a partition's (DatasetIds)
        x = {t: self.node_inputs(t, batch[t].get('dataset_id',
                                                 batch[t].get('n_id')),
                                 batch[t].get('x'))
             for t in [*self.encoders, *self.featureless]}
        edge_index = batch.edge_index_dict
        nodes = _hops(batch, 'num_sampled_nodes', self.num_layers + 1)
        edges = _hops(batch, 'num_sampled_edges', self.num_layers)
        trim = self.trim and nodes is not None and edges is not None
        weight = batch.collect('edge_weight') if edge_weights else None
        for layer, conv in enumerate(self.convs):
            if trim:
                x, edge_index, weight = trim_to_layer(
                    layer, nodes, edges, x, edge_index, weight)
            out = conv(x, edge_index) if weight is None else \
                conv(x, edge_index, edge_weight_dict=weight)
            if layer < self.num_layers - 1:
                out = {t: self.between(layer, v) for t, v in out.items()}
                # a type no relation leads into keeps its representation
                out = {**{t: v for t, v in x.items() if t not in out},
                       **out}
            x = out
        return x


def check_graph_kind(net: Optional[torch.nn.Module], datamodule: Any
                     ) -> None:
    r"""Refuses a network built before the data module was known (from a
    checkpoint's hyper-parameters) for the other kind of graph than the
    data module's dataset: a heterogeneous model given a homogeneous
    dataset or the reverse, named in one line instead of a ``TypeError``
    from the network's ``forward``. A data module without a dataset
    (partitions only) is not checked."""
    if net is None or getattr(getattr(datamodule, 'loading', None),
                              'source', None) is None:
        return
    model = isinstance(net, HeteroNet)
    schema = datamodule.hetero_schema
    if model == (schema is not None):
        return
    data = 'homogeneous' if model else \
        f"heterogeneous (node types {', '.join(schema.node_types)})"
    raise ConfigError('dataset', f"the model is "
                      f"{'heterogeneous' if model else 'homogeneous'} (as "
                      f"its arguments built it: a checkpoint's "
                      f"hyper-parameters, or the widths given) and the "
                      f"dataset {data}: give the dataset the model was "
                      f"trained on", section='data')


def unused(x: Dict[str, Tensor], used: List[str]) -> Tensor:
    r"""The sum of the outputs of the types not in :obj:`used` (a loss
    adds it with weight 0 so that every parameter takes part)."""
    return sum((value.sum() for key, value in x.items() if key not in used),
               torch.zeros(()))


def _hops(batch: HeteroData, key: str, count: int) -> Dict | None:
    r"""The batch's per-hop counts of :obj:`key` by type, if every type
    has :obj:`count` of them."""
    try:
        value = batch.collect(key)
    except KeyError:
        return None
    if not value or any(len(v) != count for v in value.values()):
        return None
    return {k: list(v) for k, v in value.items()}
