r"""Training throughput: the same plain PyTorch training loop (GraphSAGE)
fed by PyG's ``NeighborLoader`` (each ``num_workers``) and by
:class:`~pyg_fastload.FastNeighborLoader` (pipelined and sequential, features
in memory and on disk), interleaved in one process.

With ``--device cuda`` the model trains on the GPU: our loaders return
batches there (their transfer stage), PyG's batches are moved by the loop
with ``batch.to(device)`` as PyG's examples do, and ``--sampling-device
cuda`` adds our loader sampling on the GPU. For every loader the loop
measures the same "waiting": the time from asking for a batch to holding it
on the model's device, while each step ends with the loss read back (so the
device finished it): the share of the loop the model waited for data.

Run ``pyg-fastload bench train --preset products-like`` or
``python -m pyg_fastload.bench.train``.
"""
from __future__ import annotations

import argparse
import copy
import importlib.util
import time
import warnings
from typing import Callable, Dict, Iterable, List, Optional, Tuple

import torch
import torch.nn.functional as F
from torch_geometric.loader import NeighborLoader
from torch_geometric.sampler import NeighborSampler
from torch_geometric.nn import GraphSAGE

from ..caching import loader_scores, open_dataset
from ..datasets import load_synthetic
from ..loader import FastNeighborLoader
from ..placement import check_device
from .common import (
    Table,
    add_graph_arguments,
    benchmark_main,
    cpu_count,
    median,
    stop_iterator,
)
from .disk_tier import prepared_dataset_dir

__all__ = ['add_arguments', 'run', 'main']


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_graph_arguments(parser)
    parser.add_argument('--hidden', type=int, default=256)
    parser.add_argument('--batches', type=int, default=20,
                        help='training steps timed per loader and round')
    parser.add_argument('--rounds', type=int, default=1)
    parser.add_argument('--pyg-workers', type=int, nargs='*',
                        default=[0, 1, 2],
                        help="num_workers tried for PyG's NeighborLoader")
    parser.add_argument('--trim', action='store_true',
                        help='also train with trim_to_layer on '
                        "FastNeighborLoader's batches (PyG's torch_sparse "
                        'batches lack num_sampled_nodes)')
    parser.add_argument('--disk', action='store_true',
                        help='also train with features on disk (host 10%% + '
                        'window-buffered device cache 30%%)')
    parser.add_argument('--device', default='cpu',
                        help="where the model trains: 'cpu' or 'cuda[:i]'")
    parser.add_argument('--sampling-device', default=None,
                        help="also train from FastNeighborLoader sampling on "
                        "this device ('cuda[:i]', with --device there)")


def _train(model: torch.nn.Module, loader: Iterable, num_batches: int,
           device: torch.device, trim: bool = False,
           lr: float = 1e-3) -> Tuple[float, float, float]:
    r"""Seconds for :obj:`num_batches` training steps, the mean loss and
    the seconds spent waiting for batches (asking the loader for one and
    moving it to :obj:`device`); with :obj:`trim`, every layer computes only
    the nodes later layers still need (PyG's ``trim_to_layer``, which needs
    ``num_sampled_nodes``/``_edges``)."""
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    losses = []
    waiting = 0.0
    batches = iter(loader)
    start = time.perf_counter()
    for _ in range(num_batches):
        asked = time.perf_counter()
        batch = next(batches, None)
        if batch is None:
            break
        batch = batch.to(device)  # ours are there already: a no-op
        waiting += time.perf_counter() - asked
        optimizer.zero_grad()
        hops = {}
        if trim:
            hops = dict(num_sampled_nodes_per_hop=batch.num_sampled_nodes,
                        num_sampled_edges_per_hop=batch.num_sampled_edges)
        out = model(batch.x, batch.edge_index, **hops)[:batch.batch_size]
        loss = F.cross_entropy(out, batch.y[:batch.batch_size])
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))  # waits for the device's step
    seconds = time.perf_counter() - start
    stop_iterator(batches)
    return seconds, sum(losses) / max(len(losses), 1), waiting


def _devices(args: argparse.Namespace
             ) -> Tuple[torch.device, Optional[torch.device]]:
    r"""The model's device and the sampling device, checked."""
    device = check_device(args.device, 0, '--device') or torch.device('cpu')
    on_gpu = str(args.sampling_device).startswith('cuda')
    if on_gpu and device.type != 'cuda':
        raise ValueError(f"'--sampling-device {args.sampling_device}' "
                         f"returns batches there: pass '--device "
                         f"{args.sampling_device}' too")
    sampling = check_device(args.sampling_device, 0, '--sampling-device')
    if on_gpu and sampling != device:
        raise ValueError(f"'--sampling-device {sampling}' and '--device "
                         f"{device}' differ: sample where the model trains")
    return device, sampling


def run(args: argparse.Namespace) -> Dict[str, float]:
    device, sampling_device = _devices(args)
    torch.manual_seed(args.seed)
    print(f'# train benchmark: preset={args.preset} fanout={args.fanout} '
          f'batch_size={args.batch_size} hidden={args.hidden} '
          f'batches={args.batches} device={device} '
          f'sampling_device={sampling_device or "cpu"} cpus={cpu_count()} '
          f'torch_threads={torch.get_num_threads()}')
    if device.type == 'cuda':
        print(f'GPU: {torch.cuda.get_device_name(device)}')
    graph = load_synthetic(args.preset, root=args.cache_dir)
    data = graph.to_data()
    train = data.train_mask.nonzero().view(-1)
    gen = torch.Generator().manual_seed(args.seed)
    seeds = train[torch.randperm(train.numel(), generator=gen)]
    seeds = seeds[:args.batches * args.batch_size]
    kwargs = dict(num_neighbors=args.fanout, input_nodes=seeds,
                  batch_size=args.batch_size, shuffle=False)
    num_classes = int(data.y.max()) + 1
    initial = GraphSAGE(data.num_features, args.hidden,
                        num_layers=len(args.fanout), out_channels=num_classes)
    fast: Dict[str, FastNeighborLoader] = {}

    def fast_loader(name: str, source, **extra) -> Callable[[], Iterable]:
        def make() -> Iterable:
            # The same random stream for every FastNeighborLoader: the same
            # batches, so the same losses (checked by the tests).
            fast[name] = FastNeighborLoader(
                source, **kwargs, **extra,
                device=device,
                generator=torch.Generator().manual_seed(args.seed))
            return fast[name]
        return make

    loaders: Dict[str, Callable[[], Iterable]] = {
        'FastNeighborLoader': fast_loader('FastNeighborLoader', data,
                                          pipeline=True),
        'FastNeighborLoader(pipeline=False)': fast_loader(
            'FastNeighborLoader(pipeline=False)', data, pipeline=False),
    }
    if sampling_device is not None:
        name = f'FastNeighborLoader, sampled on {sampling_device.type}'
        loaders[name] = fast_loader(name, data, pipeline=True,
                                    sampling_device=sampling_device)
    trimmed = 'FastNeighborLoader + trim_to_layer'
    if args.trim:
        loaders[trimmed] = fast_loader(trimmed, data, pipeline=False)
    if args.disk:
        stores = open_dataset(prepared_dataset_dir(args), host_budget=0.1,
                              device_budget=0.3, device_cache='window',
                              device=device,
                              scores=loader_scores(progress=False))
        loaders['FastNeighborLoader, features on disk'] = fast_loader(
            'FastNeighborLoader, features on disk', stores, pipeline=True)
    if args.pyg_workers and importlib.util.find_spec('torch_sparse'):
        with warnings.catch_warnings():
            warnings.simplefilter('ignore', UserWarning)
            pyg_sampler = NeighborSampler(data, args.fanout)
        for workers in args.pyg_workers:
            loaders[f'PyG NeighborLoader(num_workers={workers})'] = (
                lambda w=workers: NeighborLoader(
                    data, neighbor_sampler=pyg_sampler, num_workers=w,
                    **kwargs))
    elif args.pyg_workers:
        print("PyG NeighborLoader skipped: it needs torch_sparse here")

    times: Dict[str, List[float]] = {name: [] for name in loaders}
    waits: Dict[str, List[float]] = {name: [] for name in loaders}
    losses: Dict[str, float] = {}
    breakdowns: Dict[str, Dict[str, float]] = {}
    for _ in range(args.rounds):
        for name, make in loaders.items():
            model = copy.deepcopy(initial).to(device)
            seconds, losses[name], waited = _train(
                model, make(), args.batches, device, trim=name == trimmed)
            times[name].append(seconds)
            waits[name].append(waited / seconds)
            if name in fast:
                breakdowns[name] = dict(fast[name].time_breakdown)

    print('\n## training steps (sampling + features + forward/backward)')
    table = Table({'loader': 40, 's/step': 8, 'seeds/s': 9, 'waiting': 8})
    rate = {}
    for name, values in times.items():
        rate[name] = seeds.numel() / median(values)
        table.row(name, median(values) / args.batches, rate[name],
                  f'{median(waits[name]):.1%}')
    print('"waiting": the share of the loop between asking for a batch and '
          'holding it on the model\'s device (the model idle).')
    result = {'pipelined_vs_sequential': rate['FastNeighborLoader'] /
              rate['FastNeighborLoader(pipeline=False)']}
    result.update({f'{name} loss': loss for name, loss in losses.items()})
    result.update({f'{name} waiting_share': median(values)
                   for name, values in waits.items()})
    pyg = {k: v for k, v in rate.items() if k.startswith('PyG')}
    if pyg:
        best = max(pyg, key=pyg.get)
        result['speedup'] = rate['FastNeighborLoader'] / pyg[best]
        print(f"ratio FastNeighborLoader / best PyG ({best}): "
              f"{result['speedup']:.2f}x (target >= 2x)")
    print(f"pipelined / sequential FastNeighborLoader: "
          f"{result['pipelined_vs_sequential']:.2f}x")
    if args.trim and pyg:
        result['trimmed_speedup'] = rate[trimmed] / pyg[best]
        print(f"ratio FastNeighborLoader + trim_to_layer / best PyG (no "
              f"trimming possible): {result['trimmed_speedup']:.2f}x")

    print('\n## where the time went (last round)')
    table = Table({'loader': 40, 'epoch': 7, 'model': 7, 'waiting': 8,
                   'sampling': 9, 'loading': 8, 'transfer': 9, 'hidden': 7})
    for name, b in breakdowns.items():
        busy = b['sampling'] + b['feature_loading'] + b['transfer']
        hidden = 1 - b['waiting'] / busy if busy else 0.0
        table.row(name, b['epoch'], b['model'], b['waiting'], b['sampling'],
                  b['feature_loading'], b['transfer'],
                  f'{max(hidden, 0):.0%}')
        result[f'{name} starved'] = b['waiting'] / max(b['epoch'], 1e-9)
        result[f'{name} hidden'] = max(hidden, 0)
        result[f'{name} transfer_s'] = b['transfer']
    print('"hidden": the share of sampling + loading + transfer time the '
          'trainer did not wait for; "waiting": the trainer starved for '
          'data; "transfer": starting the copies to the GPU (host time; 0 '
          'on the CPU).')
    if args.disk:  # every round's requests, the first epoch's too
        tiers = stores[0].stats('x')['x']
        for tier in ('device', 'host'):
            result[f'FastNeighborLoader, features on disk {tier}_hit_ratio'
                   ] = tiers[tier]['hit_ratio']
        print(f"features on disk: the device cache served "
              f"{tiers['device']['hit_ratio']:.1%} of the rows asked of it, "
              f"the host buffer {tiers['host']['hit_ratio']:.1%} of the rest")
    print(f"FastNeighborLoader: the model waited for data "
          f"{result['FastNeighborLoader waiting_share']:.1%} of the loop "
          f"(target < 10% on a GPU)")
    return result


def main(argv: Optional[List[str]] = None) -> None:
    benchmark_main(__doc__, add_arguments, run, argv)


if __name__ == '__main__':
    main()
