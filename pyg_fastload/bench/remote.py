r"""A 2-rank ``dsp`` epoch with a slowed rank: remote rows and every hop's
frontier sent to its owners by asynchronous requests (``remote='async'``,
each owner serving them between its own batches) against the synchronous
collectives (``'sync'``, every rank in lockstep), the same batches (hashed
and compared).

A rank is slowed by a sleep of ``--delay`` seconds in its feature fetch of
some batches (a bench hook around the store's ``gather``): ``--slow one``
slows rank 1 on every batch, ``--slow alternate`` slows rank 0 on even
batches and rank 1 on odd ones (stragglers that take turns). The ranks run
as two processes on 127.0.0.1 (gloo); each epoch's time is the slower
rank's (the faster rank's is shown beside it: with asynchronous requests
it no longer waits for the slowed one).

Run ``python -m pyg_fastload.bench.remote`` (``arxiv-like``, METIS parts,
cached).
"""
from __future__ import annotations

import argparse
import hashlib
import multiprocessing
import os
import socket
import time
from datetime import timedelta
from pathlib import Path
from typing import Any, Dict, List, Optional

import torch
import torch.distributed as dist

from ..datasets.synthetic_cache import default_cache_root
from ..distributed import Collectives, DistContext
from ..distributed.dsp import open_dsp_rank
from ..distributed.requests import REMOTE_MODES
from ..loader import FastNeighborLoader
from ..partition import partition_dataset
from .common import Table, add_graph_arguments, benchmark_main, positive_int
from .disk_tier import prepared_dataset_dir

__all__ = ['add_arguments', 'run', 'main']

#: Which rank sleeps on which batch, per ``--slow``.
SLOW = ('alternate', 'one')


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_graph_arguments(parser)
    parser.set_defaults(preset='arxiv-like', fanout=[10, 5], batch_size=512)
    parser.add_argument('--batches', type=positive_int, default=40,
                        help='batches per rank and epoch')
    parser.add_argument('--delay', type=float, default=0.05,
                        help='seconds a slowed batch sleeps in its fetch')
    parser.add_argument('--slow', choices=SLOW, default='alternate')
    parser.add_argument('--repeats', type=positive_int, default=2,
                        help='epochs per mode, alternating the modes')


def _slowed(rank: int, batch: int, slow: str) -> bool:
    return batch % 2 == rank if slow == 'alternate' else rank == 1


def _digest(batch: Any) -> str:
    digest = hashlib.sha256()
    for key in ('n_id', 'x', 'edge_index'):
        digest.update(batch[key].contiguous().numpy().tobytes())
    return digest.hexdigest()


def _epoch(parts: Path, remote: str, args: argparse.Namespace,
           rank: int) -> Dict[str, Any]:
    r"""One epoch of this rank: its seconds and its batches' hashes."""
    coll = Collectives(DistContext.current(timedelta(seconds=120)))
    dsp = open_dsp_rank(parts, coll, remote=remote, cold_rows='owner')
    try:
        seeds = dsp.seeds('train')
        count = int(coll.all_gather_ints([seeds.numel()], 'seeds').min())
        seeds = seeds[:min(count, args.batches * args.batch_size)]
        store, calls = dsp.features, [0]
        gather = store.gather

        def throttled(attr_name: str, index: torch.Tensor,
                      *rest: Any, **kwargs: Any) -> torch.Tensor:
            if attr_name == 'x':  # one fetch per batch
                if _slowed(rank, calls[0], args.slow):
                    time.sleep(args.delay)
                calls[0] += 1
            return gather(attr_name, index, *rest, **kwargs)

        store.gather = throttled  # the bench hook
        loader = FastNeighborLoader(
            dsp.data, args.fanout, input_nodes=seeds,
            batch_size=args.batch_size, neighbor_sampler=dsp.sampler(
                args.fanout),
            generator=torch.Generator().manual_seed(args.seed + rank))
        coll.all_reduce(torch.zeros(1), 'start together')
        started = time.perf_counter()
        hashes = [_digest(batch) for batch in loader]
        seconds = time.perf_counter() - started
    finally:
        dsp.close()
    return {'seconds': seconds, 'hashes': hashes}


def _rank(rank: int, port: int, parts: str, args: argparse.Namespace,
          results: Any) -> None:
    os.environ.update(MASTER_ADDR='127.0.0.1', MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group('gloo', rank=rank, world_size=2,
                            timeout=timedelta(seconds=120))
    out: Dict[str, List[Dict[str, Any]]] = {m: [] for m in REMOTE_MODES}
    for _ in range(args.repeats):
        for remote in ('sync', 'async'):
            out[remote].append(_epoch(Path(parts), remote, args, rank))
    results.put((rank, out))
    dist.destroy_process_group()


def run(args: argparse.Namespace) -> Dict[str, Any]:
    dataset = prepared_dataset_dir(args)
    root = Path(args.cache_dir) if args.cache_dir else default_cache_root()
    parts = root / 'partitions' / f'{dataset.name}-metis2'
    if not (parts / 'partition.json').exists():
        partition_dataset(dataset, parts, 2, 'metis', seed=args.seed,
                          overwrite=True, progress=False)
    ctx = multiprocessing.get_context('spawn')
    results = ctx.Queue()
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        port = sock.getsockname()[1]
    procs = [ctx.Process(target=_rank, args=(r, port, str(parts), args,
                                             results)) for r in range(2)]
    for proc in procs:
        proc.start()
    got = dict(results.get(timeout=1800) for _ in procs)
    for proc in procs:
        proc.join(60)
    epochs = {m: [max(got[0][m][i]['seconds'], got[1][m][i]['seconds'])
                  for i in range(args.repeats)] for m in REMOTE_MODES}
    faster = {m: [min(got[0][m][i]['seconds'], got[1][m][i]['seconds'])
                  for i in range(args.repeats)] for m in REMOTE_MODES}
    same = all(got[r]['sync'][i]['hashes'] == got[r]['async'][i]['hashes']
               for r in range(2) for i in range(args.repeats))
    batches = len(got[0]['sync'][0]['hashes'])
    print(f'{args.preset}, 2 METIS parts, {batches} batches of '
          f'{args.batch_size} per rank, fan-outs {args.fanout}, slowed: '
          f'{args.slow}, {args.delay:g} s per slowed batch')
    table = Table({'remote': 8, 'epoch s (slower rank, each run)': 32,
                   'best s': 8, 'faster rank, best s': 20})
    for mode in ('sync', 'async'):
        table.row(mode, ' '.join(f'{s:.2f}' for s in epochs[mode]),
                  f'{min(epochs[mode]):.2f}', f'{min(faster[mode]):.2f}')
    ratio = min(epochs['sync']) / min(epochs['async'])
    print(f'sync / async epoch time: {ratio:.2f}x; batches identical: '
          f'{"yes" if same else "NO"}')
    return {'epochs': epochs, 'faster': faster, 'ratio': ratio,
            'identical': same, 'batches': batches}


def main(argv: Optional[List[str]] = None) -> None:
    benchmark_main(__doc__, add_arguments, run, argv)


if __name__ == '__main__':
    main()
