r"""Several processes on one machine: ``pyg-fastload fit`` with each mode
(``replicated``, ``pagraph``, ``dsp``, ``hopgnn``) as :obj:`nprocs` torchrun
ranks on loopback, next to one process on the whole dataset, with the same model,
fan-outs, batch size, epochs, seeds and per-rank cache budget on every side.
Reports per mode the epoch time, the steps per rank (asserted equal), the
bytes each rank moved for sampling, features and gradients, the feature
cache hit ratio over all ranks, the rows read from storage, DSP's pushed
vs pull-equivalent sampling bytes, and the validation accuracy (mean and
std over the seeds).

Run ``pyg-fastload bench dist --partitions PARTS_DIR [PARTS_DIR ...]
--nprocs 2`` (one part per rank; ``pagraph`` uses the PaGraph partition,
``dsp`` and ``hopgnn`` a disjoint one; the whole dataset is found through
``partition.json`` or given with ``--dataset``) or
``python -m pyg_fastload.lightning.bench.dist``.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Optional

import yaml

from pyg_fastload.bench.common import Table, benchmark_main, positive_int
from pyg_fastload.config import format_bytes
from pyg_fastload.modes import MODES
from pyg_fastload.partition.part_dirs import read_partition_meta

from ..dist_monitor import DIST_STATS_FILENAME

__all__ = ['add_arguments', 'run', 'main', 'run_fit', 'summarise']

MiB = 2**20
#: The partitioned sides: a mode, or a mode with a variant of its options.
PARTITIONED_SIDES = ('pagraph', 'dsp', 'hopgnn', 'dsp-global',
                     'hopgnn-search', 'dsp-direct')


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument('--partitions', required=True, nargs='+',
                        help="partitions with one part per rank: a PaGraph "
                        "one for 'pagraph', a disjoint one (metis) for 'dsp'")
    parser.add_argument('--dataset', default=None,
                        help="the whole dataset (default: the one "
                        "partition.json names)")
    parser.add_argument('--mode', nargs='+', default=['replicated',
                                                      'pagraph'],
                        choices=['replicated', *PARTITIONED_SIDES],
                        help="'dsp-global': dsp with seeds drawn from the "
                        "whole training set (model-centric training, "
                        "HopGNN's baseline); 'hopgnn-search': hopgnn with "
                        "the merge search; the dsp and hopgnn sides fetch "
                        "every remote row through its owner (traffic "
                        "compared like with like), 'dsp-direct' reads the "
                        "cold ones from the owners' files (the default "
                        "cold_rows: auto)")
    parser.add_argument('--host-budget', default=None,
                        help="every rank's feature cache (e.g. 200MiB; "
                        "policy out_degree); default: none")
    parser.add_argument('--nprocs', type=positive_int, default=2)
    parser.add_argument('--no-single', action='store_true',
                        help='skip the one-process reference')
    parser.add_argument('--epochs', type=positive_int, default=1)
    parser.add_argument('--seeds', type=int, nargs='+', default=[0, 1, 2])
    parser.add_argument('--fanout', type=int, nargs='+', default=[10, 5])
    parser.add_argument('--batch-size', type=positive_int, default=1024)
    parser.add_argument('--hidden', type=positive_int, default=128)
    parser.add_argument('--limit-batches', type=positive_int, default=None,
                        help='training and validation batches per rank per '
                        'epoch (default: all; for graphs whose epoch is '
                        'long)')
    parser.add_argument('--timeout', type=positive_int, default=3600,
                        help='seconds one fit may take')
    parser.add_argument('--out-dir', default=None,
                        help='keep the logs here (default: a temporary '
                        'directory)')


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


def _config(args: argparse.Namespace, log_dir: Path, mode: Optional[str],
            nprocs: int, seed: int, parts: Optional[str]) -> Dict[str, Any]:
    trainer: Dict[str, Any] = {
        'accelerator': 'cpu', 'devices': nprocs, 'max_epochs': args.epochs,
        'enable_progress_bar': False,
        'enable_model_summary': False, 'num_sanity_val_steps': 0,
        'logger': [{'class_path': 'pytorch_lightning.loggers.CSVLogger',
                    'init_args': {'save_dir': str(log_dir), 'name': 'fit'}}],
    }
    if args.limit_batches is not None:
        trainer.update(limit_train_batches=args.limit_batches,
                       limit_val_batches=args.limit_batches)
    if nprocs > 1:
        trainer['strategy'] = {
            'class_path': 'pytorch_lightning.strategies.DDPStrategy',
            'init_args': {'process_group_backend': 'gloo',
                          'timeout': '0:10:00'}}
    data: Dict[str, Any] = {
        # absolute: each fit runs in a directory of its own
        'dataset': _absolute(args.dataset),
        'num_neighbors': list(args.fanout),
        'batch_size': args.batch_size, 'evaluation': {'batch_size': 4096},
        'progress': False, 'seed': seed}
    base, _, variant = (mode or 'replicated').partition('-')
    if MODES[base].partition_method is not None:
        data.update(mode=base, partitions=_absolute(parts))
        options: Dict[str, Any] = {}
        if base in ('dsp', 'hopgnn'):
            options['cold_rows'] = 'auto' if variant == 'direct' \
                else 'owner'
        if variant == 'global':
            options['seeds'] = 'global'
        elif variant == 'search':
            options['merge_search'] = True
        if options:
            data['mode_options'] = options
    if args.host_budget:
        data['feature_cache'] = {'host_budget': args.host_budget,
                                 'policy': 'out_degree'}
    return {'seed_everything': seed, 'trainer': trainer,
            'model': {'model': 'sage', 'hidden_channels': args.hidden,
                      'num_layers': len(args.fanout), 'dropout': 0.3},
            'data': data}


def run_fit(config: Dict[str, Any], workdir: Path, nprocs: int,
            timeout: float) -> Dict[str, Any]:
    r"""Runs ``pyg-fastload fit`` on :obj:`nprocs` torchrun ranks (one
    plain process for 1) and returns ``{'val_acc', 'stats'}``."""
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / 'config.yaml'
    path.write_text(yaml.safe_dump(config))
    command = [sys.executable]
    if nprocs > 1:
        command += ['-m', 'torch.distributed.run', '--nproc_per_node',
                    str(nprocs), '--master_addr', '127.0.0.1',
                    '--master_port', str(_free_port())]
    command += ['-m', 'pyg_fastload', 'fit', '--config', str(path)]
    env = dict(os.environ, OMP_NUM_THREADS=str(max(
        1, len(os.sched_getaffinity(0)) // nprocs)))
    result = subprocess.run(command, cwd=workdir, env=env, text=True,
                            capture_output=True, timeout=timeout)
    if result.returncode != 0:
        raise SystemExit(f'pyg-fastload bench dist: the fit in {workdir} '
                         f'failed:\n{result.stderr[-3000:]}')
    found = re.search(r'validation accuracy: ([0-9.]+)', result.stdout)
    stats = next(iter(workdir.rglob(DIST_STATS_FILENAME)), None)
    if found is None or stats is None:
        raise SystemExit(f'pyg-fastload bench dist: no accuracy or '
                         f'{DIST_STATS_FILENAME} from the fit in {workdir}')
    return {'val_acc': float(found.group(1)),
            'stats': json.loads(stats.read_text())}


def summarise(runs: List[Dict[str, Any]]) -> Dict[str, Any]:
    r"""Mean epoch time and per-rank traffic of the last epoch over
    :obj:`runs`, accuracy mean and std; raises unless every rank of every
    epoch ran the same number of steps."""
    steps, seconds, traffic, cached, stored = set(), [], {}, [], []
    peaks = []
    for run in runs:
        for epoch in run['stats']['epochs']:
            counts = {rank['steps'] for rank in epoch['ranks']}
            if len(counts) != 1:
                raise SystemExit(f'pyg-fastload bench dist: unequal step '
                                 f'counts per rank {sorted(counts)}')
            steps |= counts
        last = run['stats']['epochs'][-1]['ranks']
        seconds.append(max(rank['seconds'] for rank in last))
        for kind in ('sampling', 'features', 'gradients', 'sampling_pull'):
            moved = max(rank[kind]['bytes_sent'] + rank[kind]
                        ['bytes_received'] for rank in last)
            traffic.setdefault(kind, []).append(moved)
        for kind, field in (('sampling', 'bytes_sent'),
                            ('sampling_pull', 'bytes_received'),
                            ('features', 'bytes_received')):
            traffic.setdefault(f'{kind} total', []).append(
                sum(rank[kind][field] for rank in last))
        cached.append(sum(rank['rows_cached'] for rank in last))
        peaks.append(max(rank['peak_rss_bytes'] for rank in last))
        stored.append(sum(rank['rows_stored'] for rank in last))
    accs = [100 * run['val_acc'] for run in runs]
    rows = sum(cached) + sum(stored)
    loads = [run['stats']['epochs'][-1].get('root_load') for run in runs]
    loads = [load for load in loads if load]
    root_load = None
    if loads:
        root_load = {k: statistics.mean(load[k] for load in loads)
                     for k in ('max_over_mean', 'within_10_percent')}
        root_load.update(
            {k: statistics.mean(load['micrographs'][k] for load in loads)
             for k in ('local_hit_rate', 'pregather_rows_saved',
                       'pregather_requests_saved')},
            time_steps=loads[-1]['time_steps'],
            merge_search=loads[-1].get('merge_search'))
    return {'root_load': root_load,
            'steps': sorted(steps), 'epoch_seconds': statistics.mean(seconds),
            'traffic': {k: max(v) for k, v in traffic.items()},
            'hit_ratio': sum(cached) / rows if rows else 0.0,
            'rows_stored': statistics.mean(stored),
            'peak_rss': max(peaks),
            'acc_mean': statistics.mean(accs),
            'acc_std': statistics.stdev(accs) if len(accs) > 1 else 0.0}


def _absolute(path: Any) -> str:
    r""":obj:`path` made absolute if it names an existing file or
    directory (a preset name stays as it is)."""
    return str(Path(path).resolve()) if Path(path).exists() else str(path)


def _partitions(args: argparse.Namespace) -> Dict[str, str]:
    r"""The partition each partitioned mode uses, by method, checked."""
    found: Dict[str, str] = {}
    for path in args.partitions:
        meta = read_partition_meta(path)
        if meta['num_parts'] != args.nprocs:
            raise SystemExit(f"pyg-fastload bench dist: '{path}' has "
                             f"{meta['num_parts']} parts, --nprocs is "
                             f"{args.nprocs}")
        for mode in PARTITIONED_SIDES:
            if MODES[mode.partition('-')[0]].accepts_partition(
                    meta['method']):
                found.setdefault(mode, path)
        if args.dataset is None:
            args.dataset = meta['dataset'].get('path')
    for mode in args.mode:
        method = MODES[mode.partition('-')[0]].partition_method
        if method is not None and mode not in found:
            raise SystemExit(f'pyg-fastload bench dist: mode {mode!r} needs '
                             f'a {method!r} partition in --partitions')
    if args.dataset is None:
        raise SystemExit('pyg-fastload bench dist: pass --dataset (the '
                         'whole dataset the partitions came from)')
    return found


def run(args: argparse.Namespace) -> Dict[str, Dict[str, Any]]:
    parts = _partitions(args)
    tmp = None if args.out_dir else tempfile.TemporaryDirectory()
    # absolute: each fit runs in its own directory
    root = Path(args.out_dir or tmp.name).resolve()
    sides = [] if args.no_single else [('1 process', None, 1)]
    sides += [(mode, mode, args.nprocs) for mode in args.mode]
    print(f"'{args.dataset}': SAGE hidden {args.hidden}, fan-outs "
          f"{args.fanout}, batch {args.batch_size}, {args.epochs} epoch(s), "
          f'seeds {args.seeds}')
    table = Table({'side': 12, 'ranks': 5, 'epoch s': 8, 'steps/rank': 10,
                   'sampling MiB': 12, 'features MiB': 12,
                   'gradients MiB': 13, 'cache hits': 10,
                   'stored rows': 11, 'peak RSS': 9, 'val acc %': 14})
    results: Dict[str, Dict[str, Any]] = {}
    try:
        for name, mode, nprocs in sides:
            runs = [run_fit(_config(args, root / f'{name}-{seed}' / 'logs',
                                    mode, nprocs, seed, parts.get(mode)),
                            root / f'{name}-{seed}', nprocs, args.timeout)
                    for seed in args.seeds]
            summary = summarise(runs)
            results[name] = summary
            table.row(name.replace(' ', '-'), nprocs,
                      summary['epoch_seconds'],
                      '/'.join(map(str, summary['steps'])),
                      *(f"{summary['traffic'][k] / MiB:.3g}" for k in
                        ('sampling', 'features', 'gradients')),
                      f"{summary['hit_ratio']:.3f}",
                      f"{summary['rows_stored']:,.0f}",
                      format_bytes(summary['peak_rss']),
                      f"{summary['acc_mean']:.2f} ± {summary['acc_std']:.2f}")
    finally:
        if tmp is not None:
            tmp.cleanup()
    print('traffic: bytes sent + received by the busiest rank in the last '
          'epoch; epoch s: the slowest rank, mean over the seeds; cache '
          'hits: share of feature rows served by a cache, over all ranks; '
          'stored rows: rows read from storage per epoch, all ranks; '
          "peak RSS: the largest rank's resident high-water mark")
    for name in ('hopgnn', 'hopgnn-search'):
        load = results.get(name, {}).get('root_load')
        if not load:
            continue
        print(f"reported: {name} roots per rank per iteration, max/mean "
              f"{load['max_over_mean']:.3f} on average, within 10% in "
              f"{load['within_10_percent']:.1%} of the iterations (HopGNN: "
              f"97.3% on 4 servers); local hit rate "
              f"{load['local_hit_rate']:.1%} of the micrographs' rows "
              f"(HopGNN on IT: 24.4% -> 92.3%); pre-gathering fetched "
              f"{load['pregather_rows_saved']:.2f}x fewer remote rows and "
              f"{load['pregather_requests_saved']:.2f}x fewer requests "
              f"than fetching per time step (HopGNN: 1.9x fewer requests); "
              f"{load['time_steps']} time steps per iteration at the end")
        if load['merge_search']:
            print(f"reported: {name}'s examination period: " + ', '.join(
                f"{h['time_steps']} steps {h['seconds']:.1f} s"
                for h in load['merge_search']))
    for base in ('dsp', 'dsp-global'):
        if 'hopgnn' in results and base in results:
            ratio = results['hopgnn']['traffic']['features total'] / max(
                results[base]['traffic']['features total'], 1)
            print(f"{'met' if ratio <= 0.4 else 'SHORT'}: hopgnn's remote "
                  f"feature bytes per epoch (all ranks) are {ratio:.2f}x "
                  f"{base}'s (target <= 0.4x, both without a feature cache)")
    if 'dsp' in results:
        moved = results['dsp']['traffic']  # all ranks, each byte once
        ratio = moved['sampling total'] / max(moved['sampling_pull total'],
                                              1)
        print(f"{'met' if ratio <= 0.3 else 'SHORT'}: dsp's collective "
              f"sampling moved {ratio:.2f}x the bytes pulling the adjacency "
              f"lists would have (target <= 0.3x)")
        if 'replicated' in results and results['replicated']['hit_ratio']:
            gain = results['dsp']['hit_ratio'] / \
                results['replicated']['hit_ratio']
            print(f"{'met' if gain >= 1.5 else 'SHORT'}: dsp's partitioned "
                  f"cache hit ratio is {gain:.2f}x replicated's at the same "
                  f"per-rank budget (target >= 1.5x)")
    if 'dsp' in results and 'dsp-direct' in results:
        owner = results['dsp']['epoch_seconds']
        direct = results['dsp-direct']['epoch_seconds']
        print(f"reported: dsp's epoch with the cold rows read from the "
              f"owners' files {direct:.2f} s vs {owner:.2f} s through the "
              f"owners ({owner / max(direct, 1e-9):.2f}x)")
    if 'pagraph' in results:
        moved = results['pagraph']['traffic']
        ok = moved['sampling'] == 0 and moved['features'] == 0
        print(f"{'met' if ok else 'SHORT'}: pagraph moves "
              f"{moved['sampling'] + moved['features']} sampling and feature "
              f'bytes between ranks (target 0: gradients only)')
    print('met: equal step counts on every rank in every mode')
    return results


def main(argv: Optional[List[str]] = None) -> None:
    benchmark_main(__doc__, add_arguments, run, argv)


if __name__ == '__main__':
    main()
