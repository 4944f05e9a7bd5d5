r"""``pyg-fastload partition DATASET_DIR --num-parts K --out PARTS_DIR``."""
from __future__ import annotations

import argparse
import time

import numpy as np

from .methods import METHODS
from .parts import partition_dataset

__all__ = ['add_arguments', 'run']


def add_arguments(parser: argparse.ArgumentParser) -> None:
    r"""Adds the ``pyg-fastload partition`` arguments to :obj:`parser`."""
    parser.add_argument('dataset_dir', metavar='DATASET_DIR',
                        help='a directory written by pyg-fastload prepare')
    parser.add_argument('--num-parts', type=int, required=True,
                        help='number of parts')
    parser.add_argument('--method', choices=METHODS, default='metis')
    parser.add_argument('--num-hops', type=int, default=2,
                        help='the sampling depth the parts are meant for')
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--out', required=True, metavar='PARTS_DIR',
                        help='the partition directory to create')
    parser.add_argument('--overwrite', action='store_true',
                        help='replace PARTS_DIR if it holds a partition')
    parser.add_argument('--no-progress', action='store_true',
                        help='hide the progress bars')


def run(args: argparse.Namespace) -> None:
    r"""Runs ``pyg-fastload partition``; user errors exit with one line."""
    start = time.perf_counter()
    try:
        book = partition_dataset(args.dataset_dir, args.out, args.num_parts,
                                 args.method, args.num_hops, args.seed,
                                 args.overwrite, not args.no_progress)
    except (OSError, ValueError) as exc:  # incl. DatasetFormatError
        raise SystemExit(f'pyg-fastload partition: error: {exc}') from None
    sizes = np.diff(book.offsets.numpy())
    print(f"wrote '{args.out}' in {time.perf_counter() - start:.1f}s: "
          f'{book.num_parts} parts ({args.method}) of '
          f'{book.num_nodes:,} nodes, {sizes.min():,} to {sizes.max():,} '
          f'nodes per part')
