r"""Temporal loader throughput (``pyg-fastload bench loader --task temporal
--preset arxiv-like``, or a heterogeneous preset such as ``mag-like``):
:class:`~pyg_fastload.FastNeighborLoader` with node times (``time_attr``,
``'uniform'`` and ``'last'``) beside the same loader without times, on the
same seeds and fan-outs, interleaved in one process, timed in steady state
after ``--warmup`` batches.

Temporal sampling needs ``disjoint=True`` (one tree per seed, as in PyG),
so the like-for-like reference is the disjoint loader without times; the
default (shared-tree) loader is listed too. PyG samples in time only with
pyg-lib, which is not on the package index: where it is installed, PyG's
``NeighborLoader`` runs the same temporal settings (``num_workers=0``) and
the ratio against it is printed; otherwise no PyG baseline runs. Every
node type gets times drawn uniformly from ``[0, 1000)``; every seed (a
paper on a heterogeneous preset) is at its own node time (PyG's default
without ``input_time``), so about half of a node's neighbours are valid
for it."""
from __future__ import annotations

import argparse
import importlib.util
import time
from typing import Any, Callable, Dict, Iterable, List, Tuple

import torch
from torch_geometric.loader import NeighborLoader

from ..datasets import HETERO_PRESETS, generate_hetero, load_synthetic
from ..loader import FastNeighborLoader
from .common import Table, cpu_count, median, time_loader

__all__ = ['run_temporal']

UNIFORM = "temporal 'uniform' (disjoint)"
LAST = "temporal 'last' (disjoint)"


def _timed_graph(args: argparse.Namespace,
                 gen: torch.Generator) -> Tuple[Any, Any]:
    r"""The preset's graph with node times and the seeds argument
    (``input_nodes``)."""
    if args.preset in HETERO_PRESETS:
        data = generate_hetero(args.preset, seed=args.seed, scale=args.scale)
        for node_type in data.node_types:
            data[node_type].time = torch.randint(
                0, 1000, (data[node_type].num_nodes, ), generator=gen)
        count = data['paper'].num_nodes
    else:
        data = load_synthetic(args.preset, root=args.cache_dir).to_data()
        data.time = torch.randint(0, 1000, (data.num_nodes, ), generator=gen)
        count = data.num_nodes
    needed = (args.warmup + args.batches) * args.batch_size
    seeds = torch.randperm(count, generator=gen)[:needed]
    if seeds.numel() < needed:
        raise ValueError(f"'--warmup {args.warmup} --batches {args.batches}'"
                         f" need {needed} seeds; the graph has "
                         f"{seeds.numel()}: pass fewer batches")
    if args.preset in HETERO_PRESETS:
        return data, ('paper', seeds)
    return data, seeds


def run_temporal(args: argparse.Namespace) -> Dict[str, float]:
    r"""Runs the temporal comparison and prints it; returns the headline
    figures (seeds/s per loader, ``temporal_ratio``: temporal uniform over
    disjoint without times, and with pyg-lib ``pyg_lib_ratio[...]``: ours
    over PyG's for each strategy)."""
    print(f'# temporal loader benchmark: preset={args.preset} '
          f'fanout={args.fanout} batch_size={args.batch_size} '
          f'batches={args.batches} rounds={args.rounds} cpus={cpu_count()} '
          f'torch_threads={torch.get_num_threads()}')
    pyg_lib = importlib.util.find_spec('pyg_lib') is not None
    print('PyG baseline: NeighborLoader with pyg-lib, num_workers=0' if
          pyg_lib else 'PyG baseline: none (temporal sampling in PyG needs '
          'pyg-lib, which is not installed and not on the package index)')
    if args.warmup < 1:
        raise ValueError(f"'--warmup {args.warmup}': the first batch is the "
                         f"start-up measurement, so pass 1 or more")
    data, seeds = _timed_graph(args, torch.Generator().manual_seed(args.seed))
    kwargs = dict(num_neighbors=args.fanout, input_nodes=seeds,
                  batch_size=args.batch_size, shuffle=False)
    ours = dict(kwargs, pipeline=True)
    start = time.perf_counter()
    FastNeighborLoader(data, time_attr='time', disjoint=True, **ours)
    print(f'time index built (in-edges sorted by time) in '
          f'{time.perf_counter() - start:.1f}s')
    loaders: Dict[str, Callable[[], Iterable]] = {
        'no times, shared trees (default)': lambda: FastNeighborLoader(
            data, **ours),
        'no times, disjoint': lambda: FastNeighborLoader(
            data, disjoint=True, **ours),
        UNIFORM: lambda: FastNeighborLoader(
            data, time_attr='time', disjoint=True, **ours),
        LAST: lambda: FastNeighborLoader(
            data, time_attr='time', disjoint=True,
            temporal_strategy='last', **ours),
    }
    if pyg_lib:
        for strategy, name in (('uniform', UNIFORM), ('last', LAST)):
            loaders[f'PyG {name}'] = (
                lambda s=strategy: NeighborLoader(
                    data, time_attr='time', disjoint=True,
                    temporal_strategy=s, **kwargs))
    times: Dict[str, List[float]] = {name: [] for name in loaders}
    nodes: Dict[str, List[float]] = {name: [] for name in loaders}
    for _ in range(args.rounds):
        for name, make_loader in loaders.items():
            loader = make_loader()
            _, steady = time_loader(loader, args.warmup, args.batches)
            times[name].append(steady)
            nodes[name].append(float(next(iter(loader)).num_nodes))
    print(f'\n## sampling + feature gathering, steady state: '
          f'{args.batches} batches after {args.warmup} untimed (ours '
          f'pipelined)')
    table = Table({'loader': 40, 'seeds/s': 10, 's/batch': 9,
                   'nodes/batch': 11})
    rate = {}
    for name, values in times.items():
        rate[name] = args.batches * args.batch_size / median(values)
        table.row(name, rate[name], median(values) / args.batches,
                  median(nodes[name]))
    out = {f'seeds_per_s[{k}]': v for k, v in rate.items()}
    out['temporal_ratio'] = rate[UNIFORM] / rate['no times, disjoint']
    print(f"ratio temporal 'uniform' / disjoint without times: "
          f"{out['temporal_ratio']:.2f}x (temporal batches are smaller: "
          f"only earlier neighbours qualify)")
    if pyg_lib:
        for name in (UNIFORM, LAST):
            out[f'pyg_lib_ratio[{name}]'] = rate[name] / rate[f'PyG {name}']
            print(f"ratio ours / PyG with pyg-lib, {name}: "
                  f"{out[f'pyg_lib_ratio[{name}]']:.2f}x")
    return out
