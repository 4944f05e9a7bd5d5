r"""``PredictionWriter``: what ``trainer.predict`` (``pyg-fastload
predict``) predicted for every node, written to a directory in the format
of :func:`pyg_fastload.inference.write_predictions`."""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import pytorch_lightning as pl
import torch
import torch.distributed as dist
from pytorch_lightning.callbacks import BasePredictionWriter
from torch import Tensor

from pyg_fastload.config import format_bytes
from pyg_fastload.inference import write_embedding_tables, write_predictions
from pyg_fastload.inference.prediction_files import PREDICTIONS_DIR
from pyg_fastload.io.staging import TargetExistsError, check_target
from pyg_fastload.storage import MemoryWatch

from .errors import ConfigError
from .link_predictor import LinkPredictor

__all__ = ['PredictionWriter']


#: How a user of the writer asks it to replace an existing directory: the
#: command line's key (the writer being the callback last added, as the
#: ``next`` line of a fit adds it), a config's, Python's.
OVERWRITE = ("`--trainer.callbacks.overwrite true` (after the writer's "
             "`--trainer.callbacks+=`; in a config, `overwrite: true` in its "
             "init_args; in Python, PredictionWriter(..., overwrite=True))")


class PredictionWriter(BasePredictionWriter):
    r"""Writes the class :class:`NodeClassifier` predicts for every node
    of the prediction run (and, with :obj:`logits`, its outputs; with
    ``NodeClassifier(predict_embeddings=True)``, its last hidden layer) to
    :obj:`out_dir`, sorted by node id, and prints where. The directory is
    put in place only when complete; an existing one is refused before
    anything is predicted, unless :obj:`overwrite`. With several ranks,
    each predicts its share of the nodes and the first rank writes them
    all, as one file set (their rows pass through its memory).

    A heterogeneous :class:`LinkPredictor`'s embeddings are one table per
    node type it embeds, each in a subdirectory of :obj:`out_dir` (named
    after the type; the layout of
    :func:`pyg_fastload.inference.write_embedding_tables`), one file set
    per type from any number of ranks.

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
        pyg-fastload: wrote the predicted classes of 2,000 nodes to ...
        >>> read_predictions('predictions')['node_ids'][:3].tolist()
        [0, 1, 2]
    """
    def __init__(self, out_dir: str, logits: bool = False,
                 overwrite: bool = False):
        super().__init__(write_interval='epoch')
        if not isinstance(out_dir, (str, os.PathLike)) or not str(out_dir):
            raise ConfigError('trainer.callbacks', f"PredictionWriter: "
                              f"'out_dir' must be a directory path, got "
                              f"{out_dir!r}")
        for key, value in (('logits', logits), ('overwrite', overwrite)):
            if not isinstance(value, bool):
                raise ConfigError('trainer.callbacks', f"PredictionWriter: "
                                  f"'{key}' must be true or false, got "
                                  f"{value!r}")
        self.out_dir = Path(out_dir).expanduser()
        self.logits = logits
        self.overwrite = overwrite
        #: Where the last run's predictions were written.
        self.path: Optional[Path] = None
        self._watch: Optional[MemoryWatch] = None
        self._started = 0.0

    def on_predict_start(self, trainer: pl.Trainer,
                         pl_module: pl.LightningModule) -> None:
        self._watch = MemoryWatch().start()
        self._started = time.perf_counter()
        if self.logits and not pl_module.hparams.get('predict_logits',
                                                     True):
            raise ConfigError('trainer.callbacks', "PredictionWriter: "
                              "'logits' is true, but the model predicts "
                              "classes alone (predict_logits: false): set "
                              "one of them the other way")
        problem = None
        if trainer.global_rank == 0:  # the rank that writes
            try:  # before any work: an existing directory is refused now
                check_target(self.out_dir, self.overwrite, PREDICTIONS_DIR)
            except TargetExistsError as error:
                problem = str(error.naming(OVERWRITE))
            except (FileExistsError, NotADirectoryError, ValueError) as error:
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
        memory = self._peaks()  # the prediction is done
        outputs = _flat(predictions)
        if not outputs and trainer.world_size == 1:
            raise RuntimeError("PredictionWriter got no predictions: run "
                               "trainer.predict with return_predictions "
                               "left on")
        # a link predictor gives embeddings alone (kind 'embeddings')
        embeddings_only = isinstance(pl_module, LinkPredictor)
        wanted = {'n_id': torch.long} if embeddings_only else \
            {'n_id': torch.long, 'pred': torch.long}
        if embeddings_only:
            wanted['embeddings'] = torch.float
        elif self.logits:
            wanted['logits'] = torch.float
        if not embeddings_only and \
                pl_module.hparams.get('predict_embeddings', False):
            wanted['embeddings'] = torch.float
        if embeddings_only and pl_module.edge_type is not None:
            tables = {t: _rows(trainer, outputs, wanted, t)
                      for t in pl_module.node_types}  # one table per type
        else:
            tables = {None: _rows(trainer, outputs, wanted)}
        error = None
        if trainer.global_rank == 0:
            try:
                self._write(trainer, pl_module, tables, memory)
            except Exception as exc:  # raised after the others are told
                error = exc
        if trainer.world_size > 1:
            trainer.strategy.barrier('PredictionWriter')
        if error is not None:
            raise error

    def _write(self, trainer: pl.Trainer, pl_module: pl.LightningModule,
               tables: Dict[Optional[str], Dict[str, Tensor]],
               memory: str) -> None:
        info = {'model': type(pl_module).__name__,
                'ranks': trainer.world_size}
        if None not in tables:  # one table per node type
            self.path = write_embedding_tables(
                self.out_dir, {t: (rows['n_id'], rows['embeddings'])
                               for t, rows in tables.items()},
                overwrite=self.overwrite, info=info)
            count = sum(rows['n_id'].numel() for rows in tables.values())
            print(f"pyg-fastload: wrote the embeddings of {count:,} nodes "
                  f"to '{self.path}', one subdirectory per node type: "
                  + ', '.join(f"{t} ({rows['n_id'].numel():,})"
                              for t, rows in tables.items()))
            return
        rows = tables[None]
        schema = getattr(trainer.datamodule, 'hetero_schema', None)
        self.path = write_predictions(
            self.out_dir, rows['n_id'], rows.get('pred'), rows.get('logits'),
            rows.get('embeddings'),
            node_type=None if schema is None else schema.target,
            overwrite=self.overwrite, info=info)
        what = 'predicted classes' if 'pred' in rows else 'embeddings'
        print(f"pyg-fastload: wrote the {what} of "
              f"{rows['n_id'].numel():,} nodes to '{self.path}'{memory}")

    def on_exception(self, trainer: pl.Trainer,
                     pl_module: pl.LightningModule,
                     exception: BaseException) -> None:
        self._peaks()

    def _peaks(self) -> str:
        r"""How long the prediction took and the process's peak memory
        meanwhile, as the end of a sentence."""
        seconds = time.perf_counter() - self._started
        peaks = self._watch.stop() if self._watch is not None else {}
        self._watch = None
        memory = '' if 'anon' not in peaks else (
            f"; peak memory {format_bytes(peaks['anon'])} allocated, "
            f"{format_bytes(peaks['rss'])} resident with mapped file pages")
        return f" (predicted in {seconds:.1f} s{memory})"


def _rows(trainer: pl.Trainer, outputs: List[Any],
          wanted: Dict[str, torch.dtype],
          node_type: Optional[str] = None) -> Dict[str, Tensor]:
    r"""The rows named in :obj:`wanted` of every batch of :obj:`outputs`
    (of :obj:`node_type`'s dicts, if given), concatenated, and with several
    ranks every rank's on the first (a collective; the names are the same
    on every rank)."""
    rows: Dict[str, Tensor] = {}
    for name, dtype in wanted.items():
        mine = [out[name] if node_type is None else out[name][node_type]
                for out in outputs]
        part = torch.cat(mine).cpu().to(dtype) if mine else \
            torch.empty(0, dtype=dtype)
        if trainer.world_size > 1:  # every rank's rows to the first
            part = _gathered(part)
        if part is not None:
            rows[name] = part
    return rows


def _gathered(rows: Tensor) -> Optional[Tensor]:
    r"""Every rank's :obj:`rows` (a collective; tensors, never pickled),
    concatenated on the first rank (:obj:`None` on the others); a rank
    with no rows sends none."""
    world = dist.get_world_size()
    width = rows.shape[1] if rows.dim() > 1 else -1
    shape = torch.tensor([rows.size(0), width])
    shapes = [torch.zeros_like(shape) for _ in range(world)]
    dist.all_gather(shapes, shape)
    most = max(int(s[0]) for s in shapes)
    width = max(int(s[1]) for s in shapes)
    padded = rows.new_zeros((most, width) if width >= 0 else (most, ))
    if rows.numel():
        padded[:rows.size(0)] = rows
    first = dist.get_rank() == 0
    parts = [torch.empty_like(padded) for _ in range(world)] if first \
        else None
    dist.gather(padded, parts, dst=0)
    if not first:
        return None
    return torch.cat([part[:int(s[0])] for part, s in zip(parts, shapes)])


def _flat(predictions: Sequence[Any]) -> List[Any]:
    r"""The per-batch outputs of one prediction loader or several."""
    out: List[Any] = []
    for item in predictions:
        out.extend(_flat(item) if isinstance(item, (list, tuple))
                   else [item])
    return out
