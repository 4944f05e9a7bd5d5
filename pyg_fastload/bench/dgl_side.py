r"""The DGL side of ``pyg-fastload bench dgl``: run as a script by the
Python of a virtual environment that has DGL (DGL needs an older torch than
pyg_fastload), never imported by pyg_fastload. It reads the graph written
by the bench (NumPy arrays: CSC ``indptr`` and ``indices``, features ``x``,
the seeds), builds a DGL graph in CSC form, and times DGL's
``NeighborSampler`` with a ``DataLoader`` that gathers every batch's input
features, in steady state, for every ``--num-workers`` setting; it prints
one JSON line: ``{"dgl": version, "torch": version, "batches_per_s":
{workers: rate}}``.
"""
import argparse
import json
import os
import statistics
import sys
import time

# Run as a script, this file's directory (pyg_fastload/bench, which holds a
# dgl.py) comes first on the path: drop it, so that `import dgl` is DGL.
sys.path = [p for p in sys.path if os.path.abspath(p or '.') !=
            os.path.dirname(os.path.abspath(__file__))]

import numpy as np  # noqa: E402
import torch  # noqa: E402


def _arrays(path: str) -> dict:
    out = {}
    for name in ('indptr', 'indices', 'x', 'seeds'):
        out[name] = torch.from_numpy(np.load(os.path.join(path, f'{name}.npy'),
                                             allow_pickle=False))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--graph', required=True)
    parser.add_argument('--fanout', type=int, nargs='+', required=True)
    parser.add_argument('--batch-size', type=int, required=True)
    parser.add_argument('--batches', type=int, required=True)
    parser.add_argument('--warmup', type=int, required=True)
    parser.add_argument('--rounds', type=int, required=True)
    parser.add_argument('--num-workers', type=int, nargs='+', required=True)
    args = parser.parse_args()
    # optional dependency: DGL, in the DGL environment this script runs in
    import dgl
    from dgl.dataloading import DataLoader, NeighborSampler
    arrays = _arrays(args.graph)
    num_nodes = arrays['indptr'].numel() - 1
    graph = dgl.graph(('csc', (arrays['indptr'], arrays['indices'],
                               torch.empty(0, dtype=torch.int64))),
                      num_nodes=num_nodes)
    graph.ndata['feat'] = arrays['x']
    seeds = arrays['seeds']
    rates = {}
    for workers in args.num_workers:
        times = []
        for _ in range(args.rounds):
            sampler = NeighborSampler(args.fanout,
                                      prefetch_node_feats=['feat'])
            loader = DataLoader(graph, seeds, sampler,
                                batch_size=args.batch_size, shuffle=False,
                                drop_last=False, num_workers=workers)
            iterator = iter(loader)
            for _ in range(args.warmup):
                next(iterator)[2][0].srcdata['feat']
            started = time.perf_counter()
            for _ in range(args.batches):
                next(iterator)[2][0].srcdata['feat']
            times.append(time.perf_counter() - started)
            del iterator, loader
        rates[workers] = args.batches / statistics.median(times)
    print(json.dumps({'dgl': dgl.__version__, 'torch': torch.__version__,
                      'batches_per_s': rates}))


if __name__ == '__main__':
    main()
