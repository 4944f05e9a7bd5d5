r"""Static feature cache: how many of an epoch's feature-row fetches a cache
of the hottest rows serves, per hotness policy (PaGraph's out-degree, GIDS'
reverse PageRank, GNNLab's pre-sampling, random) against the oracle that
ranks by the evaluated epoch's own accesses.

Run ``pyg-fastload bench cache --preset products-like`` or
``python -m pyg_fastload.bench.cache``. On a heterogeneous preset
(``--preset mag-like --fanout 15 10``) one cache is shared by the node
types: the epoch's paper seeds draw the same fan-outs on every relation,
and the rows are ranked across types, in two feature layouts: ``papers
only`` (ogbn-mag as released) and ``every type`` (each type with 128
features, as with PyG's ``OGB_MAG(preprocess='metapath2vec')``). Rows have
one size, so a cache of ``f`` of the feature bytes holds ``f`` of the rows
with features.
"""
from __future__ import annotations

import argparse
import time
from typing import Any, Dict, List, Optional

import torch
from torch import Tensor

from ..caching.hotness import (
    access_counts,
    hit_ratio_curve,
    hot_order,
    hotness_scores,
)
from ..config import POLICIES
from ..datasets import (
    HETERO_PRESETS,
    degree_stats,
    generate_hetero,
    load_synthetic,
)
from ..graph import HeteroTopology
from ..graph.convert import topology_of
from .common import (
    Table,
    add_graph_arguments,
    benchmark_main,
    cpu_count,
    positive_int,
)
from .disk_tier import add_disk_arguments, disk_tier_section

__all__ = [
    'add_arguments',
    'run',
    'main',
    'evaluation_batches',
    'hit_ratio_section',
    'TARGETS',
]

#: The cache fraction the targets are checked at.
TARGET_FRACTION = 0.2

#: ``policy: (min ratio to the oracle, min ratio to random)`` at
#: :obj:`TARGET_FRACTION` (PaGraph: close to the oracle and well above
#: random; pre-sampling: nearly the oracle).
TARGETS: Dict[str, tuple] = {
    'out_degree': (0.95, 2.0),
    'presample': (0.98, None),
}


def _percent(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f'{text!r} is not a number: give cache sizes in percent of the '
            f'nodes, e.g. 20') from None
    if not 0.0 <= value <= 100.0:
        raise argparse.ArgumentTypeError(
            f'{text} is outside [0, 100]: give cache sizes in percent of the '
            f'nodes')
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_graph_arguments(parser, HETERO_PRESETS)
    parser.add_argument('--fractions', type=_percent, nargs='+',
                        default=[0, 5, 10, 20, 40, 60, 80, 100],
                        help='cache sizes in percent of the nodes '
                        '(default: 0 5 10 20 40 60 80 100)')
    add_disk_arguments(parser)
    parser.add_argument('--epochs-presample', type=positive_int, default=1,
                        help="epochs sampled by the 'presample' policy")
    parser.add_argument('--scale', type=float, default=1.0,
                        help="a heterogeneous preset's node and edge counts "
                        "times this (in (0, 1]; default 1)")
    parser.add_argument('--max-batches', type=positive_int, default=None,
                        help='heterogeneous presets: evaluate the first '
                        'this many batches of the epoch (default: all)')


def evaluation_batches(train: Tensor, batch_size: int,
                       seed: int) -> List[Tensor]:
    r"""The seed batches of one shuffled epoch over the training nodes
    :obj:`train` (the epoch every section of this benchmark evaluates)."""
    if train.numel() == 0:
        raise ValueError('the graph has no training nodes: the benchmark '
                         'samples epochs over train_mask')
    gen = torch.Generator().manual_seed(seed)
    train = train[torch.randperm(train.numel(), generator=gen)]
    return list(train.split(batch_size))


def _verdict(ok: bool) -> str:
    return 'PASS' if ok else 'FALL SHORT'


def hit_ratio_section(topo: Any, train: Tensor, args: argparse.Namespace,
                      layouts: Optional[Dict[str, Tensor]] = None
                      ) -> Dict[str, Any]:
    r"""Hit ratio against cache size for every policy and the oracle on one
    evaluated epoch over the seeds :obj:`train`; prints the tables and the
    verdicts at 20%.

    Args:
        topo (CSCTopology or HeteroTopology): the graph (global ids).
        train (torch.Tensor): the training seeds.
        args (argparse.Namespace): the benchmark's arguments.
        layouts (dict, optional): the rows with features by feature layout
            (a heterogeneous graph's); :obj:`None`: every row.

    Returns a dict with :obj:`fractions` (percent), :obj:`hit_ratio`
    (``{policy or 'oracle': [ratio per fraction]}``), :obj:`at_20`
    (``{name: ratio}`` at 20% rows), :obj:`vs_oracle` and :obj:`vs_random`
    (ratios at 20%), :obj:`passed` (``{policy: bool}``) — with
    :obj:`layouts`, one such dict per layout —, :obj:`seconds` (time to
    compute every policy and the trace) and :obj:`trace` (summary of the
    evaluated epoch's accesses).
    """
    fractions = [float(f) for f in args.fractions]
    batches = evaluation_batches(train, args.batch_size, args.seed)
    if args.max_batches:
        batches = batches[:args.max_batches]
    print(f'\n## hit ratio vs cache size (one epoch: {len(batches)} batches '
          f'of {args.batch_size} seeds, fanout {args.fanout}, seed '
          f'{args.seed})')

    seconds: Dict[str, float] = {}
    start = time.perf_counter()
    counts = access_counts(topo, batches, args.fanout, seed=args.seed,
                           progress=True)
    seconds['oracle trace (evaluated epoch)'] = time.perf_counter() - start
    total = int(counts.sum())
    touched = int((counts > 0).sum())
    trace = {
        'accesses': total,
        'nodes_per_batch': total / len(batches),
        'touched_share': touched / topo.num_nodes,
        'max_count': int(counts.max()),
    }
    print(f"trace: {total:,} row fetches, {trace['nodes_per_batch']:,.0f} "
          f"nodes per batch; {trace['touched_share']:.1%} of the nodes "
          f"fetched at least once, the hottest in {trace['max_count']} of "
          f"{len(batches)} batches")

    scores: Dict[str, Tensor] = {}
    for policy in POLICIES:
        start = time.perf_counter()
        scores[policy] = hotness_scores(
            policy, topo, train_nodes=train, num_neighbors=args.fanout,
            batch_size=args.batch_size,
            presample_epochs=args.epochs_presample, seed=args.seed + 1,
            progress=True)
        seconds[policy] = time.perf_counter() - start

    results: Dict[str, Any]
    if layouts is None:
        results = _layout_section(counts, scores, fractions)
    else:
        results = {}
        for layout, rows in layouts.items():
            fetched = counts[rows]
            types = topo.node_type_of(rows[fetched > 0]).bincount(
                minlength=len(topo.node_types))
            share = ', '.join(f'{t} {int(c):,}' for t, c in
                              zip(topo.node_types, types.tolist()) if c)
            print(f'\n## features on {layout}: {rows.numel():,} rows, '
                  f'{int(fetched.sum()):,} fetches (rows fetched by type: '
                  f'{share})')
            results[layout] = _layout_section(
                fetched, {n: s[rows] for n, s in scores.items()}, fractions)

    print('\n## time to rank the rows')
    table = Table({'policy': 30, 'seconds': 8})
    for name, value in seconds.items():
        table.row(name, f'{value:.1f}')
    results.update(seconds=seconds, trace=trace)
    return results


def _layout_section(counts: Tensor, scores: Dict[str, Tensor],
                    fractions: List[float]) -> Dict[str, Any]:
    r"""The curves and the verdicts at 20% over the rows :obj:`counts`
    counts the fetches of, ranked by every policy's :obj:`scores` and by
    the oracle; printed."""
    n = counts.numel()
    orders = {name: hot_order(s) for name, s in scores.items()}
    orders['oracle'] = hot_order(counts)
    names = list(orders)
    curves = {name: hit_ratio_curve(counts, order, [f / 100 for f in
                                                     fractions])
              for name, order in orders.items()}
    at_20 = {name: hit_ratio_curve(counts, order, [TARGET_FRACTION])[0]
             for name, order in orders.items()}

    table = Table({'cache %': 8, **{name: max(len(name), 6)
                                    for name in names}})
    for i, f in enumerate(fractions):
        table.row(f'{f:g}', *(f'{curves[name][i]:.3f}' for name in names))

    pct = f'{100 * TARGET_FRACTION:g}%'
    print(f'\n## at {pct} of the rows '
          f'({int(round(TARGET_FRACTION * n)):,} of {n:,})')
    vs_oracle, vs_random, passed = {}, {}, {}
    table = Table({'policy': 17, 'hit ratio': 9, 'x oracle': 8,
                   'x random': 8, 'target': 32})
    for name in POLICIES:
        oracle, rand = at_20['oracle'], at_20['random']
        vs_oracle[name] = at_20[name] / oracle if oracle else float('nan')
        vs_random[name] = at_20[name] / rand if rand else float('nan')
        target = ''
        if name in TARGETS:
            min_oracle, min_random = TARGETS[name]
            ok = vs_oracle[name] >= min_oracle
            target = f'>= {min_oracle:g}x oracle'
            if min_random is not None:
                ok = ok and vs_random[name] >= min_random
                target += f', >= {min_random:g}x random'
            passed[name] = ok
            target = f'{_verdict(ok)} ({target})'
        table.row(name, f'{at_20[name]:.3f}', f'{vs_oracle[name]:.3f}',
                  f'{vs_random[name]:.2f}', target)
    return {
        'fractions': fractions,
        'hit_ratio': curves,
        'at_20': at_20,
        'vs_oracle': vs_oracle,
        'vs_random': vs_random,
        'passed': passed,
    }


def _layouts(topo: HeteroTopology) -> Dict[str, Tensor]:
    r"""The global ids of the rows with features, per feature layout of a
    heterogeneous preset."""
    paper = topo.node_types.index('paper')
    first, last = int(topo.node_offset[paper]), int(
        topo.node_offset[paper + 1])
    return {'papers only': torch.arange(first, last),
            'every type': torch.arange(topo.num_nodes)}


def run(args: argparse.Namespace) -> Dict[str, Any]:
    r"""Runs the benchmark and prints a report; returns ``{'hit_ratio':
    ...}`` with the results of :func:`hit_ratio_section` (and ``'disk'``,
    a homogeneous preset's storage section)."""
    if args.seed < 0:
        raise ValueError(f"'--seed' = {args.seed}: pass a seed >= 0")
    hetero = args.preset in HETERO_PRESETS
    if not hetero and (args.scale != 1.0 or args.max_batches):
        raise ValueError("'--scale' and '--max-batches' apply to the "
                         "heterogeneous presets only")
    print(f"# {'hetero ' if hetero else ''}cache benchmark: "
          f"preset={args.preset}{f' scale={args.scale}' if hetero else ''} "
          f"fanout={args.fanout}{' (every relation)' if hetero else ''} "
          f'batch_size={args.batch_size} seed={args.seed} '
          f'presample_epochs={args.epochs_presample} cpus={cpu_count()} '
          f'torch_threads={torch.get_num_threads()}')
    start = time.perf_counter()
    if hetero:
        data = generate_hetero(args.preset, seed=args.seed, scale=args.scale)
        topo = topology_of(data)
        print(f'graph: {topo.num_nodes:,} nodes of {len(topo.node_types)} '
              f'types, {topo.num_edges:,} edges of {len(topo.edge_types)} '
              f'relations; generated in {time.perf_counter() - start:.1f}s')
        paper = int(topo.node_offset[topo.node_types.index('paper')])
        return {'hit_ratio': hit_ratio_section(
            topo, data['paper'].train_mask.nonzero().view(-1) + paper, args,
            _layouts(topo))}
    graph = load_synthetic(args.preset, root=args.cache_dir)
    topo = graph.topology
    print(f'graph: {topo.num_nodes:,} nodes, {topo.num_edges:,} directed '
          f'edges, {int(graph.train_mask.sum()):,} training nodes; loaded '
          f'in {time.perf_counter() - start:.1f}s')
    stats = degree_stats(topo)
    print(f"degrees: mean {stats['mean_degree']:.1f}, median "
          f"{stats['median_degree']:g}, max {stats['max_degree']:,}; the "
          f"top-20% nodes hold {stats['top20_edge_share']:.1%} of the edges")
    results = {}
    if not args.skip_hit_ratio:
        results['hit_ratio'] = hit_ratio_section(
            topo, graph.train_mask.nonzero().view(-1), args)
    if not args.skip_disk:
        results['disk'] = disk_tier_section(args)
    return results


def main(argv: Optional[List[str]] = None) -> None:
    benchmark_main(__doc__, add_arguments, run, argv)


if __name__ == '__main__':
    main()
