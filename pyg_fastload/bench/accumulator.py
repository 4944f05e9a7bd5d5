r"""GIDS's Fig. 9 on this machine: the storage access accumulator on small
batches. For every batch size, mini-batches (fan-outs ``[5, 5]`` by
default, as in GIDS) are sampled and their features loaded through the
tiers (direct reads behind a host buffer of hot rows), once without the
accumulator and once with it (``read_ahead``: the loader's look-ahead of
sampled batches, announced as the loader announces them). Each side reads
its own batches (seeds drawn without overlap), so no side reads rows the
other just read. Reported per side: the rows read from storage per second
of storage time against this machine's random-read bound (measured first,
as ``bench direct`` does), the feature bytes delivered to the batches per
second of feature loading (GIDS's effective bandwidth, host-buffer rows
included), and the accumulator's merges and model.

Run ``pyg-fastload bench accumulator --dataset DIR`` on a directory written
by ``pyg-fastload prepare --preset papers-like DIR``.
"""
from __future__ import annotations

import argparse
from typing import Any, Dict, List, Optional

import torch

from ..caching import open_dataset
from ..config import POLICIES
from ..io import open_dataset_dir
from ..sampling import FastNeighborSampler
from ..storage import DirectStorage, TieredFeatureStore
from .common import Table, benchmark_main, positive_int
from .direct import read_bound

__all__ = ['add_arguments', 'run', 'main']

MiB = 2**20


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument('--dataset', required=True,
                        help='a dataset directory (pyg-fastload prepare)')
    parser.add_argument('--fanout', type=int, nargs='+', default=[5, 5])
    parser.add_argument('--batch-sizes', type=positive_int, nargs='+',
                        default=[32, 64, 128, 256])
    parser.add_argument('--batches', type=positive_int, default=60,
                        help='mini-batches per batch size and side')
    parser.add_argument('--warmup', type=int, default=5,
                        help='untimed batches first, per batch size and '
                        "side (the accumulator's probe of the device runs "
                        'in the first)')
    parser.add_argument('--read-ahead', type=positive_int, default=8,
                        help='batches sampled ahead: the most batches one '
                        'submission serves')
    parser.add_argument('--share', type=float, default=0.95,
                        help="share of the peak read rate the accumulator "
                        "aims at (GIDS's p)")
    parser.add_argument('--host-fraction', type=float, default=0.10,
                        help='host buffer, a fraction of the rows')
    parser.add_argument('--policy', default='out_degree', choices=POLICIES,
                        help='hotness policy of the host buffer')
    parser.add_argument('--in-flight', type=int, nargs='+',
                        default=[1, 4, 16, 32, 64],
                        help='reads in flight tried for the bound; both '
                        'sides use the best')
    parser.add_argument('--probe-rows', type=positive_int, default=20000,
                        help='random rows per bound read')
    parser.add_argument('--probe-seconds', type=float, default=3.0,
                        help='seconds per reads-in-flight setting')
    parser.add_argument('--target-batch', type=positive_int, default=128,
                        help='the batch size the target is checked at')
    parser.add_argument('--seed', type=int, default=0)


def _replay(features: TieredFeatureStore, batches: List[torch.Tensor],
            depth: int, warmup: int) -> Dict[str, float]:
    r"""Loads :obj:`batches` as the sequential loader does: each batch is
    announced :obj:`depth` batches before it is gathered (none with
    ``depth=0``); the first :obj:`warmup` are not timed or counted."""
    for ids in batches[:depth]:
        features.announce(ids)
    seconds = storage_seconds = 0.0
    for i, ids in enumerate(batches):
        if i == warmup:
            features.reset_counters()
            seconds = storage_seconds = 0.0
        if depth and i + depth < len(batches):
            features.announce(batches[i + depth])
        timings: Dict[str, float] = {}
        features.retire(ids)
        features.gather('x', ids, timings=timings)
        seconds += sum(timings.values())
        storage_seconds += timings.get('storage', 0.0)
    stats = features.stats('x')['x']['storage']
    merges = features.accumulator_stats().get('x', {})
    return {'seconds': seconds, 'storage_seconds': storage_seconds,
            'rows': sum(b.numel() for b in batches[warmup:]),
            'storage_requests': stats['requests'],
            'storage_reads': stats['hits'],
            'merged_batches': merges.get('merged_batches', 0),
            'announced': merges.get('announced', 0),
            'required_reads': merges.get('required_reads', 0),
            'peak_reads_per_s': merges.get('peak_reads_per_s', 0.0),
            'overhead_s': merges.get('overhead_s', 0.0)}


def run(args: argparse.Namespace) -> Dict[str, Any]:
    dataset = open_dataset_dir(args.dataset, verify='size')
    shape = tuple(dataset.meta['arrays']['x']['shape'])
    path = str(dataset.array_path('x'))
    row_bytes = 4 * int(torch.Size(shape[1:]).numel())
    probe = DirectStorage(path, torch.float32, shape)
    bound = read_bound(probe, args.in_flight, args.probe_rows,
                       args.probe_seconds, args.seed)
    print(f"'{args.dataset}': {shape[0]:,} rows x {row_bytes} B; "
          f"random-read bound {bound['best']:,.0f} rows/s, 95% of it from "
          f"{bound['in_flight']} reads in flight (both sides use that)")
    features, _ = open_dataset(args.dataset, storage='direct',
                               reads_in_flight=bound['in_flight'],
                               host_budget=args.host_fraction,
                               policy=args.policy, verify='none')
    sampler = FastNeighborSampler(dataset.topology, args.fanout)
    train = dataset.arrays['train_mask'].nonzero().view(-1)
    gen = torch.Generator().manual_seed(args.seed)
    seeds = train[torch.randperm(train.numel(), generator=gen)]
    need = 2 * (args.warmup + args.batches) * sum(args.batch_sizes)
    if seeds.numel() < need:
        raise ValueError(f"'--batches' = {args.batches}: the sweep needs "
                         f"{need:,} distinct seeds, the dataset has "
                         f"{seeds.numel():,} training nodes; ask for fewer")
    table = Table({'batch': 6, 'accumulator': 11, 'storage rows/batch': 18,
                   'storage rows/s': 14, 'vs bound': 8,
                   'delivered MiB/s': 15, 'merged': 6, 'reads needed': 12})
    results: Dict[int, Dict[str, Dict[str, float]]] = {}
    used = 0
    for size in args.batch_sizes:
        results[size] = {}
        for side, depth in (('off', 0), ('on', args.read_ahead)):
            batches = []
            for _ in range(args.warmup + args.batches):
                batch = seeds[used:used + size]
                used += size
                batches.append(sampler.sample(batch, gen).node)
            features.set_read_ahead(depth, share=args.share)
            result = _replay(features, batches, depth, args.warmup)
            rate = result['storage_reads'] / max(result['storage_seconds'],
                                                 1e-9)
            delivered = result['rows'] * row_bytes / max(result['seconds'],
                                                         1e-9)
            result.update(read_rate=rate, vs_bound=rate / bound['best'],
                          delivered=delivered)
            results[size][side] = result
            table.row(size, side,
                      f"{result['storage_requests'] / args.batches:,.0f}",
                      f"{rate:,.0f}", f"{rate / bound['best']:.0%}",
                      f"{delivered / MiB:,.0f}",
                      f"{result['merged_batches']:,}",
                      f"{result['required_reads']:,}" if depth else '-')
    model = results[args.batch_sizes[-1]]['on']
    print(f"the accumulator's model at the end of the last side (fitted "
          f"from its probe and the submissions it timed; 'reads needed' "
          f"above: at the end of each side): peak "
          f"{model['peak_reads_per_s']:,.0f} reads/s, overhead "
          f"{model['overhead_s'] * 1e3:.2f} ms per submission, so "
          f"{model['required_reads']:,} reads for {args.share:.0%} of the "
          f"peak")
    if args.target_batch in results:
        side = results[args.target_batch]
        share = side['on']['vs_bound']
        print(f"{'met' if share >= 0.8 else 'SHORT'}: at batch "
              f"{args.target_batch} storage rows were read at {share:.0%} "
              f"of the measured bound with the accumulator (target >= "
              f"80%), {side['off']['vs_bound']:.0%} without it")
    for size, side in results.items():
        on, off = side['on'], side['off']
        rate = on['read_rate'] / max(off['read_rate'], 1e-9)
        delivered = on['delivered'] / max(off['delivered'], 1e-9)
        print(f"batch {size}: with / without the accumulator, storage read "
              f"rate {rate:.2f}x, delivered bandwidth {delivered:.2f}x")
    return {'bound': bound, 'results': results}


def main(argv: Optional[List[str]] = None) -> None:
    benchmark_main(__doc__, add_arguments, run, argv)


if __name__ == '__main__':  # pragma: no cover
    main()
