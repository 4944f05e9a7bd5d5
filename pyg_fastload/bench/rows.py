r"""Feature row gathers (``pyg-fastload bench rows``): ``torch.index_select``
against :func:`~pyg_fastload.storage.rows.gather_rows` by row width, both
writing into a preallocated output as the loader's buffers do, on one
thread, ``--rows`` random rows of a ``--nodes`` x width ``float32``
matrix. Rows of 1, 2, 4 or 8 bytes are gathered as one integer each;
wider rows take ``index_select`` on both sides (a ratio near 1)."""
from __future__ import annotations

import argparse
import time
from typing import Callable, Dict, List, Optional

import torch

from ..config import available_memory
from ..storage.rows import gather_rows
from .common import Table, benchmark_main, median, positive_int

__all__ = ['add_arguments', 'run', 'main']


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument('--nodes', type=positive_int, default=2_449_029,
                        help='rows of the matrix (products-like: 2,449,029)')
    parser.add_argument('--rows', type=positive_int, default=450_000,
                        help='rows gathered per call (of the order of a '
                             'products-like batch: `bench loader` prints '
                             'its mean nodes per batch)')
    parser.add_argument('--columns', type=positive_int, nargs='+',
                        default=[1, 2, 4, 8, 100],
                        help='float32 columns per row, one table row each')
    parser.add_argument('--repeats', type=positive_int, default=7,
                        help='timed calls per side; the median is reported')
    parser.add_argument('--seed', type=int, default=0)


def _interleaved_ms(calls: List[Callable[[], object]],
                    repeats: int) -> List[float]:
    r"""Median milliseconds of every call, the calls taking turns (so a
    noisy moment hits both sides)."""
    for call in calls:  # untimed: the output pages are mapped
        call()
    times: List[List[float]] = [[] for _ in calls]
    for _ in range(repeats):
        for call, spent in zip(calls, times):
            started = time.perf_counter()
            call()
            spent.append(time.perf_counter() - started)
    return [median(spent) * 1e3 for spent in times]


def run(args: argparse.Namespace) -> Dict[int, float]:
    r"""Prints one row per width; returns ``index_select / gather_rows``
    (time ratio) by number of columns."""
    needed = 4 * (args.nodes + args.rows) * max(args.columns)
    free = available_memory()
    if free and needed > free // 2:
        raise ValueError(
            f"'--nodes {args.nodes} --rows {args.rows} --columns "
            f"{max(args.columns)}' need {needed / 2**30:.1f} GiB, over half "
            f"of the {free / 2**30:.1f} GiB available: pass fewer nodes, "
            f"rows or columns")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        gen = torch.Generator().manual_seed(args.seed)
        index = torch.randint(0, args.nodes, (args.rows, ), generator=gen)
        print(f'# row gathers: {args.rows:,} random rows of {args.nodes:,}, '
              f'float32, one thread, median of {args.repeats} '
              f'interleaved calls')
        table = Table({'columns': 8, 'row bytes': 10,
                       'index_select ms': 16, 'gather_rows ms': 15,
                       'ratio': 7})
        ratios = {}
        for columns in args.columns:
            value = torch.randn(args.nodes, columns, generator=gen)
            out = torch.empty(args.rows, columns)
            plain, ours = _interleaved_ms([
                lambda: torch.index_select(value, 0, index, out=out),
                lambda: gather_rows(value, index, out=out)], args.repeats)
            ratios[columns] = plain / ours
            table.row(columns, 4 * columns, plain, ours,
                      f'{ratios[columns]:.2f}x')
        return ratios
    finally:
        torch.set_num_threads(threads)


def main(argv: Optional[List[str]] = None) -> None:
    benchmark_main(__doc__, add_arguments, run, argv)


if __name__ == '__main__':  # pragma: no cover
    main()
