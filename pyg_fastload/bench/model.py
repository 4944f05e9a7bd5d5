r"""The model's side of the batch: does handing the convolutions a sorted
sparse adjacency (PyG ``EdgeIndex`` sorted by destination, or a torch_sparse
``SparseTensor``) beat plain ``edge_index`` scatter on CPU for SAGE, GCN and
GAT? Times a forward + backward step on the same sampled batches, and the
cost of building each layout (which the loader stage would pay).

Run ``pyg-fastload bench model --preset arxiv-like`` or
``python -m pyg_fastload.bench.model``.
"""
from __future__ import annotations

import argparse
import importlib.util
import time
import warnings
from typing import Any, Callable, Dict, List, Optional

import torch
import torch.nn.functional as F
from torch import Tensor
from torch_geometric import EdgeIndex
from torch_geometric.nn import GAT, GCN, GraphSAGE

from ..datasets import load_synthetic
from ..loader import FastNeighborLoader
from .common import (
    Table,
    add_graph_arguments,
    benchmark_main,
    cpu_count,
    median,
)

__all__ = ['add_arguments', 'run', 'main']

MODELS = {'sage': GraphSAGE, 'gcn': GCN, 'gat': GAT}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_graph_arguments(parser)
    parser.add_argument('--hidden', type=int, default=256)
    parser.add_argument('--batches', type=int, default=5,
                        help='batches timed per model and layout')
    parser.add_argument('--models', nargs='+', default=sorted(MODELS),
                        choices=sorted(MODELS))


def _layouts() -> Dict[str, Callable[[Any], Any]]:
    r"""Adjacency builders, each from a sampled batch."""
    def edge_index_sorted(batch: Any) -> EdgeIndex:
        n = batch.num_nodes
        return EdgeIndex(batch.edge_index, sparse_size=(n, n)).sort_by(
            'col')[0]

    layouts: Dict[str, Callable[[Any], Any]] = {
        'edge_index (scatter)': lambda batch: batch.edge_index,
        'EdgeIndex sorted by col': edge_index_sorted,
    }
    if importlib.util.find_spec('torch_sparse'):
        from torch_sparse import SparseTensor  # optional dependency

        def sparse_tensor(batch: Any) -> Any:
            n = batch.num_nodes
            row, col = batch.edge_index
            return SparseTensor(row=col, col=row, sparse_sizes=(n, n))

        layouts['SparseTensor adj_t'] = sparse_tensor
    return layouts


def _step(model: torch.nn.Module, batch: Any, adj: Any) -> float:
    start = time.perf_counter()
    out = model(batch.x, adj)[:batch.batch_size]
    F.cross_entropy(out, batch.y[:batch.batch_size]).backward()
    return time.perf_counter() - start


def run(args: argparse.Namespace) -> Dict[str, float]:
    torch.manual_seed(args.seed)
    print(f'# model-side benchmark: preset={args.preset} fanout='
          f'{args.fanout} batch_size={args.batch_size} hidden={args.hidden} '
          f'cpus={cpu_count()} torch_threads={torch.get_num_threads()}')
    data = load_synthetic(args.preset, root=args.cache_dir).to_data()
    loader = FastNeighborLoader(data, args.fanout, batch_size=args.batch_size,
                                input_nodes=data.train_mask, shuffle=True,
                                pipeline=False)
    batches = [b for b, _ in zip(loader, range(args.batches))]
    layouts = _layouts()
    built: Dict[str, List[Tensor]] = {}
    table = Table({'layout': 26, 'build ms/batch': 15})
    for name, build in layouts.items():
        start = time.perf_counter()
        built[name] = [build(b) for b in batches]
        table.row(name, 1e3 * (time.perf_counter() - start) / len(batches))

    warnings.filterwarnings('ignore', message='Sparse')  # torch CSR beta
    result: Dict[str, float] = {}
    num_classes = int(data.y.max()) + 1
    print()
    table = Table({'model': 6, 'layout': 26, 'ms/step': 9, 'vs scatter': 10,
                   'max |diff|': 10})
    for model_name in args.models:
        model = MODELS[model_name](data.num_features, args.hidden,
                                   num_layers=len(args.fanout),
                                   out_channels=num_classes)
        times, outputs = {}, {}
        for name in layouts:
            # Every layout must compute the same model: outputs in eval mode.
            model.eval()
            with torch.no_grad():
                outputs[name] = model(batches[0].x, built[name][0])
            model.train()
            # Warm-up on the first batch, then time the rest.
            _step(model, batches[0], built[name][0])
            times[name] = median([
                _step(model, b, adj)
                for b, adj in zip(batches[1:], built[name][1:])
            ] or [float('nan')])
        base = times['edge_index (scatter)']
        for name, seconds in times.items():
            diff = float((outputs[name] - outputs['edge_index (scatter)'])
                         .abs().max())
            table.row(model_name, name, 1e3 * seconds, base / seconds, diff)
            result[f'{model_name}/{name}'] = base / seconds
            result[f'{model_name}/{name} ms'] = 1e3 * seconds
            result[f'{model_name}/{name} max_diff'] = diff
    return result


def main(argv: Optional[List[str]] = None) -> None:
    benchmark_main(__doc__, add_arguments, run, argv)


if __name__ == '__main__':
    main()
