r"""Link-level loader throughput (``pyg-fastload bench loader --task link
--preset arxiv-like``): PyG's ``LinkNeighborLoader`` (each ``num_workers``
setting, torch_sparse's sampler) against
:class:`~pyg_fastload.FastLinkNeighborLoader` on the same label edges,
fan-outs and binary negatives (ratio 1), interleaved in one process, timed
in steady state after ``--warmup`` batches, the time to the first batch
apart. On ``--preset mag-like`` (``--scale``) the label edges are the
``('author', 'writes', 'paper')`` relation's, the fan-outs apply to every
relation."""
from __future__ import annotations

import argparse
import importlib.util
import time
import warnings
from typing import Any, Callable, Dict, Iterable, List

import torch
from torch_geometric.loader import LinkNeighborLoader

from ..datasets import HETERO_PRESETS, generate_hetero, load_synthetic
from ..loader import FastLinkNeighborLoader
from .common import Table, cpu_count, median, time_loader

__all__ = ['run_link', 'HETERO_LABEL_EDGES']

#: The label edges of the heterogeneous presets (ogbn-mag's authorship).
HETERO_LABEL_EDGES = ('author', 'writes', 'paper')


def run_link(args: argparse.Namespace) -> Dict[str, float]:
    r"""Runs the link-level comparison and prints it; returns the headline
    figures (``fast_edges_per_s`` and, with PyG's loader, ``speedup``)."""
    print(f'# link loader benchmark: preset={args.preset} '
          f'fanout={args.fanout} batch_size={args.batch_size} (positive '
          f'edges; binary negatives, ratio 1) batches={args.batches} '
          f'rounds={args.rounds} cpus={cpu_count()} '
          f'torch_threads={torch.get_num_threads()}')
    if args.warmup < 1:
        raise ValueError(f"'--warmup {args.warmup}': the first batch is the "
                         f"start-up measurement, so pass 1 or more")
    if args.preset in HETERO_PRESETS:
        data: Any = generate_hetero(args.preset, scale=args.scale)
        edge_index = data[HETERO_LABEL_EDGES].edge_index
        print(f'label edges: {HETERO_LABEL_EDGES} ({edge_index.size(1):,} '
              f'edges); fan-outs on every relation')
    else:
        data = load_synthetic(args.preset, root=args.cache_dir).to_data()
        edge_index = data.edge_index
    needed = (args.warmup + args.batches) * args.batch_size
    gen = torch.Generator().manual_seed(args.seed)
    order = torch.randperm(edge_index.size(1), generator=gen)[:needed]
    if order.numel() < needed:
        raise ValueError(f"'--warmup {args.warmup} --batches {args.batches}'"
                         f" need {needed} label edges; the graph has "
                         f"{order.numel()}: pass fewer batches")
    label = edge_index[:, order]
    kwargs = dict(num_neighbors=args.fanout,
                  edge_label_index=(HETERO_LABEL_EDGES, label)
                  if args.preset in HETERO_PRESETS else label,
                  batch_size=args.batch_size, neg_sampling='binary',
                  shuffle=False)
    loaders: Dict[str, Callable[[], Iterable]] = {
        'FastLinkNeighborLoader': lambda: FastLinkNeighborLoader(
            data, generator=torch.Generator().manual_seed(args.seed),
            **kwargs)}
    pool = getattr(args, 'sampling_workers', 1)
    if pool > 1:
        loaders[f'FastLinkNeighborLoader(sampling_workers={pool})'] = (
            lambda: FastLinkNeighborLoader(
                data, generator=torch.Generator().manual_seed(args.seed),
                pipeline=True, sampling_workers=pool, **kwargs))
    if args.pyg_workers and importlib.util.find_spec('torch_sparse'):
        for workers in args.pyg_workers:
            def make(w: int = workers) -> Iterable:
                with warnings.catch_warnings():  # "pyg-lib is recommended"
                    warnings.simplefilter('ignore', UserWarning)
                    return LinkNeighborLoader(data, num_workers=w, **kwargs)
            loaders[f'PyG LinkNeighborLoader(num_workers={workers})'] = make
    elif args.pyg_workers:
        print("PyG LinkNeighborLoader skipped: it needs torch_sparse here")
    times: Dict[str, List[float]] = {name: [] for name in loaders}
    startups: Dict[str, List[float]] = {name: [] for name in loaders}
    for _ in range(args.rounds):
        for name, make_loader in loaders.items():
            start = time.perf_counter()
            loader = make_loader()
            setup = time.perf_counter() - start
            startup, steady = time_loader(loader, args.warmup, args.batches)
            times[name].append(steady)
            startups[name].append(setup + startup)
    print(f'\n## end-to-end (sampling + feature gathering), steady state: '
          f'{args.batches} batches after {args.warmup} untimed')
    table = Table({'loader': 44, 'edges/s': 10, 's/batch': 9,
                   'start-up s': 10})
    rate = {}
    for name, values in times.items():
        rate[name] = args.batches * args.batch_size / median(values)
        table.row(name, rate[name], median(values) / args.batches,
                  median(startups[name]))
    result = {'fast_edges_per_s': rate['FastLinkNeighborLoader']}
    pyg = {k: v for k, v in rate.items() if k.startswith('PyG')}
    if pyg:
        best = max(pyg, key=pyg.get)
        result['speedup'] = rate['FastLinkNeighborLoader'] / pyg[best]
        print(f"ratio FastLinkNeighborLoader / best PyG ({best}), steady "
              f"state: {result['speedup']:.2f}x (target >= 5x: "
              f"{'met' if result['speedup'] >= 5 else 'missed'})")
        if pool > 1:
            name = f'FastLinkNeighborLoader(sampling_workers={pool})'
            result['pool_speedup'] = rate[name] / pyg[best]
            print(f"ratio {name} / best PyG: "
                  f"{result['pool_speedup']:.2f}x (target >= 5x: "
                  f"{'met' if result['pool_speedup'] >= 5 else 'missed'})")
    return result
