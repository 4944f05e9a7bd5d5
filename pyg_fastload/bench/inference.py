r"""Every node's output of a trained-shape model (``pyg-fastload bench
inference``): :func:`~pyg_fastload.layerwise_inference` against PyG's
layer-wise pattern, the ``inference`` loop of PyG's ``examples/reddit.py``
(a ``NeighborLoader(num_neighbors=[-1], input_nodes=None)`` of one hop over
every node, each layer computed on each batch's subgraph from the previous
layer's outputs of all nodes), with the same ``GraphSAGE`` (random weights,
seeded, in eval mode), the same chunk of destination nodes per batch, in one
process, one after the other; and, for reference, our sampled prediction
(every node as a seed of ``FastNeighborLoader`` with ``--fanout``, the
model on each batch: what ``predict`` did before ``data.eval: layerwise``).

The layer-wise sides compute the same outputs (every in-neighbour); the
largest difference between them is printed. PyG's ``NeighborLoader`` needs
pyg-lib or torch_sparse: without either, its side is skipped, saying so.
"""
from __future__ import annotations

import argparse
import copy
import importlib.util
import time
from typing import Any, Callable, Dict, List, Optional

import torch
from torch import Tensor

from ..datasets import load_synthetic
from ..inference import layerwise_inference
from ..loader import FastNeighborLoader
from .common import Table, benchmark_main, positive_int

__all__ = ['add_arguments', 'run', 'main']

#: The sides, in the order they run.
SIDES = ('ours', 'pyg', 'sampled')


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ..datasets import PRESETS
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


def _model(data: Any, args: argparse.Namespace) -> torch.nn.Module:
    from torch_geometric.nn import GraphSAGE
    torch.manual_seed(args.seed)
    out = int(data.y.max()) + 1
    return GraphSAGE(data.num_features, args.hidden, args.layers,
                     out_channels=out).eval()


def _ours(model: torch.nn.Module, data: Any,
          args: argparse.Namespace) -> Tensor:
    return layerwise_inference(model, data, chunk_size=args.batch_size,
                               progress=False)


def _pyg(model: torch.nn.Module, data: Any,
         args: argparse.Namespace) -> Tensor:
    r"""``examples/reddit.py``'s ``inference``: one hop of every
    in-neighbour per batch, layer by layer over all nodes."""
    from torch_geometric.loader import NeighborLoader
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
    'ours': _ours, 'pyg': _pyg, 'sampled': _sampled}
LABELS = {'ours': 'layerwise_inference',
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
    data = load_synthetic(args.preset, root=args.cache_dir).to_data()
    model = _model(data, args)
    print(f'{args.preset}: {data.num_nodes:,} nodes, {data.num_edges:,} '
          f'edges; GraphSAGE, {args.layers} layers, hidden {args.hidden}; '
          f'{args.batch_size} nodes per chunk; {torch.get_num_threads()} '
          f'threads')
    table = Table({'side': 42, 'seconds': 8, 'nodes/s': 10})
    seconds: Dict[str, float] = {}
    outputs: Dict[str, Tensor] = {}
    with torch.no_grad():
        for side in sides:
            start = time.perf_counter()
            outputs[side] = RUNS[side](model, data, args)
            seconds[side] = time.perf_counter() - start
            table.row(LABELS[side], seconds[side],
                      f'{data.num_nodes / seconds[side]:,.0f}')
    result: Dict[str, Any] = {'seconds': seconds}
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
