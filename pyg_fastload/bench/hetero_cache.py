r"""A feature cache shared by the node types of a heterogeneous graph
(``pyg-fastload bench cache --preset mag-like``): the share of one epoch's
feature-row fetches (paper seeds, the same fan-outs on every relation) that
the hottest rows serve, ranked across types by every hotness policy over
all relations, against the oracle ranking by the evaluated epoch's own
fetches.

Two feature layouts: ``papers only`` (ogbn-mag as released) and ``every
type`` (each type with 128 features, as with PyG's ``OGB_MAG(preprocess=
'metapath2vec')``), where one budget is shared across the types. Rows have
one size, so a cache of ``f`` of the feature bytes holds ``f`` of the
rows with features."""
from __future__ import annotations

import argparse
import time
from typing import Any, Dict

import torch
from torch import Tensor

from ..caching.hotness import (
    access_counts,
    hit_ratio_curve,
    hot_order,
    hotness_scores,
)
from ..config import POLICIES
from ..datasets import generate_hetero
from ..graph.convert import topology_of
from .common import Table, cpu_count

__all__ = ['run_hetero_cache']


def _layouts(topo: Any) -> Dict[str, Tensor]:
    r"""The global ids of the rows with features, per feature layout."""
    paper = topo.node_types.index('paper')
    first, last = int(topo.node_offset[paper]), int(
        topo.node_offset[paper + 1])
    return {'papers only': torch.arange(first, last),
            'every type': torch.arange(topo.num_nodes)}


def run_hetero_cache(args: argparse.Namespace) -> Dict[str, Any]:
    r"""Runs the heterogeneous hit-ratio comparison and prints it; returns
    ``{layout: {'curves': {name: [ratio per fraction]}, 'at_20': {name:
    ratio}}}`` and the seconds every policy took."""
    print(f'# hetero cache benchmark: preset={args.preset} '
          f'scale={args.scale} fanout={args.fanout} (every relation) '
          f'batch_size={args.batch_size} seed={args.seed} '
          f'cpus={cpu_count()} torch_threads={torch.get_num_threads()}')
    start = time.perf_counter()
    data = generate_hetero(args.preset, seed=args.seed, scale=args.scale)
    topo = topology_of(data)
    print(f'graph: {topo.num_nodes:,} nodes of {len(topo.node_types)} '
          f'types, {topo.num_edges:,} edges of {len(topo.edge_types)} '
          f'relations; generated in {time.perf_counter() - start:.1f}s')
    paper = int(topo.node_offset[topo.node_types.index('paper')])
    train = data['paper'].train_mask.nonzero().view(-1) + paper
    gen = torch.Generator().manual_seed(args.seed)
    batches = list(train[torch.randperm(train.numel(), generator=gen)]
                   .split(args.batch_size))
    if args.max_batches:
        batches = batches[:args.max_batches]
    print(f'\n## one epoch: {len(batches)} batches of {args.batch_size} '
          f'paper seeds')
    seconds: Dict[str, float] = {}
    start = time.perf_counter()
    counts = access_counts(topo, batches, args.fanout, seed=args.seed,
                           progress=True)
    seconds['oracle trace (evaluated epoch)'] = time.perf_counter() - start
    scores: Dict[str, Tensor] = {}
    for policy in POLICIES:
        start = time.perf_counter()
        scores[policy] = hotness_scores(
            policy, topo, train_nodes=train, num_neighbors=args.fanout,
            batch_size=args.batch_size, seed=args.seed + 1, progress=True)
        seconds[policy] = time.perf_counter() - start
    fractions = [float(f) for f in args.fractions]
    results: Dict[str, Any] = {'seconds': seconds}
    for layout, rows in _layouts(topo).items():
        fetched = counts[rows]
        types = topo.node_type_of(rows[fetched > 0]).bincount(
            minlength=len(topo.node_types))
        share = ', '.join(f'{t} {int(c):,}' for t, c in
                          zip(topo.node_types, types.tolist()) if c)
        print(f'\n## features on {layout}: {rows.numel():,} rows, '
              f'{int(fetched.sum()):,} fetches (rows fetched by type: '
              f'{share})')
        orders = {name: hot_order(s[rows]) for name, s in scores.items()}
        orders['oracle'] = hot_order(fetched)
        curves = {name: hit_ratio_curve(fetched, order,
                                        [f / 100 for f in fractions])
                  for name, order in orders.items()}
        table = Table({'cache %': 8, **{n: max(len(n), 6) for n in orders}})
        for i, f in enumerate(fractions):
            table.row(f'{f:g}', *(f'{curves[n][i]:.3f}' for n in orders))
        at_20 = {n: hit_ratio_curve(fetched, o, [0.2])[0]
                 for n, o in orders.items()}
        print('\nat 20% of the feature bytes, x oracle: ' + ', '.join(
            f"{n} {at_20[n] / at_20['oracle']:.3f}" for n in POLICIES))
        results[layout] = {'curves': curves, 'at_20': at_20}
    print('\n## time to rank the rows')
    table = Table({'policy': 30, 'seconds': 8})
    for name, value in seconds.items():
        table.row(name, f'{value:.1f}')
    return results

