r"""``trainer.fit`` speed: the same
:class:`~pyg_fastload.lightning.NodeClassifier` fed by
:class:`~pyg_fastload.lightning.FastLoadDataModule` and by PyG's
``LightningNodeData`` (``NeighborLoader``, each ``num_workers``). The
headline ratio is like for like: the same untrimmed model on both
(``trim=False``). Beside it, FastLoadDataModule with its default
``trim_to_layer`` model: our batches carry per-hop counts, PyG's
torch_sparse batches do not (with pyg-lib they do), so that row shows what
the counts enable here, not a like-for-like loader comparison.

Every fit starts from the same initial weights on the same ``Data`` and runs
``--epochs`` epochs of ``--batches`` steps; an epoch is timed from
Lightning's ``on_train_epoch_start`` to ``on_train_epoch_end``, and the
first epoch (warm-up, and FastNeighborLoader's ``pipeline='auto'`` probe)
is left out. The fits are interleaved when ``--rounds`` > 1. Then each
trained model is validated on the same first ``--val-batches`` validation
batches (same seed nodes, independently sampled neighbourhoods).

Run ``pyg-fastload bench fit --preset products-like --batches 5`` or
``python -m pyg_fastload.lightning.bench.fit``.
"""
from __future__ import annotations

import argparse
import gc
import importlib.util
import math
import time
from typing import Any, Dict, List, Optional

import pytorch_lightning as pl
import torch
from torch_geometric.data import Data

from pyg_fastload.bench.common import (
    Table,
    add_graph_arguments,
    benchmark_main,
    cpu_count,
    median,
    positive_int,
)
from pyg_fastload.datasets import load_synthetic

from ..node_classifier import MODELS, TRIMMABLE, NodeClassifier
from .lightning_setup import (
    node_data_module,
    quiet_lightning,
    quiet_trainer_kwargs,
)

__all__ = ['add_arguments', 'run', 'main', 'EpochTimer', 'fit_side']

#: The FastLoadDataModule rows: label -> NodeClassifier's ``trim`` (the
#: ``trim=False`` row only for models that trim by default).
FASTLOAD_ROWS = {'FastLoadDataModule': None,
                 'FastLoadDataModule, trim=False': False}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_graph_arguments(parser)
    parser.add_argument('--model', default='sage', choices=MODELS)
    parser.add_argument('--hidden', type=positive_int, default=256)
    parser.add_argument('--layers', type=positive_int, default=3)
    parser.add_argument('--batches', type=positive_int, default=5,
                        help='training steps per epoch (limit_train_batches)')
    parser.add_argument('--epochs', type=int, default=3,
                        help='epochs per fit; the first is not timed '
                        '(default: 3, at least 2)')
    parser.add_argument('--rounds', type=positive_int, default=1,
                        help='fits per loader, interleaved')
    parser.add_argument('--val-batches', type=positive_int, default=5,
                        help='validation batches evaluated after training')
    parser.add_argument('--lr', type=float, default=3e-3)
    parser.add_argument('--pyg-workers', type=int, nargs='*', default=[0],
                        help="num_workers tried for PyG's LightningNodeData "
                        '(the best is the baseline; none: skip PyG)')


class EpochTimer(pl.Callback):
    r"""Seconds of every training epoch, from ``on_train_epoch_start`` to
    ``on_train_epoch_end`` (epoch 0 misses the fetch of its first batch,
    which Lightning makes before the hook)."""
    def __init__(self) -> None:
        self.seconds: List[float] = []
        self._start = 0.0

    def on_train_epoch_start(self, trainer: pl.Trainer,
                             module: pl.LightningModule) -> None:
        self._start = time.perf_counter()

    def on_train_epoch_end(self, trainer: pl.Trainer,
                           module: pl.LightningModule) -> None:
        self.seconds.append(time.perf_counter() - self._start)


def fit_side(data: Data, args: argparse.Namespace,
             initial: Dict[str, torch.Tensor], trim: Optional[bool] = None,
             pyg_workers: Optional[int] = None) -> Dict[str, Any]:
    r"""One ``trainer.fit`` of ``args.epochs`` epochs of ``args.batches``
    steps from the weights :obj:`initial`, fed by FastLoadDataModule
    (:obj:`pyg_workers` is :obj:`None`) or PyG's ``LightningNodeData``
    with that many workers, then validation on ``args.val_batches``
    batches.

    Returns ``{'epoch_seconds': [per timed epoch], 'fit_seconds',
    'val_acc' (%), 'val_nodes'}``."""
    with quiet_lightning():
        pl.seed_everything(args.seed, verbose=False)
        datamodule = node_data_module(data, args.fanout, args.batch_size,
                                      args.seed, pyg_workers)
        model = NodeClassifier(model=args.model,
                               in_channels=data.num_features,
                               num_classes=int(data.y.max()) + 1,
                               hidden_channels=args.hidden,
                               num_layers=args.layers, lr=args.lr, trim=trim)
        model.load_state_dict(initial)
        timer = EpochTimer()
        trainer = pl.Trainer(max_epochs=args.epochs,
                             limit_train_batches=args.batches,
                             limit_val_batches=0, callbacks=[timer],
                             **quiet_trainer_kwargs())
        start = time.perf_counter()
        trainer.fit(model, datamodule=datamodule)
        fit_seconds = time.perf_counter() - start
        evaluator = pl.Trainer(limit_val_batches=args.val_batches,
                               **quiet_trainer_kwargs())
        val = evaluator.validate(model, datamodule=datamodule,
                                 verbose=False)[0]
    del trainer, evaluator, datamodule  # PyG's persistent workers
    gc.collect()
    return {'epoch_seconds': timer.seconds[1:], 'fit_seconds': fit_seconds,
            'val_acc': 100 * float(val['val_acc']),
            'val_nodes': min(args.val_batches * args.batch_size,
                             int(data.val_mask.sum()))}


def run(args: argparse.Namespace) -> Dict[str, float]:
    if args.epochs < 2:
        raise ValueError(f"'--epochs {args.epochs}': the first epoch is not "
                         f"timed, so pass --epochs 2 or more")
    print(f'# fit benchmark: preset={args.preset} model={args.model} '
          f'{args.layers}x{args.hidden} fanout={args.fanout} '
          f'batch_size={args.batch_size} batches/epoch={args.batches} '
          f'epochs={args.epochs} (first not timed) rounds={args.rounds} '
          f'cpus={cpu_count()} torch_threads={torch.get_num_threads()}')
    data = load_synthetic(args.preset, root=args.cache_dir).to_data()
    torch.manual_seed(args.seed)
    initial = NodeClassifier(model=args.model, in_channels=data.num_features,
                             num_classes=int(data.y.max()) + 1,
                             hidden_channels=args.hidden,
                             num_layers=args.layers).state_dict()
    rows: Dict[str, Dict[str, Any]] = {
        label: dict(trim=trim) for label, trim in FASTLOAD_ROWS.items()
        if args.model in TRIMMABLE or trim is None}
    if args.pyg_workers and importlib.util.find_spec('torch_sparse'):
        for workers in args.pyg_workers:
            rows[f'PyG LightningNodeData(num_workers={workers})'] = dict(
                pyg_workers=workers)
    elif args.pyg_workers:
        print("PyG LightningNodeData skipped: PyG's NeighborLoader needs "
              "torch_sparse (or pyg-lib) here")

    results: Dict[str, List[Dict[str, Any]]] = {label: [] for label in rows}
    for _ in range(args.rounds):
        for label, options in rows.items():
            results[label].append(fit_side(data, args, initial, **options))

    print(f'\n## trainer.fit, {args.batches} steps per epoch (median over '
          f'{args.rounds * (args.epochs - 1)} timed epochs)')
    table = Table({'data module': 40, 's/step': 8, 's/epoch': 8,
                   'fit s': 7, 'val acc %': 9})
    step: Dict[str, float] = {}
    accuracy: Dict[str, float] = {}
    for label, runs in results.items():
        epochs = [s for r in runs for s in r['epoch_seconds']]
        step[label] = median(epochs) / args.batches
        accuracy[label] = sum(r['val_acc'] for r in runs) / len(runs)
        table.row(label, step[label], median(epochs),
                  median([r['fit_seconds'] for r in runs]),
                  f'{accuracy[label]:.2f}')
    result: Dict[str, float] = {
        f'{label} s/step': seconds for label, seconds in step.items()}
    result.update({f'{label} val_acc': acc
                   for label, acc in accuracy.items()})
    fast = 'FastLoadDataModule'
    untrimmed = 'FastLoadDataModule, trim=False'
    # Like for like: the same untrimmed model on both loaders.
    like = untrimmed if untrimmed in step else fast
    if untrimmed in step:
        result['trim_speedup'] = step[untrimmed] / step[fast]
    pyg = {label: s for label, s in step.items() if label.startswith('PyG')}
    if pyg:
        best = min(pyg, key=pyg.get)
        result['speedup'] = pyg[best] / step[like]
        print(f"ratio per epoch, like for like (the same untrimmed model): "
              f"{like} / best PyG ({best}): {result['speedup']:.2f}x "
              f"faster (target >= 2x)")
        if untrimmed in step:
            result['trimmed_speedup'] = pyg[best] / step[fast]
            print(f"  with trim_to_layer, which the per-hop counts of our "
                  f"batches enable and PyG's torch_sparse batches do not "
                  f"(with pyg-lib PyG's can): {fast} / best PyG: "
                  f"{result['trimmed_speedup']:.2f}x; model's share "
                  f"(trim_to_layer): {result['trim_speedup']:.2f}x")
        nodes = results[like][0]['val_nodes']
        difference = accuracy[like] - accuracy[best]
        # Binomial standard error of each estimate, combined: the
        # evaluation's noise only (training runs differ too).
        p = (accuracy[like] + accuracy[best]) / 200
        noise = 100 * math.sqrt(2 * p * (1 - p) / max(nodes, 1))
        result['val_acc_difference'] = difference
        verdict = 'within' if abs(difference) <= 2 * noise else 'outside'
        print(f'validation accuracy on the same {nodes} seed nodes after '
              f'the same {args.epochs * args.batches} steps: {like} - PyG = '
              f'{difference:+.2f} points, {verdict} 2 standard errors of '
              f'the estimate ({2 * noise:.2f} points)')
    elif untrimmed in step:
        print(f"model's share (trim_to_layer): "
              f"{result['trim_speedup']:.2f}x")
    return result


def main(argv: Optional[List[str]] = None) -> None:
    benchmark_main(__doc__, add_arguments, run, argv)


if __name__ == '__main__':
    main()
