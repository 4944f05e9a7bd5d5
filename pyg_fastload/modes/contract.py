r"""The batch contract: what a mode's batches may carry beyond PyG's
attributes, and the two functions a model reads it through, so no model
looks for a mode's attributes itself.

* ``loss_norm`` (``int``, HopGNN): the seed loss is the sum over the
  batch's seeds divided by it (the per-rank batch size), so that a rank
  training more or fewer roots than its share still gives DDP the update
  of data-parallel training.
* ``step_ptr`` (``Tensor``, HopGNN): the batch's roots form time steps
  ``[step_ptr[j], step_ptr[j + 1])``, one per origin model, trained one
  forward and backward each with gradients accumulated.
* ``node_norm``, ``edge_norm`` and ``loss_norm`` (GraphSAINT,
  :mod:`~pyg_fastload.sampling.saint`): the batch is a subgraph whose
  seeds (the first ``batch_size`` nodes) are its nodes among the loader's
  seeds (the training nodes); the seed loss is ``sum(node_norm * loss) /
  loss_norm`` over them (an unbiased estimate of the mean over every
  training node), and a model's mean aggregation weighs each in-edge
  ``(u, v)`` by GraphSAINT's ``1 / alpha_uv = C_v / C_uv``
  (:func:`edge_weight`).
"""
from __future__ import annotations

from typing import List, Optional

import torch.nn.functional as F
from torch import Tensor
from torch_geometric.data import Data

from ..distributed.hopgnn import split_time_steps

__all__ = ['seed_loss', 'time_steps', 'edge_weight']


def seed_loss(logits: Tensor, y: Tensor, batch: Data) -> Tensor:
    r"""Cross-entropy of the seeds' :obj:`logits` against :obj:`y`: the
    mean, or the sum (each seed's weighted by its ``node_norm`` where the
    batch carries them) divided by ``batch.loss_norm`` where the batch
    carries one."""
    if 'node_norm' in batch:
        loss = F.cross_entropy(logits, y, reduction='none')
        return (loss * batch.node_norm[:y.numel()]).sum() / batch.loss_norm
    if 'loss_norm' in batch:
        return F.cross_entropy(logits, y, reduction='sum') / batch.loss_norm
    return F.cross_entropy(logits, y)


def edge_weight(batch: Data) -> Optional[Tensor]:
    r"""The weights a model's mean aggregation takes for the batch's edges:
    the sampler's ``edge_weight`` (LABOR-*'s), :obj:`None` (the plain
    mean), or on a GraphSAINT subgraph the paper's aggregator
    normalisation ``1 / alpha_uv = C_v / C_uv`` of each edge ``(u, v)``
    (``C``: how often a node or edge was in a subgraph of the estimate),
    normalised to sum to 1 over each node's in-edges (a weighted mean).
    PyG's ``edge_norm`` is ``C_u / C_uv`` (the source's count), and
    ``node_norm`` is proportional to ``1 / C``: the weight is ``edge_norm *
    node_norm[u]`` up to a factor of ``v``'s, which the normalisation
    divides out."""
    if 'edge_norm' not in batch:
        return batch.get('edge_weight')
    row, col = batch.edge_index
    norm = batch.edge_norm * batch.node_norm.index_select(0, row)
    total = norm.new_zeros(batch.num_nodes).index_add_(0, col, norm)
    return norm / total.index_select(0, col)


def time_steps(batch: Data) -> List[Data]:
    r"""The batch's time steps: the batch itself, or one batch per step of
    a ``step_ptr`` with more than one step."""
    if 'step_ptr' in batch and batch.step_ptr.numel() > 2:
        return split_time_steps(batch)
    return [batch]
