r"""Time to accuracy: Lightning fits of the same
:class:`~pyg_fastload.lightning.NodeClassifier` (same initial weights,
optimiser, seeds and batch size) fed by PyG's ``NeighborLoader``
(``LightningNodeData``, each ``--pyg-workers``) and by
:class:`~pyg_fastload.lightning.FastLoadDataModule` with each sampler of
``--sides`` (neighbour sampling, LABOR-0, LABOR-1, GraphSAINT-RW): the
validation accuracy after every epoch, the training time until a target
accuracy (``--target``, else 98% of the best side's final accuracy), and
the nodes and edges per batch (the sampler's work).

Every side's accuracy is measured the same way, outside its timed training:
after each epoch (or every ``--eval-every`` steps) the model classifies the
same ``--val-nodes`` validation nodes on neighbourhoods drawn by one fixed
neighbour-sampling loader (``--fanout``, the same seed for every side and
evaluation); the clock stops meanwhile (a loader that prefetches may draw
its next batches then, as at every epoch's end). The model is the
same untrimmed network on every side (``trim=False``); LABOR-*'s sides
aggregate with their batches' estimator weights (its weighted mean).

``--nodes N`` shrinks a homogeneous preset to ``N`` nodes keeping its mean
degree, feature width, classes and split fractions (the 2-core machine
cannot fit products-like's 2.4M nodes many times): the default,
products-like at 200K nodes, is the graph the issue measured. ``--preset
mag-like`` trains the heterogeneous network (``HeteroNet``, types without
features entering as zeros) on mag-like scaled by ``--scale``, PyG's side
through ``LightningNodeData`` over the paper type. Run ``pyg-fastload bench
time-to-accuracy --epochs 10`` (about an hour on 2 cores).
"""
from __future__ import annotations

import argparse
import dataclasses
import gc
import importlib.util
import json
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytorch_lightning as pl
import torch
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from pyg_fastload import FastNeighborLoader
from pyg_fastload.bench.common import (
    Table,
    add_graph_arguments,
    benchmark_main,
    cpu_count,
    positive_int,
)
from pyg_fastload.datasets import PRESETS, generate_hetero, load_synthetic
from pyg_fastload.graph import is_hetero
from pyg_fastload.modes.schema import hetero_schema
from pyg_fastload.sampling import SamplerChoice

from ..datamodule import FastLoadDataModule
from ..node_classifier import NodeClassifier
from .lightning_setup import (
    node_data_module,
    pyg_hetero_module,
    quiet_lightning,
    quiet_trainer_kwargs,
)

__all__ = ['add_arguments', 'run', 'main', 'SIDES', 'time_to_target']

#: Our sides: the data module's ``sampler`` of each (GraphSAINT-RW: a walk
#: of one step per hop from each of a batch's roots, the subgraph they
#: induce, its normalisation estimated before the first epoch, outside
#: the timed training).
SIDES: Dict[str, Any] = {
    'neighbor': 'neighbor',
    'labor-0': 'labor',
    'labor-1': {'class_path': 'labor',
                'init_args': {'importance_sampling': 1}},
    'graphsaint-rw': 'saint_rw',
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_graph_arguments(parser, more_presets=['mag-like'])
    parser.add_argument('--scale', type=float, default=0.05,
                        help='mag-like node and edge counts times this')
    parser.add_argument('--nodes', type=int, default=200_000,
                        help='shrink the preset to this many nodes, keeping '
                        'its mean degree and fractions (0: as it is)')
    parser.add_argument('--hidden', type=positive_int, default=256)
    parser.add_argument('--layers', type=positive_int, default=3)
    parser.add_argument('--epochs', type=positive_int, default=10)
    parser.add_argument('--batches', type=int, default=0,
                        help='training steps per epoch (0: every batch)')
    parser.add_argument('--lr', type=float, default=3e-3)
    parser.add_argument('--val-nodes', type=positive_int, default=5000,
                        help='validation nodes classified at each '
                        'evaluation')
    parser.add_argument('--eval-every', type=int, default=0,
                        help='evaluate every this many steps (0: after '
                        'every epoch)')
    parser.add_argument('--target', type=float, default=None,
                        help='validation accuracy (%%) to reach (default: '
                        "98%% of the best side's final accuracy)")
    parser.add_argument('--sides', nargs='+', default=list(SIDES),
                        choices=list(SIDES),
                        help='our samplers (default: all)')
    parser.add_argument('--pyg-workers', type=int, nargs='*', default=[0, 1],
                        help="num_workers tried for PyG's NeighborLoader "
                        '(each a side; none: skip PyG)')
    parser.add_argument('--out', default='bench_out/time_to_accuracy',
                        help='where the JSON and the plot go')


def shrunk(preset: str, nodes: int) -> Any:
    r""":obj:`preset`'s configuration at :obj:`nodes` nodes (0: as it is),
    its mean degree, degree cap and fractions kept."""
    cfg = PRESETS[preset]
    if not nodes or nodes >= cfg.num_nodes:
        return cfg
    scale = nodes / cfg.num_nodes
    return dataclasses.replace(
        cfg, num_nodes=nodes, num_edges=round(cfg.num_edges * scale),
        num_communities=max(cfg.num_classes,
                            round(cfg.num_communities * scale ** 0.5)))


class Progress(pl.Callback):
    r"""A side's training time (evaluations left out), the nodes and edges
    of its batches, and the validation accuracy on the fixed evaluation
    batches after every :obj:`every` steps (:obj:`None`: after every
    epoch) and at the end."""
    def __init__(self, evaluate: Any, every: Optional[int] = None):
        self.evaluate = evaluate
        self.every = every
        self.seconds: List[float] = []  # cumulative training time
        self.accuracy: List[float] = []
        self.steps: List[int] = []
        self.nodes = self.edges = self.batches = 0
        self._start = 0.0
        self._total = 0.0

    def on_train_epoch_start(self, trainer: pl.Trainer,
                             module: pl.LightningModule) -> None:
        self._start = time.perf_counter()

    def on_train_batch_end(self, trainer: pl.Trainer,
                           module: pl.LightningModule, outputs: Any,
                           batch: Any, batch_idx: int) -> None:
        self.batches += 1
        self.nodes += int(batch.num_nodes)
        self.edges += int(batch.num_edges)
        if self.every and self.batches % self.every == 0:
            self._record(module)

    def on_train_epoch_end(self, trainer: pl.Trainer,
                           module: pl.LightningModule) -> None:
        if self.every is None:
            self._record(module)

    def on_train_end(self, trainer: pl.Trainer,
                     module: pl.LightningModule) -> None:
        if not self.steps or self.steps[-1] != self.batches:
            self._record(module)  # the end of training, as trained

    def _record(self, module: pl.LightningModule) -> None:
        r"""The accuracy now, at the training time so far (the clock
        stops while it is measured)."""
        self._total += time.perf_counter() - self._start
        self.seconds.append(self._total)
        self.steps.append(self.batches)
        self.accuracy.append(self.evaluate(module))
        self._start = time.perf_counter()


def _evaluator(data: Any, target: Optional[str],
               args: argparse.Namespace) -> Any:
    r"""The accuracy (%) of a model on the same ``--val-nodes`` validation
    nodes (of the :obj:`target` type of a heterogeneous graph), their
    neighbourhoods drawn the same way for every side."""
    store = data if target is None else data[target]
    nodes = store.val_mask.nonzero().view(-1)[:args.val_nodes]

    def evaluate(module: pl.LightningModule) -> float:
        loader = FastNeighborLoader(
            data, args.fanout, batch_size=args.batch_size,
            input_nodes=nodes if target is None else (target, nodes),
            generator=torch.Generator().manual_seed(args.seed),
            pipeline=False)
        training = module.training
        module.eval()
        weights, module.edge_weights = module.edge_weights, False
        correct = 0
        with torch.no_grad():
            for batch in loader:
                seeds = batch if target is None else batch[target]
                logits = module(batch)[:seeds.batch_size]
                correct += int((logits.argmax(-1) ==
                                seeds.y[:seeds.batch_size]).sum())
        module.edge_weights = weights
        module.train(training)
        return 100.0 * correct / nodes.numel()
    return evaluate


def _model(data: Any, args: argparse.Namespace) -> NodeClassifier:
    r"""The same network for every side (untrimmed; a heterogeneous graph's
    featureless types enter as zeros)."""
    if is_hetero(data):
        return NodeClassifier(schema=hetero_schema(data).to_dict(),
                              hidden_channels=args.hidden,
                              num_layers=args.layers, lr=args.lr,
                              trim=False, node_embeddings=False)
    return NodeClassifier(in_channels=data.num_features,
                          num_classes=int(data.y.max()) + 1,
                          hidden_channels=args.hidden,
                          num_layers=args.layers, lr=args.lr, trim=False)


def fit_side(data: Any, args: argparse.Namespace,
             initial: Dict[str, torch.Tensor], sampler: Any = None,
             pyg_workers: Optional[int] = None) -> Dict[str, Any]:
    r"""One side's fit of ``args.epochs`` epochs from :obj:`initial`."""
    hetero = is_hetero(data)
    with quiet_lightning():
        pl.seed_everything(args.seed, verbose=False)
        if pyg_workers is None:
            datamodule = FastLoadDataModule(
                data, num_neighbors=args.fanout, batch_size=args.batch_size,
                seed=args.seed, progress=False, sampler=sampler)
        elif hetero:
            datamodule = pyg_hetero_module(data, args, pyg_workers)
        else:
            datamodule = node_data_module(data, args.fanout,
                                          args.batch_size, args.seed,
                                          pyg_workers)
        model = _model(data, args)
        model.load_state_dict(initial)
        progress = Progress(_evaluator(
            data, hetero_schema(data).target if hetero else None, args),
            args.eval_every or None)
        limit = {'limit_train_batches': args.batches} if args.batches else {}
        trainer = pl.Trainer(max_epochs=args.epochs, limit_val_batches=0,
                             callbacks=[progress], **limit,
                             **quiet_trainer_kwargs())
        trainer.fit(model, datamodule=datamodule)
    del trainer, datamodule
    gc.collect()
    return {'seconds': progress.seconds, 'accuracy': progress.accuracy,
            'steps': progress.steps,
            'nodes_per_batch': progress.nodes / max(progress.batches, 1),
            'edges_per_batch': progress.edges / max(progress.batches, 1),
            'batches': progress.batches}


def time_to_target(seconds: List[float], accuracy: List[float],
                   target: float) -> Optional[float]:
    r"""The training time of the first epoch whose accuracy reached
    :obj:`target` (:obj:`None`: never)."""
    for when, value in zip(seconds, accuracy):
        if value >= target:
            return when
    return None


def _graph(args: argparse.Namespace) -> Tuple[Any, str]:
    r"""The graph the sides train on, and its description."""
    if args.preset == 'mag-like':
        data = generate_hetero('mag-like', scale=args.scale)
        return data, (f'mag-like scaled by {args.scale} ({data.num_nodes:,} '
                      f'nodes, {data.num_edges:,} edges)')
    cfg = shrunk(args.preset, args.nodes)
    return load_synthetic(cfg, root=args.cache_dir).to_data(), (
        f'{args.preset} at {cfg.num_nodes:,} nodes, {2 * cfg.num_edges:,} '
        f'edges')


def run(args: argparse.Namespace) -> Dict[str, Any]:
    data, described = _graph(args)
    print(f'# time to accuracy: {described}; GraphSAGE {args.layers}x'
          f'{args.hidden}, fanout={args.fanout}, batch_size='
          f'{args.batch_size}, {args.epochs} epochs of '
          f"{args.batches or 'every'} batches; cpus={cpu_count()} "
          f'torch_threads={torch.get_num_threads()}')
    torch.manual_seed(args.seed)
    initial = _model(data, args).state_dict()
    sides: Dict[str, Dict[str, Any]] = {}
    for name in args.sides:
        if is_hetero(data) and \
                SamplerChoice.of(SIDES[name]).homogeneous_only:
            print(f'{name} skipped: it samples homogeneous graphs only')
        else:
            sides[name] = dict(sampler=SIDES[name])
    if args.pyg_workers and importlib.util.find_spec('torch_sparse'):
        for workers in args.pyg_workers:
            sides[f'PyG NeighborLoader(num_workers={workers})'] = dict(
                pyg_workers=workers)
    elif args.pyg_workers:
        print("PyG's NeighborLoader skipped: it needs torch_sparse (or "
              "pyg-lib) here")
    results = {}
    for name, options in sides.items():
        print(f'{name} ...', flush=True)
        results[name] = fit_side(data, args, initial, **options)
        print('  accuracy by step: ' + ', '.join(
            f'{a:.1f}% at step {n} ({s:.0f}s)' for a, n, s in zip(
                results[name]['accuracy'], results[name]['steps'],
                results[name]['seconds'])), flush=True)
    best_final = max(r['accuracy'][-1] for r in results.values())
    target = args.target if args.target is not None else 0.98 * best_final
    print(f'\n## validation accuracy target: {target:.2f}%')
    table = Table({'side': 40, 'final %': 8, 'best %': 7,
                   'to target s': 11, 's/epoch': 8, 'nodes/batch': 11,
                   'edges/batch': 12})
    reached: Dict[str, Optional[float]] = {}
    for name, result in results.items():
        reached[name] = time_to_target(result['seconds'],
                                       result['accuracy'], target)
        table.row(name, f"{result['accuracy'][-1]:.2f}",
                  f"{max(result['accuracy']):.2f}",
                  '-' if reached[name] is None else f'{reached[name]:.0f}',
                  f"{result['seconds'][-1] / args.epochs:.1f}",
                  f"{result['nodes_per_batch']:,.0f}",
                  f"{result['edges_per_batch']:,.0f}")
    pyg = {n: t for n, t in reached.items()
           if n.startswith('PyG') and t is not None}
    summary: Dict[str, Any] = {'target': target}
    if pyg:
        baseline = min(pyg, key=pyg.get)
        for name, when in reached.items():
            if not name.startswith('PyG') and when is not None:
                summary[f'{name} speedup'] = pyg[baseline] / when
                print(f'{name}: reaches {target:.2f}% '
                      f'{pyg[baseline] / when:.2f}x sooner than {baseline}')
    if 'neighbor' in results and 'labor-0' in results:
        ratio = results['neighbor']['nodes_per_batch'] / \
            results['labor-0']['nodes_per_batch']
        summary['labor-0 fewer nodes'] = ratio
        print(f'LABOR-0 samples {ratio:.2f}x fewer nodes per batch than '
              f'neighbour sampling')
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / 'time_to_accuracy.json').write_text(json.dumps(
        {'args': {k: v for k, v in vars(args).items() if k != 'run'},
         'graph': described, 'results': results, 'summary': summary},
        indent=1, default=str) + '\n')
    _plot(results, target, out / 'time_to_accuracy.png')
    print(f'wrote {out / "time_to_accuracy.json"} and '
          f'{out / "time_to_accuracy.png"}')
    return summary


def _plot(results: Dict[str, Dict[str, Any]], target: float,
          path: Path) -> None:
    figure = Figure(figsize=(7, 4.5), layout='constrained')
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    for name, result in results.items():
        axes.plot(result['seconds'], result['accuracy'], marker='o',
                  label=name)
    axes.axhline(target, color='grey', linestyle='--', linewidth=1,
                 label=f'target {target:.1f}%')
    axes.set_xlabel('training time (s)')
    axes.set_ylabel('validation accuracy (%)')
    axes.legend(fontsize=8)
    figure.savefig(path, dpi=110)


def main(argv: Optional[List[str]] = None) -> None:
    benchmark_main(__doc__, add_arguments, run, argv)


if __name__ == '__main__':
    main()
