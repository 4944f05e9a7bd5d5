r"""Lightning set-up shared by the Lightning benchmarks (``accuracy``,
``hetero-accuracy``, ``fit``, ``time-to-accuracy``): PyG's data modules
they compare against, and a quiet trainer."""
from __future__ import annotations

import argparse
import contextlib
import logging
import warnings
from typing import Any, Dict, Iterator, List, Optional

import pytorch_lightning as pl
from torch_geometric.data import Data, HeteroData
from torch_geometric.data.lightning import LightningNodeData

from pyg_fastload.modes.schema import hetero_schema

from ..datamodule import FastLoadDataModule

__all__ = ['node_data_module', 'pyg_hetero_module', 'quiet_lightning',
           'quiet_trainer_kwargs']


def node_data_module(data: Data, num_neighbors: List[int], batch_size: int,
                     seed: int, pyg_workers: Optional[int] = None,
                     eval_batch_size: Optional[int] = None
                     ) -> pl.LightningDataModule:
    r"""The same node-classification data behind either loader:
    :class:`~pyg_fastload.lightning.FastLoadDataModule` when :obj:`pyg_workers`
    is :obj:`None`, else PyG's ``LightningNodeData`` (``NeighborLoader``)
    with that many workers."""
    if pyg_workers is None:
        return FastLoadDataModule(data, num_neighbors=num_neighbors,
                                  batch_size=batch_size,
                                  eval_batch_size=eval_batch_size,
                                  seed=seed, progress=False)
    eval_kwargs = {} if eval_batch_size is None else dict(
        batch_size=eval_batch_size)
    return LightningNodeData(data, loader='neighbor',
                             num_neighbors=num_neighbors,
                             batch_size=batch_size, num_workers=pyg_workers,
                             pin_memory=False, eval_loader_kwargs=eval_kwargs)


def pyg_hetero_module(data: HeteroData, args: argparse.Namespace,
                      workers: int = 0) -> pl.LightningDataModule:
    r"""PyG's ``LightningNodeData`` (``NeighborLoader`` with
    :obj:`workers` processes) over a heterogeneous graph's labelled type's
    masks, with ``args.fanout`` on every relation and ``args.batch_size``,
    telling the model the schema as our data module does."""
    schema = hetero_schema(data)
    store = data[schema.target]

    class NodeData(LightningNodeData):
        hetero_schema = schema

    return NodeData(
        data, input_train_nodes=(schema.target, store.train_mask),
        input_val_nodes=(schema.target, store.val_mask),
        input_test_nodes=(schema.target, store.test_mask), loader='neighbor',
        num_neighbors=args.fanout, batch_size=args.batch_size,
        num_workers=workers, pin_memory=False)


@contextlib.contextmanager
def quiet_lightning() -> Iterator[None]:
    r"""Silences Lightning's and PyG's informational logs and warnings
    (device summary, worker-count hints, PyG's pyg-lib deprecation) while
    the benchmark trains; restores them afterwards."""
    levels = {logger: logger.level
              for logger in map(logging.getLogger, (
                  'pytorch_lightning', 'lightning_fabric',
                  'lightning.pytorch', 'torch_geometric'))}
    for logger in levels:
        logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')
            yield
    finally:
        for logger, level in levels.items():
            logger.setLevel(level)


def quiet_trainer_kwargs() -> Dict[str, Any]:
    r"""``pl.Trainer`` arguments for a benchmark: CPU, no progress bar,
    logger, checkpoints or model summary."""
    return dict(accelerator='cpu', devices=1, logger=False,
                enable_checkpointing=False, enable_progress_bar=False,
                enable_model_summary=False, num_sanity_val_steps=0)
