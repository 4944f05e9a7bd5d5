r"""Loader throughput on a ``HeteroData`` (``pyg-fastload bench loader
--preset mag-like --fanout 15 10``): PyG's ``NeighborLoader`` (each
``num_workers`` setting, torch_sparse's sampler) against
:class:`~pyg_fastload.FastNeighborLoader` on the same paper seeds and
fan-outs on every relation, interleaved in one process, timed in steady
state after ``--warmup`` batches, the time to the first batch apart, and
the fast loader's peak memory beyond the graph."""
from __future__ import annotations

import argparse
import importlib.util
import time
import warnings
from typing import Callable, Dict, Iterable, List, Optional

import torch
from torch_geometric.loader import NeighborLoader
from torch_geometric.sampler import NeighborSampler

from ..datasets import generate_hetero
from ..loader import FastNeighborLoader
from ..sampling import HeteroNeighborSampler
from .common import (
    Table,
    cpu_count,
    median,
    peak_rss_bytes,
    reset_peak_rss,
    rss_bytes,
    time_loader,
)

__all__ = ['run_hetero']


def run_hetero(args: argparse.Namespace) -> Dict[str, float]:
    r"""Runs the heterogeneous comparison and prints it; returns the
    headline figures."""
    print(f'# hetero loader benchmark: preset={args.preset} '
          f'scale={args.scale} fanout={args.fanout} (every relation) '
          f'batch_size={args.batch_size} batches={args.batches} '
          f'rounds={args.rounds} cpus={cpu_count()} '
          f'torch_threads={torch.get_num_threads()}')
    if args.warmup < 1:
        raise ValueError(f"'--warmup {args.warmup}': the first batch is the "
                         f"start-up measurement, so pass 1 or more")
    start = time.perf_counter()
    data = generate_hetero(args.preset, seed=args.seed, scale=args.scale)
    nodes = sum(data[t].num_nodes for t in data.node_types)
    edges = sum(data[e].edge_index.size(1) for e in data.edge_types)
    print(f'graph: {nodes:,} nodes of {len(data.node_types)} types, '
          f'{edges:,} edges of {len(data.edge_types)} relations; generated '
          f'in {time.perf_counter() - start:.1f}s')
    train = data['paper'].train_mask.nonzero().view(-1)
    gen = torch.Generator().manual_seed(args.seed)
    needed = (args.warmup + args.batches) * args.batch_size
    seeds = train[torch.randperm(train.numel(), generator=gen)][:needed]
    if seeds.numel() < needed:
        raise ValueError(f"'--warmup {args.warmup} --batches {args.batches}'"
                         f" need {needed} paper seeds; the graph has "
                         f"{seeds.numel()}: pass fewer batches")
    kwargs = dict(num_neighbors=args.fanout, input_nodes=('paper', seeds),
                  batch_size=args.batch_size, shuffle=False)
    start = time.perf_counter()
    ours = HeteroNeighborSampler(data, args.fanout)
    print(f'HeteroNeighborSampler set-up: {time.perf_counter() - start:.1f}s')
    loaders: Dict[str, Callable[[], Iterable]] = {
        'FastNeighborLoader': lambda: FastNeighborLoader(
            data, neighbor_sampler=ours, pipeline=True, **kwargs),
        'FastNeighborLoader(pipeline=False)': lambda: FastNeighborLoader(
            data, neighbor_sampler=ours, pipeline=False, **kwargs),
    }
    if args.pyg_workers and importlib.util.find_spec('torch_sparse'):
        start = time.perf_counter()
        with warnings.catch_warnings():  # "pyg-lib is recommended"
            warnings.simplefilter('ignore', UserWarning)
            theirs = NeighborSampler(data, args.fanout)
        print(f'PyG NeighborSampler set-up: '
              f'{time.perf_counter() - start:.1f}s')
        for workers in args.pyg_workers:
            loaders[f'PyG NeighborLoader(num_workers={workers})'] = (
                lambda w=workers: NeighborLoader(
                    data, neighbor_sampler=theirs, num_workers=w, **kwargs))
    elif args.pyg_workers:
        print("PyG NeighborLoader skipped: it needs torch_sparse here")
    times: Dict[str, List[float]] = {name: [] for name in loaders}
    startups: Dict[str, List[float]] = {name: [] for name in loaders}
    peak: Optional[int] = None
    for round_ in range(args.rounds):
        for name, make in loaders.items():
            track = name == 'FastNeighborLoader' and \
                round_ == args.rounds - 1 and reset_peak_rss()
            before = rss_bytes() if track else 0
            startup, steady = time_loader(make(), args.warmup, args.batches)
            if track:
                peak = max(peak_rss_bytes() - before, 0)
            times[name].append(steady)
            startups[name].append(startup)
    print(f'\n## end-to-end (sampling + feature gathering), steady state: '
          f'{args.batches} batches after {args.warmup} untimed')
    table = Table({'loader': 42, 'seeds/s': 10, 's/batch': 9,
                   'start-up s': 10})
    rate = {}
    for name, values in times.items():
        rate[name] = args.batches * args.batch_size / median(values)
        table.row(name, rate[name], median(values) / args.batches,
                  median(startups[name]))
    result = {'fast_seeds_per_s': rate['FastNeighborLoader']}
    pyg = {k: v for k, v in rate.items() if k.startswith('PyG')}
    if pyg:
        best = max(pyg, key=pyg.get)
        result['speedup'] = rate['FastNeighborLoader'] / pyg[best]
        print(f"ratio FastNeighborLoader / best PyG ({best}), steady "
              f"state: {result['speedup']:.2f}x (target >= 5x: "
              f"{'met' if result['speedup'] >= 5 else 'missed'}); "
              f"start-up {median(startups['FastNeighborLoader']):.3f}s vs "
              f"{median(startups[best]):.3f}s")
    if peak is not None:
        print(f'FastNeighborLoader peak RSS beyond the graph: '
              f'{peak / 2**20:.0f} MiB (VmHWM after clear_refs)')
    return result
