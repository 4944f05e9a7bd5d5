r"""``pyg-fastload partition DATASET_DIR --num-parts K --out PARTS_DIR`` and
``pyg-fastload partition --report PARTS_DIR``."""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from ..errors import UsageExit
from ..io.staging import TargetExistsError
from .bounded import max_memory_type
from .methods import METHODS
from .pagraph_link import TASK_HOPS
from .part_dirs import FEATURES, partition_dataset, read_partition_meta
from .report import format_report, partition_report

__all__ = ['add_arguments', 'run']


def add_arguments(parser: argparse.ArgumentParser) -> None:
    r"""Adds the ``pyg-fastload partition`` arguments to :obj:`parser`."""
    parser.add_argument('dataset_dir', metavar='DATASET_DIR', nargs='?',
                        help='a directory written by pyg-fastload prepare '
                        '(homogeneous or heterogeneous)')
    parser.add_argument('--report', metavar='PARTS_DIR', default=None,
                        help='measure an existing partition instead (also '
                        'written to PARTS_DIR/report.json)')
    parser.add_argument('--num-parts', type=int, default=None,
                        help='number of parts')
    parser.add_argument('--method', choices=METHODS, default='metis')
    parser.add_argument('--num-hops', type=int, default=2,
                        help='the sampling depth the parts are meant for')
    parser.add_argument('--task', choices=list(TASK_HOPS), default='node',
                        help="--method pagraph: what the self-reliant parts "
                        "serve: node (the L-hop neighbourhoods of the "
                        "training nodes) or link (every node's (L+1)-hop "
                        "one, for mode pagraph with task link)")
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--max-memory', metavar='BYTES', type=max_memory_type,
                        default=None,
                        help="--method metis: the most memory to use (e.g. "
                        "'2GiB', '500MB'); where METIS's working set on the "
                        "graph would exceed it, the graph is coarsened out "
                        "of core first (default: no bound)")
    parser.add_argument('--features', choices=FEATURES, default='copy',
                        help="copy: every part holds its nodes' feature "
                        "rows; source: the parts keep the dataset's row ids "
                        "instead and ranks read the rows from DATASET_DIR, "
                        "which must then stay in place (one machine, or a "
                        "file system every machine sees; homogeneous "
                        "datasets)")
    parser.add_argument('--out', metavar='PARTS_DIR', default=None,
                        help='the partition directory to create')
    parser.add_argument('--overwrite', action='store_true',
                        help='replace the partition in PARTS_DIR (the files '
                        'its partition.json lists; other files are kept)')
    parser.add_argument('--fanout', type=int, nargs='+', default=[10, 5, 3],
                        help='--report: fan-outs of the request count')
    parser.add_argument('--batch-size', type=int, default=1024,
                        help='--report: seeds per sampled batch')
    parser.add_argument('--no-locality', action='store_true',
                        help='--report: edge cut and balance only (no '
                        'micrograph locality nor request counts, which '
                        'sample the whole graph read back from the parts)')
    parser.add_argument('--no-progress', action='store_true',
                        help='hide the progress bars')


#: The share of the graph one part may hold before ``partition`` warns.
REPLICATION_WARNING = 0.5


def run(args: argparse.Namespace) -> None:
    r"""Runs ``pyg-fastload partition``; user errors exit with one line."""
    if args.report is not None:
        try:
            print(format_report(partition_report(
                args.report, locality=not args.no_locality,
                num_neighbors=args.fanout,
                batch_size=args.batch_size, seed=args.seed,
                progress=not args.no_progress)))
        except (OSError, ValueError) as exc:
            raise UsageExit('partition', str(exc)) from None
        return
    missing = [flag for flag, value in (('DATASET_DIR', args.dataset_dir),
                                        ('--num-parts', args.num_parts),
                                        ('--out', args.out)) if value is None]
    if missing:
        raise UsageExit('partition', f"{', '.join(missing)} needed (or "
                                     f"--report PARTS_DIR)")
    start = time.perf_counter()
    try:
        book = partition_dataset(args.dataset_dir, args.out, args.num_parts,
                                 args.method, args.num_hops, args.seed,
                                 args.overwrite, not args.no_progress,
                                 args.max_memory, args.features, args.task)
    except TargetExistsError as exc:
        raise UsageExit('partition', str(exc.naming('--overwrite'))) \
            from None
    except (OSError, ValueError) as exc:  # incl. DatasetFormatError
        raise UsageExit('partition', str(exc)) from None
    if book.hetero:
        sizes = np.diff(book.offsets.numpy(), axis=1)
        print(f"wrote '{args.out}' in {time.perf_counter() - start:.1f}s: "
              f'{book.num_parts} parts ({args.method}) of a heterogeneous '
              f'graph; nodes per part: ' + ', '.join(
                  f'{t} {row.min():,} to {row.max():,}'
                  for t, row in zip(book.node_types, sizes)))
    else:
        sizes = np.diff(book.offsets.numpy())
        print(f"wrote '{args.out}' in {time.perf_counter() - start:.1f}s: "
              f'{book.num_parts} parts ({args.method}) of '
              f'{book.num_nodes:,} nodes, {sizes.min():,} to '
              f'{sizes.max():,} nodes per part')
    held = read_partition_meta(args.out).get('held_nodes', [])
    if sum(held) > book.num_ids:  # (nodes of every type)
        share = max(held) / max(book.num_ids, 1)
        print(f'replicas: the parts hold {sum(held) / book.num_ids:.2f}x '
              f"the graph's nodes, up to {share:.1%} of them in one part")
        if share > REPLICATION_WARNING:
            print(f"pyg-fastload partition: warning: a part holds "
                  f"{share:.1%} of the graph: PaGraph's self-reliant parts "
                  f"pay off when each part's "
                  f"{args.num_hops + TASK_HOPS[args.task]}-hop "
                  f"neighbourhood is small; on this graph fewer hops "
                  f"(--num-hops) or a mode that shares one copy (dsp, "
                  f"hopgnn) fits better", file=sys.stderr)
