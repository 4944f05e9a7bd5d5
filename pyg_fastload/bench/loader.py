r"""Loader throughput: PyG's ``NeighborLoader`` (each ``num_workers``
setting) against :class:`~pyg_fastload.FastNeighborLoader` on the same seeds,
interleaved in one process, plus sampling alone, gathering alone and this
machine's memory-copy bandwidth.

Both loaders are timed in steady state: each run starts its iterator (worker
processes or stage threads), draws ``--warmup`` batches untimed, then times
``--batches`` batches; the time to the first batch is reported apart as the
start-up cost. A run's workers are shut down before the next loader is
timed, so they do not take the cores from it. Beside seeds/s each loader's
sampled edges per second (SEPS, the unit Quiver and DGL publish) is
reported: the timed batches' ``edge_index`` columns over their time.

Run ``pyg-fastload bench loader --preset products-like`` or
``python -m pyg_fastload.bench.loader``; on a heterogeneous preset
(``--preset mag-like --fanout 15 10``) the same comparison runs on a
``HeteroData`` (paper seeds, the fan-outs on every relation; no breakdown
section); with ``--task
link`` the link-level loaders are compared
(:mod:`pyg_fastload.bench.link_loader`), with ``--task temporal`` our
temporal loader beside the one without times
(:mod:`pyg_fastload.bench.temporal_loader`).
"""
from __future__ import annotations

import argparse
import importlib.util
import time
import warnings
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

import torch
from torch_geometric.data import Data
from torch_geometric.loader import NeighborLoader
from torch_geometric.sampler import NeighborSampler, NodeSamplerInput

from ..datasets import (
    HETERO_PRESETS,
    degree_stats,
    generate_hetero,
    load_synthetic,
)
from ..loader import FastNeighborLoader
from ..placement import check_device
from ..sampling import FastNeighborSampler
from ..storage.buffer_pool import BufferPool
from .common import (
    Table,
    add_graph_arguments,
    benchmark_main,
    cpu_count,
    median,
    memcpy_bandwidth,
    peak_rss_bytes,
    reset_peak_rss,
    rss_bytes,
    time_loader,
)
from .contention import run_contention
from .link_loader import run_link
from .temporal_loader import run_temporal

__all__ = ['add_arguments', 'run', 'main']

GiB = 2**30


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_graph_arguments(parser, HETERO_PRESETS)
    parser.add_argument('--task', choices=('node', 'link', 'temporal'),
                        default='node',
                        help='node-level loaders, link-level ones (label '
                        'edges with binary negatives, ratio 1), or our '
                        'temporal node loader beside the one without times')
    parser.add_argument('--scale', type=float, default=1.0,
                        help="a heterogeneous preset's node and edge counts "
                        "times this (in (0, 1]; default 1)")
    parser.add_argument('--batches', type=int, default=40,
                        help='mini-batches timed per loader and round')
    parser.add_argument('--warmup', type=int, default=5,
                        help='batches drawn untimed before the timed ones '
                        '(the first one gives the start-up time)')
    parser.add_argument('--rounds', type=int, default=3,
                        help='interleaved rounds; the median is reported')
    parser.add_argument('--contention', type=int, default=0,
                        help='instead: each loader slowed by this many busy '
                        'processes at normal priority (0: no such run)')
    parser.add_argument('--sampling-workers', type=int, default=1,
                        help='also time FastNeighborLoader with this many '
                        'sampling threads (ByteGNN pool; 1: not)')
    parser.add_argument('--pyg-workers', type=int, nargs='*',
                        default=[0, 1, 2],
                        help="num_workers settings tried for PyG's "
                        "NeighborLoader (empty: skip the baseline)")
    parser.add_argument('--sampling-device', default=None,
                        help="also time FastNeighborSampler sampling the "
                        "same seeds on this device ('cuda[:i]': the "
                        "topology copied to the GPU)")


def _load(args: argparse.Namespace) -> Tuple[Any, torch.Tensor, str]:
    r"""The preset's graph (a ``Data`` or, for a heterogeneous preset, a
    ``HeteroData``), described; its training seeds and what they are."""
    start = time.perf_counter()
    if args.preset in HETERO_PRESETS:
        data = generate_hetero(args.preset, seed=args.seed, scale=args.scale)
        nodes = sum(data[t].num_nodes for t in data.node_types)
        edges = sum(data[e].edge_index.size(1) for e in data.edge_types)
        print(f'graph: {nodes:,} nodes of {len(data.node_types)} types, '
              f'{edges:,} edges of {len(data.edge_types)} relations; '
              f'generated in {time.perf_counter() - start:.1f}s')
        return data, data['paper'].train_mask.nonzero().view(-1), 'paper'
    graph = load_synthetic(args.preset, root=args.cache_dir)
    data = graph.to_data()
    print(f'graph: {data.num_nodes:,} nodes, {data.num_edges:,} directed '
          f'edges, {data.x.size(1)} features; loaded in '
          f'{time.perf_counter() - start:.1f}s')
    print(f'topology: {graph.topology.nbytes() / GiB:.2f} GiB (what '
          f"'sampling_device' copies to a GPU)")
    stats = degree_stats(graph.topology)
    print(f"degrees: mean {stats['mean_degree']:.1f}, max "
          f"{stats['max_degree']:,}, top-20% nodes hold "
          f"{stats['top20_edge_share']:.0%} of the edges")
    return data, data.train_mask.nonzero().view(-1), 'training'


def run(args: argparse.Namespace) -> Dict[str, float]:
    r"""Runs the benchmark and prints a report; returns the headline
    figures (seeds/s per loader and ratios)."""
    hetero = args.preset in HETERO_PRESETS
    if args.sampling_device is not None:
        if args.task != 'node' or hetero or args.contention:
            raise ValueError("'--sampling-device' times the node sampler "
                             "on a homogeneous preset, without "
                             "'--contention'")
        check_device(args.sampling_device, 0, '--sampling-device')
    if args.contention:
        if args.task != 'node' or hetero:
            raise ValueError("'--contention' takes the node task on a "
                             "homogeneous preset")
        return run_contention(args)
    if args.task == 'link':
        return run_link(args)
    if args.task == 'temporal':
        return run_temporal(args)
    torch.manual_seed(args.seed)
    print(f"# {'hetero ' if hetero else ''}loader benchmark: "
          f"preset={args.preset}{f' scale={args.scale}' if hetero else ''} "
          f"fanout={args.fanout}{' (every relation)' if hetero else ''} "
          f'batch_size={args.batch_size} batches={args.batches} '
          f'rounds={args.rounds} cpus={cpu_count()} '
          f'torch_threads={torch.get_num_threads()}')
    if args.warmup < 1:
        raise ValueError(f"'--warmup {args.warmup}': the first batch is the "
                         f"start-up measurement, so pass 1 or more")
    data, train, what = _load(args)
    num_batches = args.batches
    needed = (args.warmup + num_batches) * args.batch_size
    gen = torch.Generator().manual_seed(args.seed)
    seeds = train[torch.randperm(train.numel(), generator=gen)][:needed]
    if seeds.numel() < needed:
        raise ValueError(
            f"'--warmup {args.warmup} --batches {args.batches}' need "
            f"{needed} {what} seeds; the graph has {seeds.numel()}: pass "
            f"fewer batches")
    timed_seeds = num_batches * args.batch_size
    kwargs = dict(num_neighbors=args.fanout,
                  input_nodes=('paper', seeds) if hetero else seeds,
                  batch_size=args.batch_size, shuffle=False)

    start = time.perf_counter()
    fast_sampler = FastNeighborSampler(data, args.fanout)
    print(f'{type(fast_sampler).__name__} set-up: '
          f'{time.perf_counter() - start:.1f}s')
    loaders: Dict[str, Callable[[], Iterable]] = {
        'FastNeighborLoader': lambda: FastNeighborLoader(
            data, neighbor_sampler=fast_sampler, pipeline=True, **kwargs),
        'FastNeighborLoader(pipeline=False)': lambda: FastNeighborLoader(
            data, neighbor_sampler=fast_sampler, pipeline=False, **kwargs),
    }
    pool = args.sampling_workers
    if pool > 1:
        loaders[f'FastNeighborLoader(sampling_workers={pool})'] = (
            lambda: FastNeighborLoader(data, neighbor_sampler=fast_sampler,
                                       pipeline=True, sampling_workers=pool,
                                       **kwargs))
    pyg_sampler = None
    if args.pyg_workers:
        backend = next((name for name in ('pyg_lib', 'torch_sparse')
                        if importlib.util.find_spec(name)), None)
        if backend is None:
            print("PyG NeighborLoader skipped: it needs pyg-lib or "
                  "torch_sparse here (pip install --no-build-isolation "
                  "torch_scatter torch_sparse)")
        else:
            print(f"PyG NeighborLoader samples with {backend}")
            start = time.perf_counter()
            with warnings.catch_warnings():  # "pyg-lib is recommended"
                warnings.simplefilter('ignore', UserWarning)
                pyg_sampler = NeighborSampler(data, args.fanout)
            print(f'PyG NeighborSampler set-up: '
                  f'{time.perf_counter() - start:.1f}s')
            for workers in args.pyg_workers:
                loaders[f'PyG NeighborLoader(num_workers={workers})'] = (
                    lambda w=workers: NeighborLoader(
                        data, neighbor_sampler=pyg_sampler, num_workers=w,
                        **kwargs))

    times: Dict[str, List[float]] = {name: [] for name in loaders}
    startups: Dict[str, List[float]] = {name: [] for name in loaders}
    # Sampled edges of the timed batches, per round: SEPS, the unit other
    # systems publish (Quiver, DGL), beside seeds/s.
    edges: Dict[str, List[int]] = {name: [] for name in loaders}
    peak_extra: Optional[int] = None
    for round_ in range(args.rounds):
        for name, make in loaders.items():
            loader = make()
            # Peak memory in the last round, when the memory-mapped graph
            # pages touched by earlier rounds already count as resident.
            track = name == 'FastNeighborLoader' and (round_ == args.rounds
                                                      - 1)
            tracked = track and reset_peak_rss()
            before = rss_bytes() if tracked else 0
            counted = [0]
            startup, steady = time_loader(
                loader, args.warmup, num_batches,
                on_batch=lambda batch: counted.__setitem__(
                    0, counted[0] + sampled_edges(batch)))
            if tracked:
                peak_extra = max(peak_rss_bytes() - before, 0)
            times[name].append(steady)
            startups[name].append(startup)
            edges[name].append(counted[0])

    print(f'\n## end-to-end (sampling + feature gathering), steady state: '
          f'{num_batches} batches after {args.warmup} untimed')
    table = Table({'loader': 42, 'seeds/s': 10, 'edges/s': 10,
                   's/batch': 9, 'start-up s': 10})
    rate = {}
    seps = {}
    for name, values in times.items():
        rate[name] = timed_seeds / median(values)
        seps[name] = median([count / seconds for count, seconds
                             in zip(edges[name], values)])
        table.row(name, rate[name], seps[name], median(values) / num_batches,
                  median(startups[name]))
    print("edges/s: sampled edges per second (SEPS), the timed batches' "
          "edge_index columns over their time, median of the rounds")
    result = {f'{name} startup_s': median(values)
              for name, values in startups.items()}
    result.update({f'{name} s/batch': median(values) / num_batches
                   for name, values in times.items()})
    result.update({f'{name} sampled_edges': counts
                   for name, counts in edges.items()})
    result.update({f'{name} edges/s': value for name, value in seps.items()})
    result.update({'fast_seeds_per_s': rate['FastNeighborLoader'],
              'fast_edges_per_s': seps['FastNeighborLoader'],
              'pipelined_vs_sequential': rate['FastNeighborLoader'] /
              rate['FastNeighborLoader(pipeline=False)']})
    print(f"pipelined / sequential FastNeighborLoader: "
          f"{result['pipelined_vs_sequential']:.2f}x")
    pyg_rates = {k: v for k, v in rate.items() if k.startswith('PyG')}
    if pyg_rates:
        best = max(pyg_rates, key=pyg_rates.get)
        result['pyg_best_seeds_per_s'] = pyg_rates[best]
        result['pyg_best_edges_per_s'] = seps[best]
        result['speedup'] = rate['FastNeighborLoader'] / pyg_rates[best]
        print(f"ratio FastNeighborLoader / best PyG ({best}), steady "
              f"state: {result['speedup']:.2f}x; start-up (time to the "
              f"first batch, paid once per epoch) "
              f"{median(startups['FastNeighborLoader']):.3f}s vs "
              f"{median(startups[best]):.3f}s")
        if pool > 1:
            name = f'FastNeighborLoader(sampling_workers={pool})'
            result['pool_speedup'] = rate[name] / pyg_rates[best]
            print(f"ratio {name} / best PyG: "
                  f"{result['pool_speedup']:.2f}x")
    if peak_extra is not None:
        print(f'FastNeighborLoader peak RSS beyond the loaded graph: '
              f'{peak_extra / 2**20:.0f} MiB (VmHWM after clear_refs)')

    if not hetero:
        result.update(_breakdown(data, seeds, args, fast_sampler,
                                 pyg_sampler))
    return result


def sampled_edges(batch: Any) -> int:
    r"""The edges sampled for :obj:`batch` (a ``Data`` or a
    ``HeteroData``): its ``edge_index`` columns over every relation (PyG's
    and our loaders keep every sampled edge there)."""
    return sum(int(store.edge_index.size(1)) for store in batch.edge_stores)


def _breakdown(data: Data, seeds: torch.Tensor, args: argparse.Namespace,
               fast_sampler: FastNeighborSampler,
               pyg_sampler: Optional[object]) -> Dict[str, float]:
    r"""Sampling alone, gathering alone, and the gather's bandwidth against
    a plain memory copy."""
    batches = seeds.split(args.batch_size)
    gen = torch.Generator().manual_seed(args.seed)
    start = time.perf_counter()
    outs = [fast_sampler.sample(b, gen) for b in batches]
    fast_sample = time.perf_counter() - start
    edges = sum(out.row.numel() for out in outs)
    result = {'fast_sample_s_per_batch': fast_sample / len(batches),
              'cpu_sampled_edges_per_s': edges / fast_sample}
    print('\n## breakdown per batch')
    table = Table({'stage': 42, 'ms/batch': 9, 'seeds/s': 10,
                   'edges/s': 10})
    table.row('FastNeighborSampler.sample', 1e3 * fast_sample / len(batches),
              seeds.numel() / fast_sample, edges / fast_sample)
    if args.sampling_device is not None:
        seconds, device_edges = _sample_on(data, args, batches)
        table.row(f'FastNeighborSampler.sample on {args.sampling_device}',
                  1e3 * seconds / len(batches), seeds.numel() / seconds,
                  device_edges / seconds)
        result['device_sample_s_per_batch'] = seconds / len(batches)
        result['device_sampling_speedup'] = fast_sample / seconds
        result['device_sampled_edges_per_s'] = device_edges / seconds
    if pyg_sampler is not None:
        start = time.perf_counter()
        pyg_outs = [pyg_sampler.sample_from_nodes(
            NodeSamplerInput(input_id=None, node=b)) for b in batches]
        pyg_sample = time.perf_counter() - start
        pyg_edges = sum(out.row.numel() for out in pyg_outs)
        backend = 'pyg-lib' if importlib.util.find_spec('pyg_lib') \
            else 'torch_sparse'
        table.row(f'PyG NeighborSampler ({backend})',
                  1e3 * pyg_sample / len(batches), seeds.numel() / pyg_sample,
                  pyg_edges / pyg_sample)
        result['sampling_speedup'] = pyg_sample / fast_sample
        result['pyg_sampled_edges_per_s'] = pyg_edges / pyg_sample
    x = data.x
    gathered = sum(out.node.numel() for out in outs) * x[0].nbytes
    start = time.perf_counter()
    for out in outs:
        x.index_select(0, out.node)
    fresh = time.perf_counter() - start
    table.row('gather x[n_id], fresh output tensor',
              1e3 * fresh / len(batches), seeds.numel() / fresh)
    pool = BufferPool()
    start = time.perf_counter()
    for out in outs:
        pool.index_select(x, out.node)
    pooled = time.perf_counter() - start
    table.row('gather x[n_id], recycled buffer (ours)',
              1e3 * pooled / len(batches), seeds.numel() / pooled)
    # Putting gathered rows in place, as the tiered store must: a gather
    # (what it does) against a scatter (index_copy_) of the same rows.
    perms = [torch.randperm(out.node.numel(), generator=gen) for out in outs]
    placed = torch.empty((max(p.numel() for p in perms), *x.shape[1:]),
                         dtype=x.dtype)
    timings = {}
    for name, place in (
            ('place rows by gather (index_select)',
             lambda perm, n: torch.index_select(x[:n], 0, perm,
                                                out=placed[:n])),
            ('place rows by scatter (index_copy_)',
             lambda perm, n: placed[:n].index_copy_(0, perm, x[:n]))):
        start = time.perf_counter()
        for perm in perms:
            place(perm, perm.numel())
        timings[name] = time.perf_counter() - start
        table.row(name, 1e3 * timings[name] / len(batches),
                  seeds.numel() / timings[name])
    scatter_vs_gather = (timings['place rows by scatter (index_copy_)']
                         / timings['place rows by gather (index_select)'])
    print(f'placing rows: scatter (index_copy_) takes {scatter_vs_gather:.1f}x '
          f'the time of a gather (index_select)')
    result['scatter_vs_gather'] = scatter_vs_gather
    nodes = sum(out.node.numel() for out in outs) / len(outs)
    bandwidth = memcpy_bandwidth()
    print(f'mean nodes per batch: {nodes:,.0f}; gathered '
          f'{gathered / len(outs) / 2**20:.0f} MiB per batch')
    for name, seconds in (('fresh', fresh), ('recycled', pooled)):
        print(f'gather bandwidth ({name}) {gathered / seconds / GiB:.2f} '
              f'GiB/s vs memcpy {bandwidth / GiB:.2f} GiB/s: '
              f'{gathered / seconds / bandwidth:.0%}')
    result['gather_fraction_of_memcpy'] = gathered / pooled / bandwidth
    return result


def _sample_on(data: Data, args: argparse.Namespace,
               batches: List[torch.Tensor]) -> Tuple[float, int]:
    r"""Seconds to sample :obj:`batches` with the topology on
    ``--sampling-device`` (the copy and one warm-up batch untimed; the
    device synchronised before the clock is read) and the edges
    sampled."""
    device = check_device(args.sampling_device, 0, '--sampling-device')
    sampler = FastNeighborSampler(data, args.fanout, device=device,
                                  batch_size=args.batch_size)
    gen = torch.Generator(device).manual_seed(args.seed)

    def sync() -> None:
        if device.type == 'cuda':
            torch.cuda.synchronize(device)
    sampler.sample(batches[0], gen)
    sync()
    start = time.perf_counter()
    outs = [sampler.sample(b, gen) for b in batches]
    sync()
    return (time.perf_counter() - start,
            sum(out.row.numel() for out in outs))


def main(argv: Optional[List[str]] = None) -> None:
    benchmark_main(__doc__, add_arguments, run, argv)


if __name__ == '__main__':
    main()
