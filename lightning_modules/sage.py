r"""GraphSAGE layers that take a sampler's estimator weights: without
``edge_weight`` a :class:`WeightedSAGEConv` is PyG's ``SAGEConv`` (the mean
of the sampled in-neighbours' rows), with it the weighted sum ``sum_u w_ut
x_u``, which LABOR-*'s weights (``importance_sampling``, batches'
``edge_weight``) make an unbiased estimate of the mean over every
in-neighbour. The parameters are ``SAGEConv``'s, so checkpoints and
layer-wise inference (which passes no weights: the exact mean) are
unchanged."""
from __future__ import annotations

from typing import Any, Optional, Tuple, Union

import torch.nn.functional as F
from torch import Tensor
from torch_geometric.nn import GraphSAGE, SAGEConv

from .errors import ConfigError

__all__ = ['WeightedSAGEConv', 'WeightedGraphSAGE', 'WEIGHTED_MODELS',
           'edge_weights_of']

#: Models that aggregate with a sampler's estimator weights (a weighted sum
#: in place of the mean).
WEIGHTED_MODELS = ('sage', )


def edge_weights_of(datamodule: Any, model: str, key: str) -> bool:
    r"""Whether :obj:`datamodule`'s batches carry estimator weights that
    :obj:`model` (named by config key :obj:`key`) must aggregate with;
    refused for a model that cannot, and with a sparse ``adj_t``
    (``data.adjacency: sparse``) on a homogeneous graph: PyG's layers
    aggregate over ``adj_t`` without its values, so LABOR-*'s
    ``edge_weight`` and GraphSAINT's normalisation would be dropped (the
    typed model aggregates over ``edge_index``, with the weights).

    Args:
        datamodule: the trainer's data module (or :obj:`None`).
        model (str): the model or encoder name.
        key (str): its config key (``'model'``, ``'encoder'``).
    """
    weighs = bool(getattr(datamodule, 'edge_weights', False))
    if weighs and model not in WEIGHTED_MODELS:
        raise ConfigError('data.sampler', f"its batches weigh their edges "
                          f"(LABOR's importance_sampling, GraphSAINT's "
                          f"edge_norm), which {key} {model!r} cannot "
                          f"aggregate with: use {key}: sage (or "
                          f"importance_sampling: 0)")
    spec = getattr(datamodule, 'spec', None)
    if (weighs and getattr(spec, 'adjacency', None) == 'sparse'
            and getattr(datamodule, 'hetero_schema', None) is None):
        raise ConfigError('data.adjacency', f"'sparse' with data.sampler "
                          f"{spec.sampler.name!r}, whose batches weigh "
                          f"their edges (LABOR's importance_sampling, "
                          f"GraphSAINT's sample_coverage), which the "
                          f"model's aggregation over a sparse adj_t drops: "
                          f"use data.adjacency: edge_index (the default; "
                          f"it aggregates with the weights), or a sampler "
                          f"without weights (importance_sampling: 0)")
    return weighs


class WeightedSAGEConv(SAGEConv):
    r"""``SAGEConv`` with an optional ``edge_weight``: the weighted sum of
    the in-neighbours' rows in place of their mean."""

    def forward(self, x: Union[Tensor, Tuple[Tensor, Optional[Tensor]]],
                edge_index: Any, size: Any = None,
                edge_weight: Optional[Tensor] = None) -> Tensor:
        if edge_weight is None:
            return super().forward(x, edge_index, size)
        if isinstance(x, Tensor):
            x = (x, x)
        src = x[0]
        if self.project and hasattr(self, 'lin'):
            src = self.lin(src).relu()
        num_dst = x[1].size(0) if x[1] is not None else (
            size[1] if size is not None else src.size(0))
        row, col = edge_index[0], edge_index[1]
        messages = src.index_select(0, row) * edge_weight.view(-1, 1).to(
            src.dtype)
        out = src.new_zeros(num_dst, src.size(1)).index_add_(0, col, messages)
        out = self.lin_l(out)
        if self.root_weight and x[1] is not None:
            out = out + self.lin_r(x[1])
        if self.normalize:
            out = F.normalize(out, p=2., dim=-1)
        return out


class WeightedGraphSAGE(GraphSAGE):
    r"""PyG's ``GraphSAGE`` of :class:`WeightedSAGEConv` layers: its
    ``forward`` takes ``edge_weight`` (trimmed per layer as PyG trims it)."""
    supports_edge_weight = True

    def init_conv(self, in_channels: Any, out_channels: int,
                  **kwargs: Any) -> WeightedSAGEConv:
        return WeightedSAGEConv(in_channels, out_channels, **kwargs)

