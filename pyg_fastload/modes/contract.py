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
"""
from __future__ import annotations

from typing import List

import torch.nn.functional as F
from torch import Tensor
from torch_geometric.data import Data

from ..distributed.hopgnn import split_time_steps

__all__ = ['seed_loss', 'time_steps']


def seed_loss(logits: Tensor, y: Tensor, batch: Data) -> Tensor:
    r"""Cross-entropy of the seeds' :obj:`logits` against :obj:`y`: the
    mean, or the sum divided by ``batch.loss_norm`` where the batch carries
    one."""
    if 'loss_norm' in batch:
        return F.cross_entropy(logits, y, reduction='sum') / batch.loss_norm
    return F.cross_entropy(logits, y)


def time_steps(batch: Data) -> List[Data]:
    r"""The batch's time steps: the batch itself, or one batch per step of
    a ``step_ptr`` with more than one step."""
    if 'step_ptr' in batch and batch.step_ptr.numel() > 2:
        return split_time_steps(batch)
    return [batch]
