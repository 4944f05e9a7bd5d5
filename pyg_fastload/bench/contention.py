r"""``pyg-fastload bench loader --contention N``: how much each loader slows
down when :obj:`N` other busy processes run at normal priority beside it
(as on a shared machine, or with preprocessing next to training). Times
steady-state batches of our loader (pipelined, its steady state after the
first epoch) and of PyG's ``NeighborLoader`` (each ``--pyg-workers``
setting) on an idle machine and under the load, interleaved, and prints
each slowdown (under load / idle; lower is better)."""
from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import time
import warnings
from statistics import median
from typing import Callable, Dict, Iterable, List, Tuple

import torch
from torch_geometric.loader import NeighborLoader

from ..datasets import load_synthetic
from ..loader import FastNeighborLoader
from .common import Table, time_loader

__all__ = ['run_contention', 'idle_and_loaded']

_BUSY = 'while True:\n    pass\n'


def _busy(count: int) -> List[subprocess.Popen]:
    r""":obj:`count` processes spinning at normal priority."""
    return [subprocess.Popen([sys.executable, '-c', _BUSY])
            for _ in range(count)]


def _loaders(args: argparse.Namespace, data: object,
             seeds: torch.Tensor) -> Dict[str, Callable[[], Iterable]]:
    kwargs = dict(num_neighbors=args.fanout, input_nodes=seeds,
                  batch_size=args.batch_size, shuffle=False)
    loaders: Dict[str, Callable[[], Iterable]] = {
        'FastNeighborLoader': lambda: FastNeighborLoader(
            data, pipeline=True, **kwargs)}
    if args.pyg_workers and importlib.util.find_spec('torch_sparse'):
        for workers in args.pyg_workers:
            def make(w: int = workers) -> Iterable:
                with warnings.catch_warnings():  # "pyg-lib is recommended"
                    warnings.simplefilter('ignore', UserWarning)
                    return NeighborLoader(data, num_workers=w, **kwargs)
            loaders[f'PyG NeighborLoader(num_workers={workers})'] = make
    return loaders


def idle_and_loaded(loaders: Dict[str, Callable[[], Iterable]],
                    args: argparse.Namespace
                    ) -> Dict[str, Tuple[float, float]]:
    r"""Each loader's median seconds per steady-state batch ``(idle,
    loaded)``: timed on an idle machine and beside ``args.contention`` busy
    processes, interleaved, ``args.rounds`` times (``args.warmup`` and
    ``args.batches`` batches each)."""
    times: Dict[str, Dict[str, List[float]]] = {
        name: {'idle': [], 'loaded': []} for name in loaders}
    for _ in range(args.rounds):
        for state in ('idle', 'loaded'):
            busy = _busy(args.contention) if state == 'loaded' else []
            try:
                time.sleep(0.5 if busy else 0.0)  # let them start
                for name, make in loaders.items():
                    _, steady = time_loader(make(), args.warmup,
                                            args.batches)
                    times[name][state].append(steady / args.batches)
            finally:
                for process in busy:
                    process.kill()
                    process.wait(timeout=10)
    return {name: (median(got['idle']), median(got['loaded']))
            for name, got in times.items()}


def run_contention(args: argparse.Namespace) -> Dict[str, float]:
    r"""Runs the comparison and prints it; returns each loader's idle and
    loaded seconds per batch and slowdown."""
    if args.contention < 1:
        raise ValueError(f"'--contention {args.contention}' must be 1 or "
                         f"more busy processes")
    print(f'# contention benchmark: preset={args.preset} fanout='
          f'{args.fanout} batch_size={args.batch_size} batches='
          f'{args.batches} rounds={args.rounds}, {args.contention} busy '
          f'process(es) at normal priority')
    data = load_synthetic(args.preset, root=args.cache_dir).to_data()
    gen = torch.Generator().manual_seed(args.seed)
    train = data.train_mask.nonzero().view(-1)
    need = (args.warmup + args.batches) * args.batch_size
    if train.numel() < need:
        raise ValueError(f"'--warmup {args.warmup} --batches "
                         f"{args.batches}' need {need} training seeds; the "
                         f"graph has {train.numel()}: pass fewer batches")
    seeds = train[torch.randperm(train.numel(), generator=gen)[:need]]
    loaders = _loaders(args, data, seeds)
    timed = idle_and_loaded(loaders, args)
    table = Table({'loader': 42, 'idle s/batch': 12, 'loaded s/batch': 14,
                   'slowdown': 9})
    result: Dict[str, float] = {}
    for name, (idle, loaded) in timed.items():
        table.row(name, idle, loaded, f'{loaded / idle:.2f}x')
        result[f'{name} slowdown'] = loaded / idle
        result[f'{name} loaded s/batch'] = loaded
    ours = result['FastNeighborLoader slowdown']
    pyg = {k: v for k, v in result.items()
           if k.startswith('PyG') and k.endswith('slowdown')}
    if pyg:
        best = min(pyg, key=lambda k: result[k.replace(
            'slowdown', 'loaded s/batch')])
        print(f"{'met' if ours <= pyg[best] else 'SHORT'}: our slowdown "
              f"under {args.contention} busy process(es) is {ours:.2f}x, "
              f"PyG's fastest loaded setting's "
              f"({best.replace(' slowdown', '')}) {pyg[best]:.2f}x "
              f"(target: no worse than PyG's)")
    return result
