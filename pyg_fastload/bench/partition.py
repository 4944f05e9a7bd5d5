r"""Partition quality per method on one graph, in one run: METIS, PaGraph,
ByteGNN's GNN-P and the hash control (and, with ``--max-memory``, METIS
within that budget: the ``bounded`` row), each partitioned in its own
process (time and peak memory are its own), then measured by
:func:`~pyg_fastload.partition.partition_report`.

Run ``pyg-fastload bench partition`` (``products-like``, 4 parts) or
``python -m pyg_fastload.bench.partition``.
"""
from __future__ import annotations

import argparse
import multiprocessing
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Optional

from ..config import format_bytes
from ..partition import METHODS, partition_dataset, partition_report
from ..partition.bounded import max_memory_type
from .common import Table, add_graph_arguments, benchmark_main, positive_int
from .disk_tier import prepared_dataset_dir

__all__ = ['add_arguments', 'run', 'main', 'check_targets']

#: METIS edge cut at most this share of hash's.
CUT_TARGET = 0.3
#: Training-seed balance (max/mean) at most this, for these methods.
BALANCE_TARGET = 1.05
BALANCED_METHODS = ('metis', 'bounded', 'pagraph', 'bytegnn')
#: METIS micrograph locality at least this many times subgraph locality.
LOCALITY_TARGET = 2.0
#: The bounded row: peak memory at most this many times ``--max-memory``,
#: edge cut at most this many times unbounded METIS's.
BOUNDED_PEAK_TARGET = 1.25
BOUNDED_CUT_TARGET = 1.5


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_graph_arguments(parser)
    parser.set_defaults(fanout=[10, 5, 3])
    parser.add_argument('--num-parts', type=positive_int, default=4)
    parser.add_argument('--num-hops', type=positive_int, default=2)
    parser.add_argument('--methods', nargs='+', choices=METHODS,
                        default=['hash', 'metis', 'pagraph', 'bytegnn'])
    parser.add_argument('--max-memory', metavar='BYTES', type=max_memory_type,
                        default=None,
                        help="add a row 'bounded': METIS within this budget "
                        "(e.g. '2GiB'; pyg-fastload partition --max-memory)")
    parser.add_argument('--out-dir', default=None,
                        help='keep the partitions here (default: a '
                        'temporary directory, removed at the end)')


def _partition(dataset_dir: Path, out: Path, args: argparse.Namespace,
               method: str, max_memory: Optional[int]) -> None:
    ctx = multiprocessing.get_context('spawn')  # a fresh peak-memory mark
    child = ctx.Process(target=partition_dataset, args=(
        dataset_dir, out, args.num_parts, method, args.num_hops, args.seed,
        True, False, max_memory))
    child.start()
    child.join()
    if child.exitcode != 0:
        raise SystemExit(f'pyg-fastload bench partition: partitioning with '
                         f"'{method}' failed (exit code {child.exitcode})")


def check_targets(reports: Dict[str, Dict[str, Any]],
                  max_memory: Optional[int] = None) -> List[str]:
    r"""One line per target of the issues that the reports can decide:
    ``'met: ...'`` or ``'SHORT: ...'`` (the ``bounded`` row's against
    :obj:`max_memory`)."""
    lines = []

    def verdict(ok: bool, text: str) -> None:
        lines.append(f"{'met' if ok else 'SHORT'}: {text}")

    bounded = reports.get('bounded')
    if bounded is not None and max_memory is not None:
        target = BOUNDED_PEAK_TARGET * max_memory
        for key, what in (('partition_peak_rss_bytes', ''),
                          ('assign_peak_rss_bytes', ' while assigning '
                           '(before writing the parts)')):
            peak = bounded.get(key)
            if peak is not None:
                verdict(peak <= target, f'bounded peak memory{what} '
                        f'{format_bytes(peak)} (target <= '
                        f'{format_bytes(target)}, {BOUNDED_PEAK_TARGET}x '
                        f'--max-memory)')
        if 'metis' in reports:
            ratio = bounded['edge_cut'] / reports['metis']['edge_cut']
            verdict(ratio <= BOUNDED_CUT_TARGET, f'bounded edge cut '
                    f"{ratio:.2f}x unbounded METIS's (target <= "
                    f'{BOUNDED_CUT_TARGET}x)')

    if 'metis' in reports and 'hash' in reports:
        ratio = reports['metis']['edge_cut'] / reports['hash']['edge_cut']
        verdict(ratio <= CUT_TARGET, f'METIS edge cut {ratio:.2f}x '
                f"hash's (target <= {CUT_TARGET}x)")
    for method in BALANCED_METHODS:
        if method in reports:
            value = reports[method]['balance'].get('train_mask')
            if value is not None:
                verdict(value <= BALANCE_TARGET, f'{method} train balance '
                        f'max/mean {value:.3f} (target <= {BALANCE_TARGET})')
    for hops, value in reports.get('metis', {}).get('locality', {}).items():
        ratio = value['R_micro'] / max(value['R_sub'], 1e-12)
        verdict(ratio >= LOCALITY_TARGET, f"METIS {hops}: R_micro "
                f"{value['R_micro']:.3f} = {ratio:.2f}x R_sub "
                f"{value['R_sub']:.3f} (target >= {LOCALITY_TARGET}x)")
    ratios = {m: r['requests']['ratio'] for m, r in reports.items()
              if 'requests' in r}
    if 'hash' in ratios and len(ratios) > 1:
        others = {m: v for m, v in ratios.items() if m != 'hash'}
        verdict(all(ratios['hash'] > v for v in others.values()),
                'remote/local requests: hash ' f"{ratios['hash']:.2f} > " +
                ', '.join(f'{m} {v:.2f}' for m, v in others.items()))
    if 'pagraph' in reports:
        lines.append(f"reported: pagraph replicates "
                     f"{reports['pagraph']['replication']:.1%} extra nodes "
                     f"(PaGraph: 2.5-21.5% at 8 parts)")
    return lines


def run(args: argparse.Namespace) -> Dict[str, Dict[str, Any]]:
    dataset_dir = prepared_dataset_dir(args)
    tmp: Optional[tempfile.TemporaryDirectory] = None
    if args.out_dir is None:
        tmp = tempfile.TemporaryDirectory(prefix='bench-partition-')
    root = Path(args.out_dir or tmp.name)
    print(f"{args.preset}: {args.num_parts} parts, {args.num_hops} hops, "
          f"requests sampled with fan-outs {args.fanout}, batch "
          f"{args.batch_size}")
    reports: Dict[str, Dict[str, Any]] = {}
    table = Table({'method': 8, 'seconds': 8, 'peak': 10, 'edge cut': 9,
                   'train': 6, 'val': 6, 'test': 6, 'nodes': 6,
                   'replic.': 8, 'Rmicro/Rsub 2h': 15, '3h': 12,
                   'remote/local': 12, 'load': 6})
    rows = [(method, method, None) for method in args.methods]
    if args.max_memory is not None:
        rows.append(('bounded', 'metis', args.max_memory))
        print(f'bounded: METIS within --max-memory '
              f'{format_bytes(args.max_memory)}')
    try:
        for name, method, max_memory in rows:
            out = root / f'{args.preset}-{args.num_parts}-{name}'
            _partition(dataset_dir, out, args, method, max_memory)
            report = partition_report(out, num_neighbors=args.fanout,
                                      batch_size=args.batch_size,
                                      seed=args.seed, progress=False)
            reports[name] = report
            loc = report.get('locality', {})
            req = report.get('requests')
            bal = report['balance']

            def pair(hops: str) -> str:
                if hops not in loc:
                    return 'n/a'
                return f"{loc[hops]['R_micro']:.2f}/{loc[hops]['R_sub']:.2f}"

            table.row(name, report['partition_seconds'],
                      format_bytes(report['partition_peak_rss_bytes']),
                      'n/a' if 'replication' in report else
                      f"{report['edge_cut']:.3f}",
                      *(f"{bal[k]:.3f}" if k in bal else 'n/a' for k in
                        ('train_mask', 'val_mask', 'test_mask', 'nodes')),
                      f"{report['replication']:.1%}"
                      if 'replication' in report else '-',
                      pair('2 hops'), pair('3 hops'),
                      f"{req['ratio']:.2f}" if req else 'n/a',
                      f"{req['load_balance']:.3f}" if req else 'n/a')
    finally:
        if tmp is not None:
            tmp.cleanup()
    print('balance columns: max/mean over parts; replic.: extra rows over '
          'the graph (pagraph); load: max/mean requests per part')
    print('peak memory while assigning (before writing the parts): ' +
          ', '.join(f"{name} {format_bytes(r['assign_peak_rss_bytes'])}"
                    for name, r in reports.items()
                    if r.get('assign_peak_rss_bytes') is not None))
    for line in check_targets(reports, args.max_memory):
        print(line)
    return reports


def main(argv: Optional[List[str]] = None) -> None:
    benchmark_main(__doc__, add_arguments, run, argv)


if __name__ == '__main__':
    main()
