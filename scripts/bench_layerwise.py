#!/usr/bin/env python3
r"""Layer-wise inference for every node: ``pyg_fastload.layerwise_inference``
against PyG's layer-wise pattern (``examples/reddit.py``: a
``NeighborLoader(data, num_neighbors=[-1], input_nodes=None)`` over one hop
and the model's per-layer loop), same model (a GraphSAGE with random
weights), same graph, one run each, in one process.

    python scripts/bench_layerwise.py --preset products-like
    python scripts/bench_layerwise.py --preset arxiv-like --order pyg-first
    python scripts/bench_layerwise.py --preset products-like --only ours

Prints one JSON object: seconds of each (PyG's loader construction, which
builds its CSC, timed apart), the largest difference between the two
outputs, and the peak RSS. The graph is the cached synthetic preset
(``load_synthetic``: generated on the first call, minutes for
products-like).
"""
from __future__ import annotations

import argparse
import copy
import json
import resource
import sys
import time

import torch
from torch_geometric.loader import NeighborLoader
from torch_geometric.nn import GraphSAGE

from pyg_fastload import layerwise_inference
from pyg_fastload.datasets import load_synthetic


@torch.no_grad()
def pyg_pattern(model: GraphSAGE, x_all: torch.Tensor,
                loader: NeighborLoader) -> torch.Tensor:
    r"""``SAGE.inference`` of PyG's ``examples/reddit.py``, on the layers of
    a ``GraphSAGE`` (ReLU between layers; eval mode, so no dropout)."""
    for i, conv in enumerate(model.convs):
        xs = []
        for batch in loader:
            x = x_all[batch.n_id]
            x = conv(x, batch.edge_index)
            if i < len(model.convs) - 1:
                x = x.relu_()
            xs.append(x[:batch.batch_size])
        x_all = torch.cat(xs, dim=0)
    return x_all


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--preset', default='products-like')
    parser.add_argument('--hidden', type=int, default=128)
    parser.add_argument('--layers', type=int, default=3)
    parser.add_argument('--batch-size', type=int, default=1024,
                        help="PyG's loader (reddit.py's 1024)")
    parser.add_argument('--workers', type=int, default=0,
                        help="PyG's loader workers (reddit.py: 6; this "
                        "machine's cores are few)")
    parser.add_argument('--chunk-size', type=int, default=4096,
                        help='layerwise_inference destination nodes a chunk')
    parser.add_argument('--no-prefetch', action='store_true',
                        help='layerwise_inference without the background '
                        'thread')
    parser.add_argument('--order', choices=('ours-first', 'pyg-first'),
                        default='ours-first')
    parser.add_argument('--only', choices=('ours', 'pyg'), default=None,
                        help='run one of the two')
    parser.add_argument('--threads', type=int, default=None,
                        help="torch's intra-op threads (default: torch's)")
    args = parser.parse_args()
    if args.threads is not None:
        torch.set_num_threads(args.threads)

    started = time.perf_counter()
    graph = load_synthetic(args.preset, progress=False)
    data = graph.to_data()  # the CSC topology attached: not rebuilt
    load_s = time.perf_counter() - started
    torch.manual_seed(0)
    model = GraphSAGE(data.num_features, args.hidden, args.layers,
                      out_channels=int(graph.y.max()) + 1).eval()
    result = dict(preset=args.preset, num_nodes=data.num_nodes,
                  num_edges=int(data.edge_index.size(1)),
                  model=f'GraphSAGE {args.layers} layers, hidden '
                  f'{args.hidden}', threads=torch.get_num_threads(),
                  load_s=round(load_s, 1))

    def ours() -> torch.Tensor:
        begin = time.perf_counter()
        out = layerwise_inference(model, data, chunk_size=args.chunk_size,
                                  prefetch=not args.no_prefetch,
                                  progress=False)
        result['layerwise_inference_s'] = round(
            time.perf_counter() - begin, 1)
        result['chunk_size'] = args.chunk_size
        result['prefetch'] = not args.no_prefetch
        return out

    def pyg() -> torch.Tensor:
        begin = time.perf_counter()
        # as reddit.py builds its subgraph loader
        loader = NeighborLoader(copy.copy(data), input_nodes=None,
                                num_neighbors=[-1], shuffle=False,
                                batch_size=args.batch_size,
                                num_workers=args.workers)
        del loader.data.x, loader.data.y
        loader.data.num_nodes = data.num_nodes
        loader.data.n_id = torch.arange(data.num_nodes)
        built = time.perf_counter()
        out = pyg_pattern(model, data.x, loader)
        result['pyg_loader_build_s'] = round(built - begin, 1)
        result['pyg_pattern_s'] = round(time.perf_counter() - built, 1)
        result['pyg_batch_size'] = args.batch_size
        result['pyg_workers'] = args.workers
        return out

    runs = [ours, pyg] if args.order == 'ours-first' else [pyg, ours]
    outs = {}
    for run in runs:
        if args.only in (None, run.__name__):
            outs[run.__name__] = run()
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            print(f'# {run.__name__} done, peak RSS so far '
                  f'{rss / 2**20:.2f} GiB: {json.dumps(result)}',
                  file=sys.stderr, flush=True)
    if len(outs) == 2:
        result['max_abs_diff'] = float(
            (outs['ours'] - outs['pyg']).abs().max())
        result['speedup'] = round(result['pyg_pattern_s']
                                  / result['layerwise_inference_s'], 2)
    result['peak_rss_gib'] = round(resource.getrusage(
        resource.RUSAGE_SELF).ru_maxrss / 2**20, 2)
    print(json.dumps(result, indent=1))


if __name__ == '__main__':
    main()
