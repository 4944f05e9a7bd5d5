r"""ByteGNN's Table 3 on our loader: sampling throughput by how batches are
launched onto the sampling pool, with the trainer idle, and what the pool
costs a CPU-bound trainer.

Throughput (``FastNeighborLoader``, pipelined, features of one column so
that the loading stage costs little and sampling sets the pace; steady
state after ``--warmup`` batches, median of ``--rounds`` interleaved
rounds): one sampling thread (``sampling_workers=1``), a pool of 2 and of
all cores with ByteGNN's launch score (``run_ahead='adaptive'``), and the
pool of all cores at fixed concurrency (``run_ahead`` 1, 2, 4 batches in
flight), each against the sequential loader (``pipeline=False``).

Trainer: a CPU-bound step (a matrix product on all cores, about
``--model-ms`` milliseconds) per batch; the seconds per step with batches
sampled beforehand (no stage threads) against those with the sequential
loader and with the loader's threads sampling beside it (one thread and the
pool, ``run_ahead='adaptive'`` and ``'trainer_first'``), and the wall
seconds per step, waits for data included, and the CPU time the loader's
threads ran while the model worked (their per-thread clocks read around
every step: a direct measure, where the step times vary by several percent
from run to run on a shared machine), each the median of ``--rounds``
interleaved rounds. Every loader's threads are stopped before the next
side is timed.
"""
from __future__ import annotations

import argparse
import threading
import time
from typing import Any, Dict, List, Optional, Tuple

import torch
from torch_geometric.data import Data

from ..datasets import load_synthetic
from ..loader import FastNeighborLoader
from ..loader.sampling_pool import SamplingPool
from ..loader.trainer_load import thread_cpu
from ..sampling import FastNeighborSampler
from ..sampling.tasks import CHUNK_NODES
from .common import (
    Table,
    add_graph_arguments,
    benchmark_main,
    cpu_count,
    median,
    stop_iterator,
    time_loader,
)

__all__ = ['add_arguments', 'run', 'main']


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_graph_arguments(parser)
    parser.add_argument('--batches', type=int, default=40,
                        help='mini-batches timed per side and round')
    parser.add_argument('--warmup', type=int, default=5,
                        help='batches drawn untimed first')
    parser.add_argument('--rounds', type=int, default=3,
                        help='interleaved rounds; the median is reported')
    parser.add_argument('--model-ms', type=float, default=50.0,
                        help="the CPU-bound trainer's step, milliseconds")


def _loader(data: Data, args: argparse.Namespace, **kwargs: Any
            ) -> FastNeighborLoader:
    return FastNeighborLoader(
        data, args.fanout, input_nodes=data.train_mask,
        batch_size=args.batch_size, shuffle=True,
        generator=torch.Generator().manual_seed(args.seed), **kwargs)


def _step_size(model_ms: float) -> int:
    r"""The side of the square matrices whose product takes about
    :obj:`model_ms` milliseconds here."""
    size = 256
    while True:
        a = torch.randn(size, size)
        started = time.perf_counter()
        a @ a
        if (time.perf_counter() - started) * 1e3 >= model_ms or size > 8192:
            return size
        size = int(size * 1.25)


def _stage_cpu() -> Dict[int, float]:
    r"""CPU seconds of every live stage thread of the loaders, by ident."""
    out = {}
    for thread in threading.enumerate():
        if thread.name.startswith('pyg_fastload') and thread.ident:
            seconds = thread_cpu(thread.ident)
            if seconds is not None:
                out[thread.ident] = seconds
    return out


def _train(batches: Any, size: int, steps: int
           ) -> Tuple[float, float, float]:
    r"""``(model, wall, stages)``: seconds per step of a CPU-bound model (a
    product of two ``size x size`` matrices) over :obj:`steps` batches,
    wall seconds per step (waits for data included), and CPU seconds per
    step the loader's stage threads ran while the model worked (threads
    alive at both ends of a step)."""
    a = torch.randn(size, size)
    iterator = iter(batches)
    next(iterator)  # untimed: the stages start
    seconds, stages, begun = 0.0, 0.0, time.perf_counter()
    for _ in range(steps):
        next(iterator)
        before = _stage_cpu()
        started = time.perf_counter()
        a @ a
        seconds += time.perf_counter() - started
        after = _stage_cpu()
        stages += sum(after[k] - v for k, v in before.items() if k in after)
    wall = (time.perf_counter() - begun) / steps
    stop_iterator(iterator)  # the next side's trainer runs alone
    return seconds / steps, wall, stages / steps


def _batch_latency(data: Data, args: argparse.Namespace
                   ) -> Dict[str, float]:
    r"""Milliseconds to sample one batch with nothing else in flight, on
    a pool of 2 at width 1 and 2, each hop one draw or split into
    ByteGNN's chunk tasks (median of ``--rounds`` interleaved rounds of
    ``--batches`` batches)."""
    seeds = data.train_mask.nonzero().view(-1)
    seeds = seeds[torch.randperm(seeds.numel(), generator=torch.Generator(
        ).manual_seed(args.seed))]
    count = max(1, min(args.batches, seeds.numel() // args.batch_size))
    samplers = {'one draw per hop': FastNeighborSampler(data, args.fanout),
                'chunk tasks': FastNeighborSampler(data, args.fanout)}
    samplers['one draw per hop'].hop_tasks = False
    times: Dict[str, List[float]] = {}
    pools = {width: SamplingPool(2, 0) for width in (1, 2)}
    try:
        for width, pool in pools.items():
            pool.set_width(width)
        for _ in range(args.rounds):
            for kind, sampler in samplers.items():
                for width, pool in pools.items():
                    started = time.perf_counter()
                    for i in range(count):
                        batch = seeds[i * args.batch_size:
                                      (i + 1) * args.batch_size]
                        pool.submit(i, lambda b=batch, i=i: sampler.sample(
                            b, torch.Generator().manual_seed(i))).result()
                    times.setdefault(f'{kind}, width {width}', []).append(
                        (time.perf_counter() - started) / count * 1e3)
    finally:
        for pool in pools.values():
            pool.close(timeout=5)
    print(f'\none batch at a time on a pool of 2 (ms per batch; ByteGNN\'s '
          f'chunk tasks: {CHUNK_NODES} frontier nodes each)')
    table = Table({'hops drawn as': 28, 'ms/batch': 10})
    out = {name: median(values) for name, values in times.items()}
    for name, value in out.items():
        table.row(name, value)
    gain = out['one draw per hop, width 2'] / out['chunk tasks, width 2']
    print(f'chunk tasks on 2 workers: {gain:.2f}x faster per batch than one '
          f'draw per hop')
    return out


def _trainer(data: Data, args: argparse.Namespace
             ) -> Dict[str, Tuple[float, float]]:
    r"""``side: (model seconds per step, wall seconds per step)`` of the
    CPU-bound trainer: alone, beside the sequential loader and beside the
    pipelined loader's threads."""
    size = _step_size(args.model_ms)
    sides = {'sequential (pipeline=False)': dict(pipeline=False)}
    for run_ahead in ('adaptive', 'trainer_first'):
        for workers in (1, 2):
            name = 'one sampling thread' if workers == 1 else 'pool of 2'
            sides[f'{name}, {run_ahead}'] = dict(
                pipeline=True, sampling_workers=workers,
                run_ahead=run_ahead)
    times: Dict[str, List[Tuple[float, float, float]]] = {'alone': []}
    cores: List[float] = []  # the trainer's cores trainer_first measured
    for _ in range(args.rounds):
        times['alone'].append(_train([None] * (args.batches + 1), size,
                                     args.batches))
        for name, kwargs in sides.items():
            loader = _loader(data, args, **kwargs)
            times.setdefault(name, []).append(
                _train(loader, size, args.batches))
            load = loader._trainer_load
            if load is not None and load.cores_used is not None:
                cores.append(load.cores_used)
    out = {name: tuple(median([t[i] for t in values]) for i in range(3))
           for name, values in times.items()}
    alone = out['alone'][0]
    print(f'\nCPU-bound trainer: a {size}x{size} product per step on all '
          f'cores, {alone * 1e3:.0f} ms with batches sampled beforehand; '
          f'stages: CPU ms the loader\'s threads ran during each step')
    table = Table({'beside': 36, 'model ms/step': 14, 'vs alone': 9,
                   'wall ms/step': 12, 'stages ms/step': 14})
    for name, (model, wall, stages) in out.items():
        table.row(name, model * 1e3, f'{model / alone - 1:+.1%}',
                  wall * 1e3, stages * 1e3)
    print("run_ahead='trainer_first' measured the trainer's step at "
          + (f"{median(cores):.2f} of {cpu_count()} cores (median over its "
             f"runs)" if cores else "no cores (steps too short to measure)"))
    for run_ahead in ('adaptive', 'trainer_first'):
        model, _, stages = out[f'pool of 2, {run_ahead}']
        cost = model / alone - 1
        print(f"{'met' if cost <= 0.05 else 'SHORT'}: the pool of 2 with "
              f"run_ahead={run_ahead!r} slows the trainer's step by "
              f"{cost:+.1%} (target <= +5%); its threads ran "
              f"{stages / model:.1%} of the step's time beside it")
    return out


def run(args: argparse.Namespace) -> Dict[str, Any]:
    cores = cpu_count()
    if cores < 2:
        raise ValueError(f"bench sampling compares a pool of 2 sampling "
                         f"threads with one; this process may use {cores} "
                         f"core")
    graph = load_synthetic(args.preset, root=args.cache_dir).to_data()
    data = Data(edge_index=graph.edge_index, num_nodes=graph.num_nodes,
                x=torch.zeros(graph.num_nodes, 1),
                train_mask=graph.train_mask)
    sides = {'sequential (pipeline=False)': dict(pipeline=False),
             'one sampling thread': dict(pipeline=True),
             'pool of 2, launch score': dict(pipeline=True,
                                             sampling_workers=2)}
    if cores != 2:
        sides[f'pool of {cores}, launch score'] = dict(
            pipeline=True, sampling_workers=cores)
    for ahead in (1, 2, 4):
        sides[f'pool of {cores}, {ahead} in flight'] = dict(
            pipeline=True, sampling_workers=cores, run_ahead=ahead)
    print(f'# sampling pool: preset={args.preset} fanout={args.fanout} '
          f'batch_size={args.batch_size} cores={cores} (features of one '
          f'column: sampling sets the pace)')
    times: Dict[str, List[float]] = {name: [] for name in sides}
    for _ in range(args.rounds):
        for name, kwargs in sides.items():
            _, steady = time_loader(_loader(data, args, **kwargs),
                                    args.warmup, args.batches)
            times[name].append(steady)
    table = Table({'side': 32, 'batches/s': 10, 'vs one thread': 13})
    rate = {n: args.batches / median(t) for n, t in times.items()}
    one = rate['one sampling thread']
    for name in sides:
        table.row(name, rate[name], f'{rate[name] / one:.2f}x')
    pool = rate['pool of 2, launch score'] / one
    print(f"{'met' if pool >= 1.6 else 'SHORT'}: a pool of 2 with the "
          f"launch score samples {pool:.2f}x one sampling thread's batches "
          f"per second, trainer idle (target >= 1.6x)")

    latency = _batch_latency(data, args)

    return {'batches_per_s': rate, 'pool_ratio': pool, 'batch_ms': latency,
            'trainer': _trainer(data, args)}


def main(argv: Optional[List[str]] = None) -> None:
    benchmark_main(__doc__, add_arguments, run, argv)


if __name__ == '__main__':  # pragma: no cover
    main()
