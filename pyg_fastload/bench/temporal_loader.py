r"""Temporal loader throughput (``pyg-fastload bench loader --task temporal
--preset arxiv-like``): :class:`~pyg_fastload.FastNeighborLoader` with node
times (``time_attr``, ``'uniform'`` and ``'last'``) beside the same loader
without times, on the same seeds and fan-outs, interleaved in one process,
timed in steady state after ``--warmup`` batches.

Temporal sampling needs ``disjoint=True`` (one tree per seed, as in PyG),
so the like-for-like reference is the disjoint loader without times; the
default (shared-tree) loader is listed too. PyG has no temporal sampler
without pyg-lib, which cannot be pip-installed, so no PyG baseline runs.
The graph's node times are drawn uniformly from ``[0, 1000)``; every seed
is at its own node time (PyG's default without ``input_time``), so about
half of a node's neighbours are valid for it."""
from __future__ import annotations

import argparse
import time
from typing import Callable, Dict, Iterable, List

import torch

from ..datasets import load_synthetic
from ..loader import FastNeighborLoader
from .common import Table, cpu_count, median, time_loader

__all__ = ['run_temporal']


def run_temporal(args: argparse.Namespace) -> Dict[str, float]:
    r"""Runs the temporal comparison and prints it; returns the headline
    figures (seeds/s per loader and ``temporal_ratio``, temporal uniform
    over disjoint without times)."""
    print(f'# temporal loader benchmark: preset={args.preset} '
          f'fanout={args.fanout} batch_size={args.batch_size} '
          f'batches={args.batches} rounds={args.rounds} cpus={cpu_count()} '
          f'torch_threads={torch.get_num_threads()}')
    print('PyG baseline: none (temporal sampling in PyG needs pyg-lib, '
          'which is not on the package index)')
    if args.warmup < 1:
        raise ValueError(f"'--warmup {args.warmup}': the first batch is the "
                         f"start-up measurement, so pass 1 or more")
    data = load_synthetic(args.preset, root=args.cache_dir).to_data()
    gen = torch.Generator().manual_seed(args.seed)
    data.time = torch.randint(0, 1000, (data.num_nodes, ), generator=gen)
    needed = (args.warmup + args.batches) * args.batch_size
    seeds = torch.randperm(data.num_nodes, generator=gen)[:needed]
    if seeds.numel() < needed:
        raise ValueError(f"'--warmup {args.warmup} --batches {args.batches}'"
                         f" need {needed} seeds; the graph has "
                         f"{seeds.numel()}: pass fewer batches")
    kwargs = dict(num_neighbors=args.fanout, input_nodes=seeds,
                  batch_size=args.batch_size, shuffle=False, pipeline=True)
    start = time.perf_counter()
    FastNeighborLoader(data, time_attr='time', disjoint=True, **kwargs)
    print(f'time index built (in-edges sorted by time) in '
          f'{time.perf_counter() - start:.1f}s')
    loaders: Dict[str, Callable[[], Iterable]] = {
        'no times, shared trees (default)': lambda: FastNeighborLoader(
            data, **kwargs),
        'no times, disjoint': lambda: FastNeighborLoader(
            data, disjoint=True, **kwargs),
        "temporal 'uniform' (disjoint)": lambda: FastNeighborLoader(
            data, time_attr='time', disjoint=True, **kwargs),
        "temporal 'last' (disjoint)": lambda: FastNeighborLoader(
            data, time_attr='time', disjoint=True,
            temporal_strategy='last', **kwargs),
    }
    times: Dict[str, List[float]] = {name: [] for name in loaders}
    nodes: Dict[str, List[float]] = {name: [] for name in loaders}
    for _ in range(args.rounds):
        for name, make_loader in loaders.items():
            loader = make_loader()
            _, steady = time_loader(loader, args.warmup, args.batches)
            times[name].append(steady)
            nodes[name].append(float(next(iter(loader)).num_nodes))
    print(f'\n## sampling + feature gathering, steady state: '
          f'{args.batches} batches after {args.warmup} untimed (pipelined)')
    table = Table({'loader': 34, 'seeds/s': 10, 's/batch': 9,
                   'nodes/batch': 11})
    rate = {}
    for name, values in times.items():
        rate[name] = args.batches * args.batch_size / median(values)
        table.row(name, rate[name], median(values) / args.batches,
                  median(nodes[name]))
    ratio = rate["temporal 'uniform' (disjoint)"] / rate['no times, disjoint']
    print(f"ratio temporal 'uniform' / disjoint without times: "
          f"{ratio:.2f}x (temporal batches are smaller: only earlier "
          f"neighbours qualify)")
    return {**{f'seeds_per_s[{k}]': v for k, v in rate.items()},
            'temporal_ratio': ratio}
