r"""A small Lightning module, data module and trainer for the callback
and report tests, and the tiered run they share (the ``tiered_run``
fixture)."""
import contextlib
import io
from pathlib import Path
from typing import Any, Dict, List

import pytorch_lightning as pl
import torch
import torch.nn.functional as F
from pytorch_lightning.loggers import CSVLogger
from torch_geometric.nn import GraphSAGE

from pyg_fastload import FastNeighborLoader, open_dataset
from pyg_fastload.datasets import load_synthetic, prepare_synthetic
from pyg_fastload.lightning.callbacks import LoaderMonitor


class TinyGNN(pl.LightningModule):
    r"""GraphSAGE on seed nodes; counts the rows its training batches
    gathered."""
    def __init__(self, num_features: int = 16, num_classes: int = 4):
        super().__init__()
        self.net = GraphSAGE(num_features, 16, 2, num_classes)
        self.train_rows: List[int] = []

    def _loss(self, batch):
        out = self.net(batch.x, batch.edge_index)[:batch.batch_size]
        return F.cross_entropy(out, batch.y[:batch.batch_size])

    def training_step(self, batch, batch_idx):
        self.train_rows.append(batch.num_nodes)
        return self._loss(batch)

    def validation_step(self, batch, batch_idx, dataloader_idx=0):
        self.log('val_loss', self._loss(batch), batch_size=batch.batch_size)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-2)


class Loaders(pl.LightningDataModule):
    def __init__(self, data: Any, train_mask, val_mask, batch_size: int,
                 val_loaders: int = 1):
        super().__init__()
        self.data, self.batch_size = data, batch_size
        self.train_mask, self.val_mask = train_mask, val_mask
        self.val_loaders = val_loaders

    def train_dataloader(self):
        return FastNeighborLoader(self.data, [4, 4],
                                  input_nodes=self.train_mask,
                                  batch_size=self.batch_size, shuffle=True,
                                  pipeline=False)

    def val_dataloader(self):
        return [
            FastNeighborLoader(self.data, [4, 4], input_nodes=self.val_mask,
                               batch_size=400, pipeline=False)
            for _ in range(self.val_loaders)
        ]


def trainer(**kwargs: Any) -> pl.Trainer:
    return pl.Trainer(**{
        'accelerator': 'cpu', 'enable_checkpointing': False,
        'enable_progress_bar': False, 'enable_model_summary': False,
        'log_every_n_steps': 1, **kwargs
    })


def fit_tiered_run(root: Path) -> Dict[str, Any]:
    r"""Two epochs on the tiny graph in :obj:`root`, features on disk behind
    device and host caches, validation twice per epoch on two loaders: the
    monitor, module, trainer, stores, graph, log directories and what the
    fit printed."""
    prepare_synthetic('tiny', root / 'tiny', cache_root=root / 'cache',
                      progress=False)
    stores = open_dataset(root / 'tiny', host_budget=0.1, device_budget=0.2)
    graph = load_synthetic('tiny', root=root / 'cache', progress=False)
    monitor, module = LoaderMonitor(), TinyGNN()
    fit = trainer(max_epochs=2, logger=CSVLogger(root / 'logs'),
                  val_check_interval=0.5, callbacks=[monitor])
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        fit.fit(module, datamodule=Loaders(stores, graph.train_mask,
                                           graph.val_mask, 256,
                                           val_loaders=2))
    return dict(monitor=monitor, module=module, trainer=fit, stores=stores,
                graph=graph, log_dir=Path(fit.log_dir), logs=root / 'logs',
                stdout=out.getvalue())
