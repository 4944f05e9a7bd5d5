r"""What ``pyg-fastload fit`` tells a user when it ends, whatever the task and
also after Ctrl-C: the validation result (accuracy; MRR, Hits@K and AUROC
for links), the plots of the run and where its logs, checkpoint and stats
are."""
from __future__ import annotations

import shlex
import warnings
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytorch_lightning as pl
from pytorch_lightning.callbacks import Callback

from .callbacks import STATS_FILENAME
from .link_predictor import LinkPredictor
from .report import plot_run

__all__ = ['RunEnd', 'result_line']

#: The validation metrics a fit ends with, in the words users know, in the
#: order they are printed (``val_hits@K`` after MRR, by K).
_METRIC_NAMES = {'acc': 'accuracy', 'mrr': 'MRR', 'auroc': 'AUROC'}


def _metric_order(name: str) -> Tuple[int, int]:
    if name.startswith('hits@'):
        return 2, int(name[5:]) if name[5:].isdigit() else 0
    return (0 if name in ('acc', 'mrr') else 3), 0


def result_line(metrics: Dict[str, Any]) -> Optional[str]:
    r"""The validation result in :obj:`metrics` (Lightning's
    ``callback_metrics``) as one line, ``None`` without one: ``validation
    accuracy: 0.9065`` for nodes, ``validation MRR: 0.4120, Hits@10:
    0.8000, AUROC: 0.9100`` for links."""
    found = sorted((key[4:] for key in metrics
                    if key.startswith('val_') and key != 'val_loss'),
                   key=_metric_order)
    if not found:
        return None
    parts = [f"{_METRIC_NAMES.get(name, name.replace('hits', 'Hits'))}: "
             f"{float(metrics[f'val_{name}']):.4f}" for name in found]
    return 'validation ' + ', '.join(parts)


#: The callback that writes what ``predict`` gives (the ``next`` line).
WRITER = 'pyg_fastload.lightning.PredictionWriter'


class RunEnd(Callback):
    r"""At the end of a fit (or its interruption by Ctrl-C, in one
    process), rank zero prints the validation result, draws the run's
    plots (``pyg-fastload report``'s, next to ``fastload_stats.json``),
    says where the logs, checkpoint, stats and plots are, and, after a
    ``pyg-fastload fit``, the command that predicts every node with the
    checkpoint. Put it after
    :class:`~pyg_fastload.lightning.LoaderMonitor`, which writes the stats
    it plots."""
    def on_fit_end(self, trainer: pl.Trainer,
                   pl_module: pl.LightningModule) -> None:
        self._report(trainer)

    def on_exception(self, trainer: pl.Trainer,
                     pl_module: pl.LightningModule,
                     exception: BaseException) -> None:
        # finding the log directory is collective: one process only
        if (isinstance(exception, KeyboardInterrupt)
                and trainer.state.fn == 'fit' and trainer.world_size == 1):
            self._report(trainer, interrupted=True)

    @staticmethod
    def _report(trainer: pl.Trainer, interrupted: bool = False) -> None:
        # log_dir broadcasts in a distributed run: every rank asks.
        log_dir = trainer.log_dir or trainer.default_root_dir
        if not trainer.is_global_zero:
            return
        lines: List[str] = []
        if interrupted:
            lines.append(f'interrupted in epoch {trainer.current_epoch} '
                         f'(step {trainer.global_step}): what follows is '
                         f'of the steps that ran')
        result = result_line(trainer.callback_metrics)
        if result is not None:
            lines.append(result)
        written = [('logs', str(log_dir))]
        checkpoint = getattr(trainer.checkpoint_callback, 'best_model_path',
                             '')
        if checkpoint:
            written.append(('checkpoint', checkpoint))
        stats = Path(log_dir) / STATS_FILENAME
        if stats.is_file():
            written.append(('stats', str(stats)))
            plots = _plots(stats)
            if plots:
                written.append(('plots', f"{plots[0].parent}/"
                                         f"{{{','.join(p.name for p in plots)}}}"))
        lines.append('written: ' + ', '.join(f'{what} {path}'
                                             for what, path in written))
        config = Path(log_dir) / 'config.yaml'  # LightningCLI's copy
        if checkpoint and config.is_file():
            # a link predictor predicts no class: it writes embeddings
            what = ("every node's embedding (a LinkPredictor writes "
                    "embeddings)" if _predicts_embeddings(trainer) else
                    "every node's prediction")
            lines.append(f"next, {what}: pyg-fastload "
                         f"predict -c {shlex.quote(str(config))} "
                         f"--ckpt_path {shlex.quote(checkpoint)} "
                         f"--trainer.callbacks+={WRITER} "
                         f"--trainer.callbacks.out_dir predictions "
                         f"(docs/guide/inference.md)")
        print('\n'.join(lines), flush=True)


def _predicts_embeddings(trainer: pl.Trainer) -> bool:
    r"""Whether ``predict`` with the trained model writes embeddings alone
    (a :class:`~pyg_fastload.lightning.LinkPredictor`)."""
    return isinstance(trainer.lightning_module, LinkPredictor)


def _plots(stats: Path) -> List[Path]:
    r"""The run's plots, drawn next to its :obj:`stats` file; none (with a
    warning saying why) where they cannot be drawn."""
    try:
        return plot_run(stats)
    except (OSError, ValueError) as error:
        warnings.warn(f'no plots drawn: {error}', stacklevel=2)
        return []
