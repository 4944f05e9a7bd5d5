r"""Accuracy parity: the same
:class:`~pyg_fastload.lightning.NodeClassifier` trained through
:class:`~pyg_fastload.lightning.FastLoadDataModule` and through PyG's
``LightningNodeData`` (``NeighborLoader``) on Cora and CiteSeer (public
Planetoid split), with the same seeds; mean test accuracy over the seeds must
agree within 1.5 points.

The defaults are Kipf & Welling's GCN setting (2 layers, hidden 16, dropout
0.5, Adam lr 0.01, weight decay 5e-4, 200 epochs, row-normalised features)
with full neighbourhoods and every training node in one batch, so each epoch
is one full-batch step: the fan-outs default to one hop more than the model
has layers for GCN, whose symmetric normalisation reads the degree of every
node it aggregates from (with as many hops as layers the outermost nodes
have no in-edges and a wrong degree). Both sides report the model after the
final epoch (no model selection). Published full-batch GCN: Cora 81.5%,
CiteSeer 70.3%.

Run ``pyg-fastload bench accuracy`` or
``python -m pyg_fastload.lightning.bench.accuracy``.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytorch_lightning as pl
import torch
from torch_geometric.data import Data
from torch_geometric.datasets import Planetoid
from torch_geometric.transforms import NormalizeFeatures

from pyg_fastload.bench.common import Table, benchmark_main, positive_int

from ..node_classifier import MODELS, NodeClassifier
from .lightning_setup import (
    node_data_module,
    quiet_lightning,
    quiet_trainer_kwargs,
)

__all__ = [
    'add_arguments',
    'run',
    'main',
    'PUBLISHED',
    'TOLERANCE',
    'default_root',
    'default_fanouts',
    'load_planetoid',
    'fit_once',
    'compare',
]

#: Test accuracy (%) of full-batch GCN on the public split (Kipf & Welling,
#: 2017).
PUBLISHED: Dict[str, float] = {'Cora': 81.5, 'CiteSeer': 70.3}
#: Largest accepted |fastload - PyG| of the mean test accuracy, in points.
TOLERANCE = 1.5
#: Environment variable naming the Planetoid root (overrides the default).
ROOT_ENV = 'PYG_FASTLOAD_PLANETOID'


def default_root() -> str:
    r"""``$PYG_FASTLOAD_PLANETOID``, else ``../shared/datasets/planetoid``
    next to the repository."""
    env = os.environ.get(ROOT_ENV)
    if env:
        return env
    repo = Path(__file__).resolve().parents[2]
    return str(repo.parent / 'shared' / 'datasets' / 'planetoid')


def default_fanouts(model: str, num_layers: int) -> List[int]:
    r"""Full neighbourhoods over as many hops as the seeds' outputs depend
    on: :obj:`num_layers`, plus one for GCN, whose normalisation needs the
    full degree of the outermost nodes too."""
    return [-1] * (num_layers + (model == 'gcn'))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument('--root', default=default_root(),
                        help='folder holding Cora/raw and CiteSeer/raw (the '
                        'Planetoid raw files; copied to a temporary folder '
                        f'before loading). Default: ${ROOT_ENV} or '
                        '../shared/datasets/planetoid next to the repository')
    parser.add_argument('--datasets', nargs='+', default=['Cora', 'CiteSeer'],
                        choices=sorted(PUBLISHED))
    parser.add_argument('--seeds', type=positive_int, default=5,
                        help='runs per loader (seeds 0 .. N-1)')
    parser.add_argument('--model', default='gcn', choices=MODELS)
    parser.add_argument('--epochs', type=positive_int, default=200)
    parser.add_argument('--hidden', type=positive_int, default=16)
    parser.add_argument('--layers', type=positive_int, default=2)
    parser.add_argument('--dropout', type=float, default=0.5)
    parser.add_argument('--lr', type=float, default=0.01)
    parser.add_argument('--weight-decay', type=float, default=5e-4)
    parser.add_argument('--fanout', type=int, nargs='+', default=None,
                        help='neighbours per hop (default: -1 (all) for '
                        'each layer, one hop more for gcn)')
    parser.add_argument('--batch-size', type=positive_int, default=None,
                        help='training seeds per batch (default: every '
                        'training node, i.e. full-batch steps)')


def load_planetoid(root: str, name: str) -> Data:
    r"""Cora or CiteSeer with the public split and row-normalised features.
    The raw files are copied to a temporary folder first, since PyG writes
    its processed files next to them."""
    source = Path(root).expanduser() / name / 'raw'
    if not source.is_dir():
        raise FileNotFoundError(
            f"'--root {root}': no '{source}' with the Planetoid raw files "
            f"(ind.{name.lower()}.*); pass the folder holding {name}/raw, or "
            f"set ${ROOT_ENV}")
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copytree(source, Path(tmp) / name / 'raw')
        with contextlib.redirect_stderr(io.StringIO()):  # 'Processing...'
            dataset = Planetoid(tmp, name, split='public',
                                transform=NormalizeFeatures())
        return dataset[0]


def fit_once(data: Data, side: str, seed: int,
             args: argparse.Namespace) -> Dict[str, float]:
    r"""Trains a :class:`~pyg_fastload.lightning.NodeClassifier` for
    ``args.epochs`` epochs with the loader of :obj:`side` (``'fastload'``:
    :class:`~pyg_fastload.lightning.FastLoadDataModule`, which tells the model
    its widths; ``'pyg'``: ``LightningNodeData``, widths given) after
    ``pl.seed_everything(seed)``, and evaluates the final model.

    Returns ``{'val_acc', 'test_acc', 'seconds'}`` (accuracies in %,
    seconds of ``trainer.fit``)."""

    if side not in ('fastload', 'pyg'):
        raise ValueError(f"'side' is {side!r}: pass 'fastload' or 'pyg'")
    fanouts = args.fanout or default_fanouts(args.model, args.layers)
    batch_size = args.batch_size or int(data.train_mask.sum())
    with quiet_lightning():
        pl.seed_everything(seed, verbose=False)
        datamodule = node_data_module(
            data, fanouts, batch_size, seed,
            pyg_workers=None if side == 'fastload' else 0,
            eval_batch_size=data.num_nodes)  # all val/test nodes at once
        widths = {} if side == 'fastload' else dict(
            in_channels=data.num_features,
            num_classes=int(data.y.max()) + 1)
        model = NodeClassifier(model=args.model,
                               hidden_channels=args.hidden,
                               num_layers=args.layers, dropout=args.dropout,
                               lr=args.lr, weight_decay=args.weight_decay,
                               **widths)
        trainer = pl.Trainer(max_epochs=args.epochs, limit_val_batches=0,
                             **quiet_trainer_kwargs())
        start = time.perf_counter()
        trainer.fit(model, datamodule=datamodule)
        seconds = time.perf_counter() - start
        evaluator = pl.Trainer(**quiet_trainer_kwargs())
        val = evaluator.validate(model, datamodule=datamodule,
                                 verbose=False)[0]
        test = evaluator.test(model, datamodule=datamodule, verbose=False)[0]
    return {'val_acc': 100 * float(val['val_acc']),
            'test_acc': 100 * float(test['test_acc']), 'seconds': seconds}


def mean_std(values: List[float], digits: int = 1) -> str:
    r"""``mean ± sample std`` of :obj:`values` with :obj:`digits`
    decimals."""
    std = statistics.stdev(values) if len(values) > 1 else 0.0
    return f'{statistics.mean(values):.{digits}f} ± {std:.{digits}f}'


def compare(data: Data, name: str,
            args: argparse.Namespace) -> Dict[str, Any]:
    r"""Seeds ``0 .. args.seeds - 1`` for both loaders, interleaved, and
    prints the dataset's table.

    Returns ``{'runs': {side: [fit_once(...) per seed]}, 'test_mean':
    {side: mean %}, 'difference': fastload - PyG in points, 'passed':
    |difference| <= TOLERANCE, 'published': %}``; without torch_sparse
    (PyG's NeighborLoader needs it here) only the ``'fastload'`` side runs
    and ``'difference'``/``'passed'`` are :obj:`None`."""
    sides = ['fastload']
    if importlib.util.find_spec('torch_sparse') is not None:
        sides.append('pyg')
    runs: Dict[str, List[Dict[str, float]]] = {side: [] for side in sides}
    for seed in range(args.seeds):
        for side in sides:
            runs[side].append(fit_once(data, side, seed, args))
    fanouts = args.fanout or default_fanouts(args.model, args.layers)
    batch_size = args.batch_size or int(data.train_mask.sum())
    print(f'\n## {name}: {data.num_nodes} nodes, '
          f'{int(data.train_mask.sum())} train / {int(data.val_mask.sum())} '
          f'val / {int(data.test_mask.sum())} test; {args.model} '
          f'{args.layers}x{args.hidden}, {args.epochs} epochs, fanout '
          f'{fanouts}, batch {batch_size}; model after the final epoch, '
          f'{args.seeds} seeds')
    table = Table({'loader': 34, 'test acc %': 12, 'val acc %': 12,
                   's/fit': 6})
    labels = {'fastload': 'FastLoadDataModule',
              'pyg': 'PyG LightningNodeData'}
    test_mean: Dict[str, float] = {}
    for side, results in runs.items():
        test = [r['test_acc'] for r in results]
        test_mean[side] = statistics.mean(test)
        table.row(labels[side], mean_std(test),
                  mean_std([r['val_acc'] for r in results]),
                  statistics.mean(r['seconds'] for r in results))
    published = PUBLISHED.get(name)
    summary: Dict[str, Any] = {'runs': runs, 'test_mean': test_mean,
                               'difference': None, 'passed': None,
                               'published': published}
    if 'pyg' in test_mean:
        difference = test_mean['fastload'] - test_mean['pyg']
        summary['difference'] = difference
        summary['passed'] = abs(difference) <= TOLERANCE
        verdict = 'PASS' if summary['passed'] else 'FAIL'
        print(f'difference FastLoadDataModule - PyG: {difference:+.2f} '
              f'points ({verdict}: |difference| <= {TOLERANCE})')
    else:
        print("PyG LightningNodeData skipped: PyG's NeighborLoader needs "
              "torch_sparse (or pyg-lib) here")
    if published is not None:
        print(f'published full-batch GCN (Kipf & Welling 2017): '
              f'{published:.1f}%')
    return summary


def run(args: argparse.Namespace) -> Dict[str, Dict[str, Any]]:
    print(f'# accuracy benchmark: datasets={args.datasets} '
          f'model={args.model} seeds={args.seeds} epochs={args.epochs} '
          f'hidden={args.hidden} layers={args.layers} '
          f'dropout={args.dropout} lr={args.lr} '
          f'weight_decay={args.weight_decay} '
          f'torch_threads={torch.get_num_threads()}')
    return {name: compare(load_planetoid(args.root, name), name, args)
            for name in args.datasets}


def main(argv: Optional[List[str]] = None) -> None:
    benchmark_main(__doc__, add_arguments, run, argv)


if __name__ == '__main__':
    main()
