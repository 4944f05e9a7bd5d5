r"""The loader against DGL's ``NeighborSampler`` (the strongest CPU anchor
besides pyg-lib): the same graph, seeds, fan-outs and batch size, input
features gathered, steady-state batches per second.

DGL needs an older torch than pyg_fastload, so it runs in a virtual
environment of its own, whose Python ``--dgl-python`` names (see
``docs/benchmarks.md`` for the commands that make one); the bench writes
the graph there as NumPy arrays (no pickle) and runs
``pyg_fastload/bench/dgl_side.py`` with that Python for every
``--dgl-workers`` setting. Without ``--dgl-python`` only our side runs.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
from typing import Any, Dict, List, Optional

import numpy as np
import torch

from ..datasets import load_synthetic
from ..loader import FastNeighborLoader
from .common import (
    Table,
    add_graph_arguments,
    benchmark_main,
    median,
    time_loader,
)

__all__ = ['add_arguments', 'run', 'main', 'DGL_SIDE']

#: The script the DGL environment runs.
DGL_SIDE = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                        'dgl_side.py')


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_graph_arguments(parser)
    parser.add_argument('--dgl-python', default=None,
                        help="the Python of a virtual environment with DGL "
                        "(default: only our side runs)")
    parser.add_argument('--dgl-workers', type=int, nargs='+',
                        default=[0, 1, 2],
                        help="num_workers settings tried for DGL's loader")
    parser.add_argument('--sampling-workers', type=int, default=2,
                        help='our loader also with this many sampling '
                        'threads (1: not)')
    parser.add_argument('--batches', type=int, default=40)
    parser.add_argument('--warmup', type=int, default=5)
    parser.add_argument('--rounds', type=int, default=3)
    parser.add_argument('--timeout', type=float, default=3600.0,
                        help='seconds the DGL side may take')


def _write(path: str, indptr: torch.Tensor, indices: torch.Tensor,
           x: torch.Tensor, seeds: torch.Tensor) -> None:
    for name, value in (('indptr', indptr), ('indices', indices),
                        ('x', x), ('seeds', seeds)):
        np.save(os.path.join(path, f'{name}.npy'), value.numpy(),
                allow_pickle=False)


def _dgl(args: argparse.Namespace, graph: Any,
         seeds: torch.Tensor) -> Optional[Dict[str, Any]]:
    r"""The DGL side's JSON report, or :obj:`None` (said why)."""
    if not args.dgl_python:
        print('DGL side skipped: no --dgl-python')
        return None
    topo = graph.topology
    with tempfile.TemporaryDirectory(prefix='pyg-fastload-dgl-') as path:
        _write(path, topo.indptr.long(), topo.indices.long(), graph.x,
               seeds)
        command = [args.dgl_python, DGL_SIDE, '--graph', path, '--fanout',
                   *map(str, args.fanout), '--batch-size',
                   str(args.batch_size), '--batches', str(args.batches),
                   '--warmup', str(args.warmup), '--rounds',
                   str(args.rounds), '--num-workers',
                   *map(str, args.dgl_workers)]
        try:
            done = subprocess.run(command, capture_output=True, text=True,
                                  timeout=args.timeout)
        except (OSError, subprocess.TimeoutExpired) as error:
            print(f'DGL side failed: {error}')
            return None
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ['(no output)'])[-1]
        print(f'DGL side failed (exit {done.returncode}): {tail}')
        return None
    return json.loads(lines[-1])


def run(args: argparse.Namespace) -> Dict[str, Any]:
    graph = load_synthetic(args.preset, root=args.cache_dir)
    data = graph.to_data()
    train = data.train_mask.nonzero().view(-1)
    gen = torch.Generator().manual_seed(args.seed)
    needed = (args.warmup + args.batches) * args.batch_size
    seeds = train[torch.randperm(train.numel(), generator=gen)][:needed]
    if seeds.numel() < needed:
        raise ValueError(f"'--warmup {args.warmup} --batches "
                         f"{args.batches}' need {needed} seeds; the graph "
                         f"has {seeds.numel()} training nodes")
    print(f'# DGL anchor: preset={args.preset} ({data.num_nodes:,} nodes, '
          f'{data.num_edges:,} edges) fanout={args.fanout} '
          f'batch_size={args.batch_size} batches={args.batches} after '
          f'{args.warmup}, median of {args.rounds} rounds')
    # The defaults (`pipeline='auto'`: a fresh loader measures its first
    # batches in this thread and in the pipeline, and goes on with one),
    # the sequential loader (as DGL's num_workers=0), the pool.
    sequential = 'FastNeighborLoader(pipeline=False)'
    ours = {'FastNeighborLoader': {}, sequential: dict(pipeline=False)}
    if args.sampling_workers > 1:
        ours[f'FastNeighborLoader(sampling_workers='
             f'{args.sampling_workers})'] = dict(
                 pipeline=True, sampling_workers=args.sampling_workers)
    rates: Dict[str, float] = {}
    result: Dict[str, Any] = {'batches_per_s': rates}
    for name, kwargs in ours.items():
        times = []
        for _ in range(args.rounds):
            loader = FastNeighborLoader(
                data, args.fanout, input_nodes=seeds,
                batch_size=args.batch_size, shuffle=False, **kwargs)
            times.append(time_loader(loader, args.warmup, args.batches)[1])
        rates[name] = args.batches / median(times)
        if name == sequential:
            parts = loader.time_breakdown  # the last round's
            stages = {part: 1e3 * parts[part] / max(parts['batches'], 1)
                      for part in ('sampling', 'feature_loading')}
            result['sequential ms per batch'] = stages
            print(f"{name}: sampling {stages['sampling']:.1f} ms and "
                  f"feature loading {stages['feature_loading']:.1f} ms per "
                  f"batch, each on all cores")
    report = _dgl(args, graph, seeds)
    if report is not None:
        for workers, rate in report['batches_per_s'].items():
            rates[f"DGL {report['dgl']} (torch {report['torch']}), "
                  f"num_workers={workers}"] = rate
    table = Table({'loader': 52, 'batches/s': 10})
    for name, rate in rates.items():
        table.row(name, rate)
    dgl = {k: v for k, v in rates.items() if k.startswith('DGL')}
    if dgl:
        best = max(dgl, key=dgl.get)
        print(f'2.5x the best DGL setting is '
              f'{1e3 / (2.5 * dgl[best]):.1f} ms per batch')
        for name in ours:
            ratio = rates[name] / dgl[best]
            result[f'{name} / DGL'] = ratio
            print(f"{name} / best DGL ({best}): {ratio:.2f}x (target >= "
                  f"2.5x with our defaults: "
                  f"{'met' if ratio >= 2.5 else 'missed'})")
    return result


def main(argv: Optional[List[str]] = None) -> None:
    benchmark_main(__doc__, add_arguments, run, argv)


if __name__ == '__main__':  # pragma: no cover
    main()
