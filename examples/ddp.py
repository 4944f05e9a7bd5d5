r"""Data-parallel training in several processes (DDP) on CPUs, with gloo.

Mirrors PyG's ``examples/multi_gpu/distributed_sampling.py``: every process
(rank) holds the whole graph, samples mini-batches of its own share of the
training nodes with ``FastNeighborLoader`` (PyG's ``NeighborLoader``
there), and trains a GraphSAGE wrapped in ``DistributedDataParallel``, which
averages the gradients across the ranks; accuracies are summed over the
ranks with ``all_reduce``. PyG's example runs one process per GPU with NCCL;
this one runs processes on CPU cores with gloo, started either way:

    python examples/ddp.py                           # spawns 2 processes
    python examples/ddp.py --world_size 4
    torchrun --nproc_per_node 2 examples/ddp.py      # torchrun starts them
    python examples/ddp.py --tiny                    # 2,000 nodes, seconds

Every wait between the processes is bounded: a rank that dies or hangs
makes the others fail after ``--timeout`` seconds instead of waiting
forever. The graph is the ``'arxiv-like'`` preset (169k nodes, generated
once and cached), a few minutes on a laptop CPU. With Lightning instead,
``pyg-fastload fit -c configs/ddp-cpu.yaml`` trains the same way, and its
``data.mode`` adds partitioned modes (see docs/guide/distributed.md).
"""
import argparse
import gc
import os
import socket
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

from torch_geometric import seed_everything
from torch_geometric.nn import GraphSAGE

# was: from torch_geometric.loader import NeighborLoader
from pyg_fastload import FastNeighborLoader
from pyg_fastload.datasets import load_synthetic


@torch.no_grad()
def test(loader, model):
    model.eval()
    total_correct = torch.zeros(2, dtype=torch.long)  # correct, examples
    for batch in loader:
        out = model(batch.x, batch.edge_index)[:batch.batch_size]
        pred = out.argmax(dim=-1)
        total_correct[0] += int((pred == batch.y[:batch.batch_size]).sum())
        total_correct[1] += batch.batch_size
    # Every rank evaluated its share: add up the counts of all ranks.
    dist.all_reduce(total_correct, op=dist.ReduceOp.SUM)
    return int(total_correct[0]) / max(int(total_correct[1]), 1)


def run(rank, world_size, args, init_method):
    dist.init_process_group('gloo', init_method=init_method, rank=rank,
                            world_size=world_size,
                            timeout=timedelta(seconds=args.timeout))
    # Share the CPU cores between the ranks instead of oversubscribing them:
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // world_size))

    # Rank 0 generates and caches the graph if needed; the others then
    # memory-map the cached copy.
    dataset = 'tiny' if args.tiny else args.dataset
    if rank == 0:
        load_synthetic(dataset, seed=args.seed)
    dist.barrier()
    graph = load_synthetic(dataset, seed=args.seed, progress=False)
    data = graph.to_data()

    # Split the training nodes into equal shares, one per rank, so that
    # every rank runs the same number of steps (DDP needs every rank in
    # every gradient all-reduce); evaluation nodes may split unevenly.
    train_idx = data.train_mask.nonzero().view(-1)
    per_rank = train_idx.numel() // world_size
    train_idx = train_idx[rank * per_rank:(rank + 1) * per_rank]
    val_idx = data.val_mask.nonzero().view(-1).tensor_split(world_size)[rank]
    test_idx = data.test_mask.nonzero().view(-1).tensor_split(
        world_size)[rank]

    kwargs = dict(data=data, num_neighbors=args.num_neighbors,
                  batch_size=args.batch_size)
    train_loader = FastNeighborLoader(input_nodes=train_idx, shuffle=True,
                                      drop_last=True, **kwargs)
    val_loader = FastNeighborLoader(input_nodes=val_idx, **kwargs)
    test_loader = FastNeighborLoader(input_nodes=test_idx, **kwargs)

    # The same initial weights on every rank (DDP also broadcasts rank 0's),
    # then a different sampling stream per rank:
    seed_everything(args.seed)
    model = GraphSAGE(data.num_features, args.hidden_channels,
                      num_layers=len(args.num_neighbors),
                      out_channels=int(data.y.max()) + 1, dropout=0.5)
    model = DistributedDataParallel(model)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    torch.manual_seed(args.seed * 1000 + rank)

    if rank == 0:
        print(f'{world_size} ranks, {per_rank:,} training nodes each, '
              f'{len(train_loader)} steps per epoch')
    for epoch in range(1, args.epochs + 1):
        start = time.perf_counter()
        model.train()
        for batch in train_loader:
            optimizer.zero_grad()
            out = model(batch.x, batch.edge_index)[:batch.batch_size]
            loss = F.cross_entropy(out, batch.y[:batch.batch_size])
            loss.backward()  # DDP averages the gradients across the ranks
            optimizer.step()
        val_acc = test(val_loader, model)
        if rank == 0:
            print(f'Epoch: {epoch:02d}, Loss (rank 0): {loss.item():.4f}, '
                  f'Val: {val_acc:.4f}, '
                  f'Time: {time.perf_counter() - start:.1f}s')

    test_acc = test(test_loader, model)
    if rank == 0:
        print(f'Test Accuracy: {100.0 * test_acc:.2f}% (chance: '
              f'{100.0 / (int(data.y.max()) + 1):.2f}%)')
    # Free the DDP model before the process group: if its gradient reducer
    # held the group last, freeing it would stop the group's threads while
    # holding the GIL, which a gloo thread may wait for (a hang at exit).
    del model, optimizer
    gc.collect()
    dist.destroy_process_group()


def free_port():
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


if __name__ == '__main__':
    parser = argparse.ArgumentParser(
        description=__doc__.split('\n\n')[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument('--world_size', type=int, default=2,
                        help='processes to spawn (not with torchrun)')
    parser.add_argument('--dataset', default='arxiv-like',
                        choices=['tiny', 'arxiv-like', 'products-like'])
    parser.add_argument('--tiny', action='store_true',
                        help="the 2,000-node 'tiny' preset")
    parser.add_argument('--epochs', type=int, default=None,
                        help='3, or 10 with --tiny')
    parser.add_argument('--num_neighbors', type=int, nargs='+',
                        default=[10, 5])
    parser.add_argument('--batch_size', type=int, default=None,
                        help='per rank: 1024, or 128 with --tiny')
    parser.add_argument('--hidden_channels', type=int, default=128)
    parser.add_argument('--lr', type=float, default=0.003)
    parser.add_argument('--timeout', type=float, default=120,
                        help='seconds any wait between the ranks may take')
    parser.add_argument('--seed', type=int, default=0)
    args = parser.parse_args()
    if args.epochs is None:
        args.epochs = 10 if args.tiny else 3
    if args.batch_size is None:
        args.batch_size = 128 if args.tiny else 1024

    start = time.perf_counter()
    if 'RANK' in os.environ and 'WORLD_SIZE' in os.environ:
        # Started by torchrun: one process per rank, already running, with
        # MASTER_ADDR and MASTER_PORT in the environment.
        run(int(os.environ['RANK']), int(os.environ['WORLD_SIZE']), args,
            'env://')
    else:
        # Started by hand: spawn the ranks; they meet at a free local port.
        # If one raises, spawn stops the others and raises here.
        init_method = f'tcp://127.0.0.1:{free_port()}'
        mp.spawn(run, args=(args.world_size, args, init_method),
                 nprocs=args.world_size, join=True)
    if int(os.environ.get('RANK', 0)) == 0:
        print(f'Total time: {time.perf_counter() - start:.1f}s')
