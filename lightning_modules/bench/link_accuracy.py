r"""Link prediction parity: the same
:class:`~pyg_fastload.lightning.LinkPredictor` (GraphSAGE encoder,
dot-product decoder, BCE on binary negatives at ratio 1) trained on the same
edge split through :class:`~pyg_fastload.lightning.FastLoadDataModule`
(``task: link``) and through PyG's ``LinkNeighborLoader`` (torch_sparse's
sampler), with the same fan-outs, batch size, optimiser and epochs; every
validation and test edge ranked against the same fixed non-edge negatives
(ogbl-citation2's protocol). Mean ± std over the seeds of the final model's
validation and test MRR, and their difference.

The split (``RandomLinkSplit`` semantics: held-out links never carry
messages where they are scored) and the negatives come from the data
module with the bench's seed; PyG's loaders read the same message-passing
graphs and label edges. Datasets: ``arxiv-like`` (training epochs capped
by ``--train-batches``) and Cora (``../shared/datasets/planetoid``).

Run ``pyg-fastload bench link-accuracy``.
"""
from __future__ import annotations

import argparse
import importlib.util
import statistics
import time
import warnings
from typing import Any, Dict, List, Optional

import pytorch_lightning as pl
import torch
from torch_geometric.data import Data
from torch_geometric.loader import LinkNeighborLoader

from pyg_fastload.bench.common import Table, benchmark_main, positive_int
from pyg_fastload.datasets import load_synthetic
from pyg_fastload.graph import is_data

from ..datamodule import FastLoadDataModule
from ..link_predictor import LinkPredictor
from .accuracy import default_root, load_planetoid, mean_std
from .lightning_setup import quiet_lightning, quiet_trainer_kwargs

__all__ = ['add_arguments', 'run', 'main', 'fit_once']

DATASETS = ('arxiv-like', 'Cora')


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument('--datasets', nargs='+', default=list(DATASETS),
                        choices=DATASETS)
    parser.add_argument('--root', default=default_root(),
                        help='folder holding Cora/raw (Planetoid raw files)')
    parser.add_argument('--seeds', type=positive_int, default=3)
    parser.add_argument('--epochs', type=positive_int, default=None,
                        help='default: 3 on arxiv-like, 20 on Cora')
    parser.add_argument('--train-batches', type=positive_int, default=100,
                        help='training batches per epoch on arxiv-like '
                        '(Cora trains on all of its links)')
    parser.add_argument('--hidden', type=positive_int, default=128)
    parser.add_argument('--layers', type=positive_int, default=2)
    parser.add_argument('--lr', type=float, default=0.003)
    parser.add_argument('--fanout', type=int, nargs='+', default=[15, 10])
    parser.add_argument('--batch-size', type=positive_int, default=1024)
    parser.add_argument('--eval-edges', type=positive_int, default=1000)
    parser.add_argument('--eval-negatives', type=positive_int, default=100)


class PygLinkData(pl.LightningDataModule):
    r"""PyG's ``LinkNeighborLoader`` over the split of a ``task: link``
    :class:`~pyg_fastload.lightning.FastLoadDataModule` (its graphs, label
    edges and fixed evaluation negatives)."""

    def __init__(self, ours: Any, args: argparse.Namespace):
        super().__init__()
        ours.setup('fit')
        self.links = ours.loading.task.split
        self.graphs = ours.loading.task.graphs
        self.args = args

    def _loader(self, split: str) -> Any:
        label_index, label = self.links.supervision(split)
        train = split == 'train'
        group = self.links.group
        kwargs: Dict[str, Any] = dict(
            batch_size=self.args.batch_size if train else
            max(1, 10000 // group) * group, shuffle=train)
        if train:
            kwargs['neg_sampling'] = 'binary'
        with warnings.catch_warnings():  # "pyg-lib is recommended"
            warnings.simplefilter('ignore', UserWarning)
            return LinkNeighborLoader(
                self.graphs['test' if split == 'test' else 'train'],
                num_neighbors=self.args.fanout, edge_label_index=label_index,
                edge_label=label, **kwargs)

    def train_dataloader(self) -> Any:
        return self._loader('train')

    def val_dataloader(self) -> Any:
        return self._loader('val')

    def test_dataloader(self) -> Any:
        return self._loader('test')


def fit_once(data: Any, side: str, seed: int, epochs: int,
             train_batches: Optional[int],
             args: argparse.Namespace) -> Dict[str, float]:
    r"""Trains for :obj:`epochs` through the loader of :obj:`side`
    (``'fastload'`` or ``'pyg'``) after ``seed_everything(seed)``; returns
    ``{'val_mrr', 'test_mrr', 'seconds'}`` (MRR in %)."""
    with quiet_lightning():
        pl.seed_everything(seed, verbose=False)
        ours = FastLoadDataModule(
            data, task='link', num_neighbors=args.fanout,
            batch_size=args.batch_size, eval_batch_size=10000, seed=seed,
            progress=False, pipeline=True, link=dict(
                eval_edges=args.eval_edges,
                eval_negatives=args.eval_negatives))
        module = ours if side == 'fastload' else PygLinkData(ours, args)
        width = data.num_features if is_data(data, hetero=False) else \
            ours.num_features
        model = LinkPredictor(hidden_channels=args.hidden,
                              num_layers=args.layers, lr=args.lr,
                              in_channels=width)
        trainer = pl.Trainer(max_epochs=epochs, limit_val_batches=0,
                             limit_train_batches=train_batches,
                             **quiet_trainer_kwargs())
        start = time.perf_counter()
        trainer.fit(model, datamodule=module)
        seconds = time.perf_counter() - start
        evaluator = pl.Trainer(**quiet_trainer_kwargs())
        val = evaluator.validate(model, datamodule=module, verbose=False)[0]
        test = evaluator.test(model, datamodule=module, verbose=False)[0]
    return {'val_mrr': 100 * float(val['val_mrr']),
            'test_mrr': 100 * float(test['test_mrr']), 'seconds': seconds}


def compare(data: Any, name: str, args: argparse.Namespace
            ) -> Dict[str, Any]:
    r"""Both loaders over seeds ``0 .. args.seeds - 1``, interleaved;
    prints the table. Returns ``{'runs', 'val_mean', 'difference'}``
    (validation MRR difference fastload - PyG in points)."""
    sides = ['fastload']
    if importlib.util.find_spec('torch_sparse') is not None:
        sides.append('pyg')
    synthetic = isinstance(data, str)
    epochs = args.epochs or (3 if synthetic else 20)
    batches = args.train_batches if synthetic else None
    runs: Dict[str, List[Dict[str, float]]] = {side: [] for side in sides}
    for seed in range(args.seeds):
        for side in sides:
            runs[side].append(fit_once(data, side, seed, epochs, batches,
                                       args))
    print(f'\n## {name}: LinkPredictor sage {args.layers}x{args.hidden}, '
          f'dot decoder, BCE, binary negatives ratio 1; {epochs} epochs'
          f"{f' of {batches} batches' if batches else ''}, fanout "
          f'{args.fanout}, batch {args.batch_size} positive edges; '
          f'{args.eval_edges} evaluation edges x {args.eval_negatives} '
          f'fixed negatives; {args.seeds} seeds')
    table = Table({'loader': 28, 'val MRR %': 14, 'test MRR %': 14,
                   's/fit': 7})
    labels = {'fastload': 'FastLoadDataModule',
              'pyg': 'PyG LinkNeighborLoader'}
    val_mean: Dict[str, float] = {}
    for side, results in runs.items():
        val = [r['val_mrr'] for r in results]
        val_mean[side] = statistics.mean(val)
        table.row(labels[side], mean_std(val, 2),
                  mean_std([r['test_mrr'] for r in results], 2),
                  f"{statistics.mean(r['seconds'] for r in results):.1f}")
    summary: Dict[str, Any] = {'runs': runs, 'val_mean': val_mean,
                               'difference': None}
    if 'pyg' in val_mean:
        summary['difference'] = val_mean['fastload'] - val_mean['pyg']
        print(f"difference FastLoadDataModule - PyG (validation MRR): "
              f"{summary['difference']:+.2f} points")
    else:
        print("PyG LinkNeighborLoader skipped: it needs torch_sparse here")
    return summary


def run(args: argparse.Namespace) -> Dict[str, Dict[str, Any]]:
    print(f'# link accuracy benchmark: datasets={args.datasets} '
          f'seeds={args.seeds} torch_threads={torch.get_num_threads()}')
    out = {}
    for name in args.datasets:
        if name == 'Cora':
            data = load_planetoid(args.root, 'Cora')
            data = Data(x=data.x, edge_index=data.edge_index,
                        num_nodes=data.num_nodes)
        else:
            load_synthetic(name)  # generated once, outside the timed fits
            data = name
        out[name] = compare(data, name, args)
    return out


def main(argv: Optional[List[str]] = None) -> None:
    benchmark_main(__doc__, add_arguments, run, argv)


if __name__ == '__main__':
    main()
