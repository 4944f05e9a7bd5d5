r"""Accuracy parity on heterogeneous graphs: the same
:class:`~pyg_fastload.lightning.NodeClassifier` (a ``HeteroNet``: per-type
input projections, PyG's ``to_hetero`` over GraphSAGE) trained through
:class:`~pyg_fastload.lightning.FastLoadDataModule` and through PyG's
``LightningNodeData`` (``NeighborLoader``) with the same seeds, fan-outs on
every relation, batch size and optimiser; mean ± std over the seeds of the
final model's validation and test accuracy, and their difference.

Datasets: ``mag-like`` (scaled by ``--scale``; paper venues, 349 classes)
and PyG's ``FakeHeteroDataset`` (3 node types, 6 edge types; its labels
are random, so they are replaced by the arg-max of a fixed random
projection of the labelled type's features, something a model can learn;
a seeded 60/20/20 split). Types without features enter as zeros
(``node_embeddings=False``) on both sides.

Run ``pyg-fastload bench hetero-accuracy``.
"""
from __future__ import annotations

import argparse
import importlib.util
import random
import statistics
import time
from typing import Any, Dict, List, Optional

import pytorch_lightning as pl
import torch
from torch_geometric.data import HeteroData
from torch_geometric.datasets import FakeHeteroDataset

from pyg_fastload.bench.common import Table, benchmark_main, positive_int
from pyg_fastload.datasets import generate_hetero
from pyg_fastload.modes.schema import hetero_schema

from ..datamodule import FastLoadDataModule
from ..node_classifier import NodeClassifier
from .accuracy import mean_std
from .lightning_setup import (pyg_hetero_module, quiet_lightning,
                              quiet_trainer_kwargs)

__all__ = ['add_arguments', 'run', 'main', 'fake_hetero', 'fit_once']

DATASETS = ('mag-like', 'fake-hetero')


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument('--datasets', nargs='+', default=list(DATASETS),
                        choices=DATASETS)
    parser.add_argument('--scale', type=float, default=0.05,
                        help='mag-like node and edge counts times this')
    parser.add_argument('--seeds', type=positive_int, default=3)
    parser.add_argument('--epochs', type=positive_int, default=5)
    parser.add_argument('--model', default='sage', choices=('sage', 'gat'))
    parser.add_argument('--hidden', type=positive_int, default=64)
    parser.add_argument('--layers', type=positive_int, default=2)
    parser.add_argument('--dropout', type=float, default=0.3)
    parser.add_argument('--lr', type=float, default=0.003)
    parser.add_argument('--fanout', type=int, nargs='+', default=[10, 5])
    parser.add_argument('--batch-size', type=positive_int, default=1024)


def fake_hetero(seed: int = 0) -> HeteroData:
    r"""PyG's ``FakeHeteroDataset`` graph with learnable labels (see the
    module docstring) and a seeded split of its labelled type."""
    random.seed(seed)  # the types and sizes
    torch.manual_seed(seed)  # the tensors
    data = FakeHeteroDataset(num_graphs=1, num_node_types=3,
                             num_edge_types=6, avg_num_nodes=2000,
                             avg_num_channels=32, num_classes=8,
                             task='node')[0]
    target = next(t for t in data.node_types if 'y' in data[t])
    store = data[target]
    gen = torch.Generator().manual_seed(seed)
    projection = torch.randn(store.x.size(-1), 8, generator=gen)
    store.y = (store.x @ projection).argmax(-1)
    order = torch.randperm(store.num_nodes, generator=gen)
    for name, (lo, hi) in (('train', (0.0, 0.6)), ('val', (0.6, 0.8)),
                           ('test', (0.8, 1.0))):
        mask = torch.zeros(store.num_nodes, dtype=torch.bool)
        mask[order[int(lo * store.num_nodes):int(hi * store.num_nodes)]] = 1
        store[f'{name}_mask'] = mask
    return data


def fit_once(data: HeteroData, side: str, seed: int,
             args: argparse.Namespace) -> Dict[str, float]:
    r"""Trains for ``args.epochs`` epochs through the loader of :obj:`side`
    (``'fastload'`` or ``'pyg'``) after ``seed_everything(seed)``; returns
    ``{'val_acc', 'test_acc', 'seconds'}`` (accuracies in %)."""

    with quiet_lightning():
        pl.seed_everything(seed, verbose=False)
        if side == 'fastload':
            datamodule = FastLoadDataModule(
                data, num_neighbors=args.fanout, batch_size=args.batch_size,
                seed=seed, progress=False)
        else:
            datamodule = pyg_hetero_module(data, args)
        model = NodeClassifier(model=args.model, hidden_channels=args.hidden,
                               num_layers=args.layers, dropout=args.dropout,
                               lr=args.lr, node_embeddings=False)
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



def compare(data: HeteroData, name: str,
            args: argparse.Namespace) -> Dict[str, Any]:
    r"""Both loaders over seeds ``0 .. args.seeds - 1``, interleaved;
    prints the table. Returns ``{'runs': {side: [...]}, 'test_mean':
    {side: %}, 'difference': fastload - PyG}`` (PyG's side runs only where
    torch_sparse is installed)."""
    sides = ['fastload']
    if importlib.util.find_spec('torch_sparse') is not None:
        sides.append('pyg')
    runs: Dict[str, List[Dict[str, float]]] = {side: [] for side in sides}
    warm = argparse.Namespace(**{**vars(args), 'epochs': 1})
    for side in sides:  # one-time start-up costs outside the timed fits
        fit_once(data, side, 0, warm)
    for seed in range(args.seeds):
        for side in sides:
            runs[side].append(fit_once(data, side, seed, args))
    schema = hetero_schema(data)
    store = data[schema.target]
    print(f'\n## {name}: {len(schema.node_types)} node types, '
          f'{len(schema.edge_types)} edge types; {schema.target}: '
          f'{int(store.train_mask.sum())} train / '
          f'{int(store.val_mask.sum())} val / {int(store.test_mask.sum())} '
          f'test, {schema.num_classes} classes; {args.model} '
          f'{args.layers}x{args.hidden}, {args.epochs} epochs, fanout '
          f'{args.fanout} on every relation, batch {args.batch_size}; '
          f'{args.seeds} seeds')
    table = Table({'loader': 24, 'test acc %': 12, 'val acc %': 12,
                   's/fit': 6})
    labels = {'fastload': 'FastLoadDataModule',
              'pyg': 'PyG LightningNodeData'}
    test_mean: Dict[str, float] = {}
    for side, results in runs.items():
        test = [r['test_acc'] for r in results]
        test_mean[side] = statistics.mean(test)
        table.row(labels[side], mean_std(test),
                  mean_std([r['val_acc'] for r in results]),
                  f"{statistics.mean(r['seconds'] for r in results):.1f}")
    summary: Dict[str, Any] = {'runs': runs, 'test_mean': test_mean,
                               'difference': None}
    if 'pyg' in test_mean:
        summary['difference'] = test_mean['fastload'] - test_mean['pyg']
        print(f"difference FastLoadDataModule - PyG: "
              f"{summary['difference']:+.2f} points")
    else:
        print("PyG LightningNodeData skipped: PyG's NeighborLoader needs "
              "torch_sparse (or pyg-lib) here")
    return summary


def run(args: argparse.Namespace) -> Dict[str, Dict[str, Any]]:
    print(f'# hetero accuracy benchmark: datasets={args.datasets} '
          f'scale={args.scale} model={args.model} seeds={args.seeds} '
          f'epochs={args.epochs} hidden={args.hidden} layers={args.layers} '
          f'dropout={args.dropout} lr={args.lr} '
          f'torch_threads={torch.get_num_threads()}')
    graphs = {'mag-like': lambda: generate_hetero('mag-like',
                                                  scale=args.scale),
              'fake-hetero': fake_hetero}
    return {name: compare(graphs[name](), name, args)
            for name in args.datasets}


def main(argv: Optional[List[str]] = None) -> None:
    benchmark_main(__doc__, add_arguments, run, argv)


if __name__ == '__main__':
    main()
