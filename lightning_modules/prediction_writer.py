r"""``PredictionWriter``: what ``trainer.predict`` (``pyg-fastload
predict``) predicted for every node, written to a directory in the format
of :func:`pyg_fastload.inference.write_predictions`."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import BasePredictionWriter

from pyg_fastload.inference import write_predictions
from pyg_fastload.inference.prediction_files import PREDICTIONS_DIR
from pyg_fastload.io.staging import check_target

from .errors import ConfigError

__all__ = ['PredictionWriter']


class PredictionWriter(BasePredictionWriter):
    r"""Writes the class :class:`NodeClassifier` predicts for every node
    of the prediction run (and, with :obj:`logits`, its outputs; with
    ``NodeClassifier(predict_embeddings=True)``, its last hidden layer) to
    :obj:`out_dir`, sorted by node id, and prints where. The directory is
    put in place only when complete; an existing one is refused before
    anything is predicted, unless :obj:`overwrite`. With several ranks,
    each predicts its share of the nodes and the first rank writes them
    all, as one file set (their rows pass through its memory).

    From the command line::

        pyg-fastload predict -c run.yaml --ckpt_path last.ckpt \
            --trainer.callbacks+=PredictionWriter \
            --trainer.callbacks.out_dir predictions

    Args:
        out_dir (str): the directory to create.
        logits (bool): also write ``logits.npy`` (``[N, num_classes]``).
        overwrite (bool): replace an existing predictions directory.

    Example:
        >>> import pytorch_lightning as pl
        >>> from pyg_fastload.inference import read_predictions
        >>> from pyg_fastload.lightning import (FastLoadDataModule,
        ...                                     NodeClassifier,
        ...                                     PredictionWriter)
        >>> data = FastLoadDataModule('tiny', num_neighbors=[5, 5],
        ...                           batch_size=512, progress=False)
        >>> model = NodeClassifier(in_channels=16, num_classes=4,
        ...                        hidden_channels=16, num_layers=2)
        >>> writer = PredictionWriter('predictions')
        >>> trainer = pl.Trainer(
        ...     callbacks=[writer], accelerator='cpu', logger=False,
        ...     enable_progress_bar=False, enable_model_summary=False)
        >>> _ = trainer.predict(model, data)  # doctest: +ELLIPSIS
        pyg-fastload: wrote the predicted classes of 2,000 nodes to '...'
        >>> read_predictions('predictions')['node_ids'][:3].tolist()
        [0, 1, 2]
    """
    def __init__(self, out_dir: str, logits: bool = False,
                 overwrite: bool = False):
        super().__init__(write_interval='epoch')
        self.out_dir = Path(out_dir).expanduser()
        self.logits = bool(logits)
        self.overwrite = bool(overwrite)
        #: Where the last run's predictions were written.
        self.path: Optional[Path] = None

    def on_predict_start(self, trainer: pl.Trainer,
                         pl_module: pl.LightningModule) -> None:
        problem = None
        if trainer.global_rank == 0:  # the rank that writes
            try:  # before any work: an existing directory is refused now
                check_target(self.out_dir, self.overwrite, PREDICTIONS_DIR)
            except (FileExistsError, ValueError) as error:
                problem = str(error)
        if trainer.world_size > 1:  # every rank stops, not only the first
            problem = trainer.strategy.broadcast(problem, src=0)
        if problem is not None:
            raise ConfigError('trainer.callbacks',
                              f"PredictionWriter: {problem}")

    def write_on_epoch_end(self, trainer: pl.Trainer,
                           pl_module: pl.LightningModule,
                           predictions: Sequence[Any],
                           batch_indices: Sequence[Any]) -> None:
        outputs = _flat(predictions)
        names = ['n_id', 'pred', *(['logits'] if self.logits else []),
                 *(['embeddings'] if outputs and 'embeddings' in outputs[0]
                   else [])]
        mine = {name: torch.cat([out[name].cpu() for out in outputs])
                for name in names} if outputs else {}
        shares = [mine]
        if trainer.world_size > 1:  # every rank's share to the first
            shares = [None] * trainer.world_size if \
                trainer.global_rank == 0 else None
            torch.distributed.gather_object(mine, shares, dst=0)
        if trainer.global_rank == 0:
            self._write(trainer, pl_module, [s for s in shares if s])
        if trainer.world_size > 1:
            trainer.strategy.barrier('PredictionWriter')

    def _write(self, trainer: pl.Trainer, pl_module: pl.LightningModule,
               shares: List[Dict[str, torch.Tensor]]) -> None:
        if not shares:
            raise RuntimeError("PredictionWriter got no predictions: run "
                               "trainer.predict with return_predictions "
                               "left on")
        rows = {name: torch.cat([share[name] for share in shares])
                for name in shares[0]}
        schema = getattr(trainer.datamodule, 'hetero_schema', None)
        self.path = write_predictions(
            self.out_dir, rows['n_id'], rows['pred'], rows.get('logits'),
            rows.get('embeddings'),
            node_type=None if schema is None else schema.target,
            overwrite=self.overwrite,
            info={'model': type(pl_module).__name__,
                  'ranks': trainer.world_size})
        print(f"pyg-fastload: wrote the predicted classes of "
              f"{rows['n_id'].numel():,} nodes to '{self.path}'")


def _flat(predictions: Sequence[Any]) -> List[Any]:
    r"""The per-batch outputs of one prediction loader or several."""
    out: List[Any] = []
    for item in predictions:
        out.extend(_flat(item) if isinstance(item, (list, tuple))
                   else [item])
    return out
