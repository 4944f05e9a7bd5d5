r"""ByteGNN's per-batch task graphs on our sampling pool (``pyg-fastload
bench tasks`` or ``python -m pyg_fastload.bench.tasks``), three
experiments, each printing ratios against the named baseline measured in
the same run (interleaved rounds, medians):

- ``completion`` (the paper's section 5.4.3): the seconds from each
  batch's launch to the end of its task graph (fetches included) over an
  epoch of ``--scale`` of the training seeds, ready tasks served in
  ByteGNN's order (oldest batch, then cheapest) against FIFO, with
  ``--run-ahead`` batches in flight: median and variance.
- ``throughput``: batches per second of ``FastNeighborLoader`` on a pool
  of ``--sampling-workers`` threads, every hop a task with its feature
  fetch chained after it, and every hop a task without per-hop fetching,
  against the same pool running each batch's hops in one thread (features
  fetched after the batch by the loading stage), at each
  ``--batch-sizes``.
- ``contention``: each loader's slowdown with ``--contention`` CPU-bound
  processes beside it (seconds per batch loaded / idle): ours with one
  sampling thread and with the task-graph pool, against PyG's
  ``NeighborLoader`` (target: ours no more than 1.2x PyG's).
"""
from __future__ import annotations

import argparse
import importlib.util
import warnings
from statistics import pvariance
from typing import Any, Callable, Dict, Iterable, List

import torch
from torch_geometric.data import Data
from torch_geometric.loader import NeighborLoader

from ..datasets import load_synthetic
from ..loader import FastNeighborLoader
from ..loader.sampling_pool import TASK_ORDERS
from .common import (
    Table,
    add_graph_arguments,
    benchmark_main,
    cpu_count,
    median,
    stop_iterator,
    time_loader,
)
from .contention import idle_and_loaded

__all__ = ['add_arguments', 'run', 'main', 'EXPERIMENTS']

#: The experiments ``--experiment`` picks from.
EXPERIMENTS = ('completion', 'throughput', 'contention')
#: Our slowdown under contention may be at most this times PyG's.
CONTENTION_TARGET = 1.2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_graph_arguments(parser)
    parser.add_argument('--experiment', choices=(*EXPERIMENTS, 'all'),
                        default='all', help='what to measure')
    parser.add_argument('--scale', type=float, default=0.02,
                        help="share of the training seeds one epoch of "
                        "the completion experiment covers")
    parser.add_argument('--run-ahead', type=int, default=4,
                        help='batches in flight in the completion '
                        'experiment')
    parser.add_argument('--batch-sizes', type=int, nargs='+',
                        default=[128, 1024, 4096],
                        help='batch sizes of the throughput experiment')
    parser.add_argument('--batches', type=int, default=10,
                        help='batches timed per side and round')
    parser.add_argument('--warmup', type=int, default=2,
                        help='batches drawn untimed first')
    parser.add_argument('--rounds', type=int, default=3,
                        help='interleaved rounds (medians reported)')
    parser.add_argument('--sampling-workers', type=int, default=0,
                        help='threads of the pool (0: every core)')
    parser.add_argument('--contention', type=int, default=2,
                        help='CPU-bound processes beside the loader')


def _loader(data: Data, seeds: torch.Tensor, args: argparse.Namespace,
            batch_size: int, workers: int, **switches: Any
            ) -> FastNeighborLoader:
    r"""A pipelined loader over :obj:`seeds` in their order, its pool's
    switches (``task_order``, ``hop_tasks``) set."""
    loader = FastNeighborLoader(data, args.fanout, input_nodes=seeds,
                                batch_size=batch_size, shuffle=False,
                                pipeline=True, sampling_workers=workers,
                                **({'run_ahead': args.run_ahead}
                                   if 'task_order' in switches else {}))
    for name, value in switches.items():
        setattr(loader, name, value)
    return loader


def _dag_seconds(loader: FastNeighborLoader) -> List[float]:
    r"""Every batch's task-graph seconds over one epoch of :obj:`loader`."""
    iterator = iter(loader)
    for _ in iterator:
        pass
    seconds = list(iterator.dag_seconds)
    stop_iterator(iterator)
    return seconds


def completion(data: Data, train: torch.Tensor, args: argparse.Namespace,
               workers: int) -> Dict[str, float]:
    r"""The section 5.4.3 experiment: median and variance of the batches'
    task-graph seconds, priority order against FIFO."""
    seeds = train[:max(int(train.numel() * args.scale), args.batch_size)]
    print(f'## completion: {seeds.numel()} seeds, batch {args.batch_size}, '
          f'{args.run_ahead} in flight, {workers} workers')
    got: Dict[str, List[float]] = {order: [] for order in TASK_ORDERS}
    for _ in range(args.rounds):
        for order in TASK_ORDERS:
            got[order] += _dag_seconds(_loader(
                data, seeds, args, args.batch_size, workers,
                task_order=order))
    table = Table({'order': 10, 'batches': 8, 'median s': 10,
                   'variance s^2': 13})
    result: Dict[str, float] = {}
    for order, seconds in got.items():
        result[f'{order} median'] = median(seconds)
        result[f'{order} variance'] = pvariance(seconds)
        table.row(order, len(seconds), result[f'{order} median'],
                  result[f'{order} variance'])
    print(f"FIFO / priority: median "
          f"{result['fifo median'] / result['priority median']:.2f}x, "
          f"variance {result['fifo variance'] / result['priority variance']:.2f}x "
          f"(the paper: both above 1)")
    return result


def throughput(data: Data, train: torch.Tensor, args: argparse.Namespace,
               workers: int) -> Dict[str, float]:
    r"""Batches per second with and without per-hop tasks by batch
    size."""
    print(f'## throughput: {workers} workers, adaptive launches')
    sides = {'hop tasks + fetch': {'hop_tasks': True, 'hop_fetch': True},
             'hop tasks': {'hop_tasks': True, 'hop_fetch': False},
             'one task per batch': {'hop_tasks': False}}
    table = Table({'batch size': 10, **{f'{side} b/s': 20 for side in sides},
                   'ratios to one task': 20})
    result: Dict[str, float] = {}
    for size in args.batch_sizes:
        need = (args.warmup + args.batches) * size
        seeds = train[:need]
        if seeds.numel() < need:
            raise ValueError(f"'--batch-sizes {size}' needs {need} training "
                             f"seeds, the graph has {train.numel()}: pass "
                             f"fewer '--batches'")
        rates: Dict[str, List[float]] = {side: [] for side in sides}
        for _ in range(args.rounds):
            for side, switches in sides.items():
                _, steady = time_loader(
                    _loader(data, seeds, args, size, workers, **switches),
                    args.warmup, args.batches)
                rates[side].append(args.batches / steady)
        got = {side: median(r) for side, r in rates.items()}
        flat = got['one task per batch']
        table.row(size, *got.values(),
                  f"{got['hop tasks + fetch'] / flat:.2f}x, "
                  f"{got['hop tasks'] / flat:.2f}x")
        result[f'{size} ratio'] = got['hop tasks + fetch'] / flat
        result[f'{size} ratio without fetch'] = got['hop tasks'] / flat
    return result


def contention(data: Data, train: torch.Tensor, args: argparse.Namespace,
               workers: int) -> Dict[str, float]:
    r"""Each loader's slowdown under :obj:`args.contention` busy
    processes; ours against PyG's."""
    if args.contention < 1:
        raise ValueError(f"'--contention {args.contention}' must be 1 or "
                         f"more busy processes")
    need = (args.warmup + args.batches) * args.batch_size
    seeds = train[:need]
    print(f'## contention: {args.contention} busy process(es), batch '
          f'{args.batch_size}')
    loaders: Dict[str, Callable[[], Iterable]] = {
        'ours, 1 sampling thread': lambda: _loader(
            data, seeds, args, args.batch_size, 1),
        f'ours, task graphs on {workers} threads': lambda: _loader(
            data, seeds, args, args.batch_size, workers)}
    if importlib.util.find_spec('torch_sparse'):
        def pyg() -> Iterable:
            with warnings.catch_warnings():  # "pyg-lib is recommended"
                warnings.simplefilter('ignore', UserWarning)
                return NeighborLoader(data, args.fanout, input_nodes=seeds,
                                      batch_size=args.batch_size)
        loaders['PyG NeighborLoader'] = pyg
    timed = idle_and_loaded(loaders, args)
    table = Table({'loader': 34, 'idle s/batch': 12, 'loaded s/batch': 14,
                   'slowdown': 9})
    slowdown: Dict[str, float] = {}
    for name, (idle, loaded) in timed.items():
        slowdown[name] = loaded / idle
        table.row(name, idle, loaded, f'{loaded / idle:.2f}x')
    if 'PyG NeighborLoader' in slowdown:
        pyg_slowdown = slowdown.pop('PyG NeighborLoader')
        for name, value in list(slowdown.items()):
            ratio = value / pyg_slowdown
            print(f"{'met' if ratio <= CONTENTION_TARGET else 'SHORT'}: "
                  f"{name} slows {ratio:.2f}x as much as PyG's "
                  f"NeighborLoader (target: <= {CONTENTION_TARGET}x)")
            slowdown[f'{name} / PyG'] = ratio
    return slowdown


def run(args: argparse.Namespace) -> Dict[str, float]:
    r"""Runs the chosen experiments and prints them; returns their
    figures."""
    if not 0 < args.scale <= 1:
        raise ValueError(f"'--scale {args.scale}' must be in (0, 1]: the "
                         f"share of the training seeds an epoch covers")
    workers = args.sampling_workers or cpu_count()
    if workers < 2:
        raise ValueError(f"'--sampling-workers {workers}': the task graphs "
                         f"run on a pool, give 2 or more")
    print(f'# task-graph benchmark: preset={args.preset} fanout='
          f'{args.fanout} rounds={args.rounds} (timings on a shared '
          f'machine vary from run to run)')
    data = load_synthetic(args.preset, root=args.cache_dir).to_data()
    gen = torch.Generator().manual_seed(args.seed)
    train = data.train_mask.nonzero().view(-1)
    train = train[torch.randperm(train.numel(), generator=gen)]
    chosen = EXPERIMENTS if args.experiment == 'all' else (args.experiment, )
    experiments = {'completion': completion, 'throughput': throughput,
                   'contention': contention}
    result: Dict[str, float] = {}
    for name in chosen:
        for key, value in experiments[name](data, train, args,
                                            workers).items():
            result[f'{name}: {key}'] = value
    return result


def main(argv: Any = None) -> None:
    benchmark_main(__doc__, add_arguments, run, argv)


if __name__ == '__main__':
    main()
