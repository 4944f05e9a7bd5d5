r"""Measurement helpers shared by the benchmarks: timers, resident memory and
this machine's memory-copy bandwidth."""
from __future__ import annotations

import argparse
import gc
import statistics
import time
from typing import (Any, Callable, Dict, Iterable, Iterator, List, Optional,
                    Tuple)

import torch

from ..config import usable_cores
from ..datasets import PRESETS
from ..loader.pipeline import EXIT_JOIN_SECONDS
from ..storage.io_stats import process_memory, reset_peak_rss

__all__ = [
    'benchmark_main',
    'add_graph_arguments',
    'positive_int',
    'reset_peak_rss',
    'rss_bytes',
    'peak_rss_bytes',
    'memcpy_bandwidth',
    'median',
    'Table',
    'cpu_count',
    'time_loader',
]


def positive_int(text: str) -> int:
    r"""An argparse type: an int >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f'{text!r} is not an int') from None
    if value < 1:
        raise argparse.ArgumentTypeError(f'{value} must be >= 1')
    return value


def add_graph_arguments(parser: argparse.ArgumentParser,
                        more_presets: Iterable[str] = ()) -> None:
    r"""The options every benchmark shares: which synthetic graph (a
    homogeneous preset, or one of :obj:`more_presets` the benchmark also
    takes), the fan-outs, the batch size, the seed and the cache
    directory."""
    parser.add_argument('--preset', default='products-like',
                        choices=sorted([*PRESETS, *more_presets]),
                        help='synthetic graph to load (generated once, then '
                        'cached)')
    parser.add_argument('--fanout', type=int, nargs='+', default=[15, 10, 5],
                        help='neighbours per hop (default: 15 10 5)')
    parser.add_argument('--batch-size', type=positive_int, default=1024)
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--cache-dir', default=None,
                        help='where synthetic graphs are cached')


def benchmark_main(doc: str,
                   add_arguments: Callable[[argparse.ArgumentParser], None],
                   run: Callable[[argparse.Namespace], Any],
                   argv: Optional[List[str]] = None) -> None:
    r"""``python -m pyg_fastload.bench.<name>``: parse and run."""
    parser = argparse.ArgumentParser(description=doc.split('\n\n')[0])
    add_arguments(parser)
    run(parser.parse_args(argv))


def rss_bytes() -> int:
    r"""Current resident set size of this process (Linux)."""
    return process_memory().get('rss', 0)


def peak_rss_bytes() -> int:
    r"""Peak resident set size since the last :func:`reset_peak_rss`."""
    return process_memory().get('peak', 0)


def memcpy_bandwidth(num_bytes: int = 256 * 2**20, repeats: int = 5) -> float:
    r"""Best-of-:obj:`repeats` bytes/s of a large contiguous tensor copy
    (read + write of :obj:`num_bytes` counted once, as a gather is)."""
    src = torch.ones(num_bytes // 4, dtype=torch.float32)
    dst = torch.empty_like(src)
    dst.copy_(src)  # fault the pages in
    best = float('inf')
    for _ in range(repeats):
        start = time.perf_counter()
        dst.copy_(src)
        best = min(best, time.perf_counter() - start)
    return num_bytes / best


def median(values: List[float]) -> float:
    return statistics.median(values) if values else float('nan')


class Table:
    r"""A fixed-width text table printed row by row."""
    def __init__(self, columns: Dict[str, int]):
        self.columns = columns
        print('  '.join(name.ljust(width) for name, width in columns.items()))

    def row(self, *values: object) -> None:
        cells = []
        for value, width in zip(values, self.columns.values()):
            text = f'{value:.3g}' if isinstance(value, float) else str(value)
            cells.append(text.ljust(width))
        print('  '.join(cells), flush=True)


def cpu_count() -> int:
    return usable_cores()


def time_loader(loader: Iterable, warmup: int, num_batches: int,
                on_batch: Optional[Callable[[Any], None]] = None
                ) -> Tuple[float, float]:
    r"""``(start-up, steady)``: seconds from starting the iterator to its
    first batch, and seconds for :obj:`num_batches` batches drawn after
    :obj:`warmup` untimed ones. :obj:`on_batch`, if given, is called with
    each timed batch (and no untimed one), inside the timing, so it should
    be cheap (e.g. counting the batch's sampled edges). The iterator's
    workers are shut down before returning."""
    iterator = iter(loader)
    start = time.perf_counter()
    next(iterator)
    startup = time.perf_counter() - start
    for _ in range(warmup - 1):
        next(iterator)
    start = time.perf_counter()
    for _ in range(num_batches):
        batch = next(iterator)
        if on_batch is not None:
            on_batch(batch)
    steady = time.perf_counter() - start
    stop_iterator(iterator)
    return startup, steady


def stop_iterator(iterator: Iterator) -> None:
    r"""Shuts down :obj:`iterator`'s workers and waits for them: PyG's
    worker processes, or our pipeline's threads (each finishes the batch
    it is sampling), so the next side timed runs alone."""
    shutdown = getattr(iterator, '_shutdown_workers', None)
    if shutdown is not None:  # PyG's worker processes
        shutdown()
    close = getattr(iterator, 'close', None)
    if close is not None:  # our pipeline's stage threads and pool
        close(timeout=EXIT_JOIN_SECONDS)
    del iterator
    gc.collect()
