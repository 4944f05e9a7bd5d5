r"""Every node's output of a trained-shape model (``pyg-fastload bench
inference``): :func:`~pyg_fastload.layerwise_inference` against PyG's
layer-wise pattern, the ``inference`` loop of PyG's ``examples/reddit.py``
(a ``NeighborLoader(num_neighbors=[-1], input_nodes=None)`` of one hop over
every node, each layer computed on each batch's subgraph from the previous
layer's outputs of all nodes), with the same ``GraphSAGE`` (random weights,
seeded, in eval mode), the same chunk of destination nodes per batch, in one
process, one after the other; and, for reference, our sampled prediction
(every node as a seed of ``FastNeighborLoader`` with ``--fanout``, the
model on each batch: what ``predict`` did before ``data.evaluation.method:
layerwise``).
Side ``streamed`` is :func:`~pyg_fastload.layerwise_inference` with
``stream=True`` (each layer's input read in order, once per range of
destinations). With ``--dataset DIR`` the graph is a dataset directory read
through the storage tiers (``--storage``), for graphs larger than memory:
the layer-wise sides only, each layer's outputs in ``--work-dir`` beyond
``--memory-budget``; every side's peak resident memory is printed.

The layer-wise sides compute the same outputs (every in-neighbour); the
largest difference between them is printed. PyG's ``NeighborLoader`` needs
pyg-lib or torch_sparse: without either, its side is skipped, saying so.
"""
from __future__ import annotations

import argparse
import copy
import contextlib
import importlib.util
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Union

import torch
from torch import Tensor
from torch_geometric.loader import NeighborLoader
from torch_geometric.nn import GraphSAGE

from ..caching import open_dataset
from ..config import format_bytes
from ..datasets import PRESETS, load_synthetic
from ..inference import layerwise_inference
from ..io import open_dataset_dir
from ..loader import FastNeighborLoader
from .common import (Table, benchmark_main, peak_rss_bytes, positive_int,
                     reset_peak_rss)

__all__ = ['add_arguments', 'run', 'main']

#: The sides, in the order they run.
SIDES = ('ours', 'streamed', 'pyg', 'sampled')
#: The sides that read a dataset directory through the tiers.
ON_DISK = ('ours', 'streamed')


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument('--preset', default='products-like',
                        choices=sorted(PRESETS),
                        help='synthetic graph (generated once, then cached)')
    parser.add_argument('--layers', type=positive_int, default=3)
    parser.add_argument('--hidden', type=positive_int, default=128)
    parser.add_argument('--batch-size', type=positive_int, default=4096,
                        help='destination nodes per chunk (ours) and per '
                        "batch (PyG's loader, our sampled loader)")
    parser.add_argument('--fanout', type=int, nargs='+', default=[15, 10, 5],
                        help="the sampled side's fan-outs, one per layer")
    parser.add_argument('--sides', nargs='+', choices=SIDES,
                        default=list(SIDES))
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--cache-dir', default=None,
                        help='where synthetic graphs are cached')
    parser.add_argument('--dataset', metavar='DIR', default=None,
                        help='a dataset directory (pyg-fastload prepare) '
                        'instead of --preset: sides ours and streamed')
    parser.add_argument('--storage', choices=('mmap', 'direct'),
                        default='direct',
                        help="--dataset: how its features are read")
    parser.add_argument('--memory-budget', default='auto',
                        help="layer outputs held in memory (layerwise_"
                        "inference's memory_budget: bytes, '8GiB', a "
                        "fraction, or auto)")
    parser.add_argument('--work-dir', default=None,
                        help='where layer outputs beyond the budget go')
    # where run() puts the sides' layer files (in --work-dir, then removed)
    parser.set_defaults(layer_dir=None)


def _model(num_features: int, num_classes: int,
           args: argparse.Namespace) -> torch.nn.Module:
    torch.manual_seed(args.seed)
    return GraphSAGE(num_features, args.hidden, args.layers,
                     out_channels=num_classes).eval()


def _layerwise(stream: bool) -> Callable[..., Tensor]:
    def side(model: torch.nn.Module, data: Any,
             args: argparse.Namespace) -> Tensor:
        work = None if args.layer_dir is None else \
            Path(args.layer_dir) / ('streamed' if stream else 'ours')
        return layerwise_inference(
            model, data, chunk_size=args.batch_size, stream=stream,
            memory_budget=_budget(args.memory_budget), work_dir=work,
            progress=args.dataset is not None)
    return side


def _budget(text: str) -> Union[str, float, int]:
    r"""``--memory-budget`` as ``layerwise_inference`` takes it."""
    try:
        return float(text) if '.' in text else int(text)
    except ValueError:
        return text


def _pyg(model: torch.nn.Module, data: Any,
         args: argparse.Namespace) -> Tensor:
    r"""``examples/reddit.py``'s ``inference``: one hop of every
    in-neighbour per batch, layer by layer over all nodes."""
    graph = copy.copy(data)
    del graph.x, graph.y  # the loop reads the previous layer's rows
    loader = NeighborLoader(graph, input_nodes=None, num_neighbors=[-1],
                            batch_size=args.batch_size, shuffle=False)
    x_all = data.x
    for i, conv in enumerate(model.convs):
        xs = []
        for batch in loader:
            x = conv(x_all[batch.n_id], batch.edge_index)
            if i < len(model.convs) - 1:
                x = x.relu()
            # reddit.py's .cpu() copies the rows off the GPU; on the CPU a
            # view would keep every batch's whole subgraph output alive
            xs.append(x[:batch.batch_size].clone())
        x_all = torch.cat(xs)
    return x_all


def _sampled(model: torch.nn.Module, data: Any,
             args: argparse.Namespace) -> Tensor:
    loader = FastNeighborLoader(data, args.fanout, batch_size=args.batch_size,
                                input_nodes=None)
    out = []
    for batch in loader:
        out.append(model(batch.x, batch.edge_index)[:batch.batch_size])
    return torch.cat(out)


RUNS: Dict[str, Callable[..., Tensor]] = {
    'ours': _layerwise(False), 'streamed': _layerwise(True), 'pyg': _pyg,
    'sampled': _sampled}
LABELS = {'ours': 'layerwise_inference',
          'streamed': 'layerwise_inference(stream=True)',
          'pyg': "PyG's layer-wise loop (examples/reddit.py)",
          'sampled': 'FastNeighborLoader, sampled (reference)'}


def run(args: argparse.Namespace) -> Dict[str, Any]:
    if len(args.fanout) != args.layers:
        raise ValueError(f"'--fanout' gives {len(args.fanout)} fan-outs for "
                         f"{args.layers} layers: give one per layer")
    sides: List[str] = [s for s in SIDES if s in args.sides]
    if 'pyg' in sides and not any(importlib.util.find_spec(name) for name
                                  in ('pyg_lib', 'torch_sparse')):
        print("PyG's side skipped: its NeighborLoader needs pyg-lib or "
              "torch_sparse here (pip install --no-build-isolation "
              "torch_scatter torch_sparse)")
        sides.remove('pyg')
    if args.dataset is not None:
        skipped = [s for s in sides if s not in ON_DISK]
        if skipped:
            print(f"sides {', '.join(skipped)} skipped: they need the graph "
                  f"in memory (--preset)")
        sides = [s for s in sides if s in ON_DISK]
        data = open_dataset(args.dataset, storage=args.storage)
        meta = open_dataset_dir(args.dataset, verify='none')
        name, num_nodes, num_edges = meta.name, meta.num_nodes, \
            meta.num_edges
        model = _model(meta.num_features, meta.num_classes or int(
            meta.arrays['y'].max()) + 1, args)
    else:
        data = load_synthetic(args.preset, root=args.cache_dir).to_data()
        name, num_nodes, num_edges = args.preset, data.num_nodes, \
            data.num_edges
        model = _model(data.num_features, int(data.y.max()) + 1, args)
    print(f'{name}: {num_nodes:,} nodes, {num_edges:,} '
          f'edges; GraphSAGE, {args.layers} layers, hidden {args.hidden}; '
          f'{args.batch_size} nodes per chunk; {torch.get_num_threads()} '
          f'threads')
    with contextlib.ExitStack() as stack:
        if args.work_dir is not None:
            Path(args.work_dir).mkdir(parents=True, exist_ok=True)
            args.layer_dir = stack.enter_context(tempfile.TemporaryDirectory(
                prefix='bench-inference-', dir=args.work_dir))
        return _measure(sides, model, data, args, num_nodes)


def _measure(sides: List[str], model: torch.nn.Module, data: Any,
             args: argparse.Namespace, num_nodes: int) -> Dict[str, Any]:
    table = Table({'side': 42, 'seconds': 8, 'nodes/s': 10,
                   'peak memory': 12})
    seconds: Dict[str, float] = {}
    peaks: Dict[str, int] = {}
    outputs: Dict[str, Tensor] = {}
    with torch.no_grad():
        for side in sides:
            reset_peak_rss()
            start = time.perf_counter()
            outputs[side] = RUNS[side](model, data, args)
            seconds[side] = time.perf_counter() - start
            peaks[side] = peak_rss_bytes()
            table.row(LABELS[side], seconds[side],
                      f'{num_nodes / seconds[side]:,.0f}',
                      format_bytes(peaks[side]))
    result: Dict[str, Any] = {'seconds': seconds, 'peak_rss_bytes': peaks}
    if 'ours' in seconds and 'streamed' in seconds:
        diff = float((outputs['ours'] - outputs['streamed']).abs().max())
        print(f"streamed vs gathered: "
              f"{seconds['ours'] / seconds['streamed']:.2f}x faster; the "
              f"same outputs within {diff:.1e}")
        result.update(streamed_difference=diff)
    if 'ours' in seconds and 'pyg' in seconds:
        diff = float((outputs['ours'] - outputs['pyg']).abs().max())
        ratio = seconds['pyg'] / seconds['ours']
        print(f"layer-wise, ours vs PyG's loop: {ratio:.2f}x (target >= "
              f"2x: {'met' if ratio >= 2 else 'SHORT'}); the same outputs "
              f"within {diff:.1e}")
        result.update(ratio=ratio, max_difference=diff)
    if 'ours' in seconds and 'sampled' in seconds:
        print(f"layer-wise vs sampled prediction: "
              f"{seconds['sampled'] / seconds['ours']:.2f}x")
    return result


def main(argv: Optional[List[str]] = None) -> None:
    benchmark_main(__doc__, add_arguments, run, argv)


if __name__ == '__main__':  # pragma: no cover
    main()
