r"""The network :class:`~pyg_fastload.lightning.NodeClassifier` trains on a
``HeteroData``: every node type's input projected to the hidden width (a
linear layer over its features; for types without features a learned
embedding per node, or zeros), then PyG's ``to_hetero`` over GraphSAGE or
GAT."""
from __future__ import annotations

import torch
from torch import Tensor
from torch_geometric.data import HeteroData
from torch_geometric.nn import GAT, GraphSAGE, to_hetero

from pyg_fastload.modes import HeteroSchema

__all__ = ['HeteroNet', 'HETERO_MODELS']

#: The models a ``HeteroData`` can be trained with.
HETERO_MODELS = ('sage', 'gat')


class HeteroNet(torch.nn.Module):
    r"""Logits of the target node type's nodes of a heterogeneous batch.

    Args:
        schema (HeteroSchema): the dataset's types, target and widths.
        model (str): ``'sage'`` or ``'gat'`` (made heterogeneous by
            ``to_hetero``, one copy per relation, summed per node type).
        hidden_channels, num_layers, dropout, heads: as in
            :class:`~pyg_fastload.lightning.NodeClassifier`.
        node_embeddings (bool): learn an embedding per node of the types
            without features (dense: an optimizer step updates every row);
            :obj:`False`: they enter as zeros and learn from their
            neighbours only.
    """
    def __init__(self, schema: HeteroSchema, model: str,
                 hidden_channels: int, num_layers: int, dropout: float,
                 heads: int = 4, node_embeddings: bool = True):
        super().__init__()
        self.target = schema.target
        self.hidden_channels = hidden_channels
        self.featureless = [t for t in schema.node_types
                            if t not in schema.num_features]
        self.encoders = torch.nn.ModuleDict({
            t: torch.nn.Linear(schema.num_features[t], hidden_channels)
            for t in schema.node_types if t in schema.num_features})
        self.embeddings = torch.nn.ModuleDict({
            t: torch.nn.Embedding(schema.num_nodes[t], hidden_channels)
            for t in self.featureless if node_embeddings})
        kwargs = dict(in_channels=hidden_channels,
                      hidden_channels=hidden_channels,
                      out_channels=schema.num_classes,
                      num_layers=num_layers, dropout=dropout)
        base = GraphSAGE(**kwargs) if model == 'sage' else GAT(
            heads=heads, add_self_loops=False, **kwargs)
        self.gnn = to_hetero(base, schema.metadata(), aggr='sum')

    def forward(self, batch: HeteroData) -> Tensor:
        x = {t: encoder(batch[t].x) for t, encoder in self.encoders.items()}
        for t in self.featureless:
            n_id = batch[t].n_id
            x[t] = self.embeddings[t](n_id) if t in self.embeddings else \
                torch.zeros(n_id.numel(), self.hidden_channels)
        out = self.gnn(x, batch.edge_index_dict)
        # The other types' outputs enter with weight 0: every relation's
        # weights are then part of the loss, as DDP requires of parameters.
        rest = sum(value.sum() for key, value in out.items()
                   if key != self.target)
        return out[self.target] + 0.0 * rest
