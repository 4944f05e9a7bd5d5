r"""Training from features on disk: a dataset directory served through a
``(FeatureStore, GraphStore)`` pair, with the hottest rows cached in memory.

Mirrors PyG's ``examples/distributed/kuzu/papers_100M/train.py``, where a
graph database serves PyG's ``NeighborLoader`` as a ``(feature_store,
graph_store)`` remote backend and GraphSAGE trains on ogbn-papers100M without
holding its features in memory. Here the backend is a directory written by
``pyg-fastload prepare``'s Python API (``prepare_synthetic``): the topology
(CSC) and each node array in a binary file, memory-mapped by
``open_dataset``, which returns a ``TieredFeatureStore`` and a
``CSCGraphStore``. Feature rows come from the fastest tier holding them: a
host buffer holding ``--host_budget`` of the rows that the loader's fan-outs
will touch most (``policy='expected_access'``), then the files on disk
(memory-mapped, or read with ``O_DIRECT``, bypassing the page cache, with
``--storage direct``). Every epoch prints how many rows each tier served.

The graph is generated (no download): the ``'arxiv-like'`` preset (169k
nodes, 128 features, 40 classes), written to ``--root`` once and reopened
on later runs; a few minutes on a laptop CPU. ``--dataset_dir DIR`` trains
on any directory ``pyg-fastload prepare`` wrote instead, e.g. with
``--preset papers-like`` (56M nodes, 28.7 GB of features: more than many
machines' memory) or ``--ogb ogbn-products``.

    python examples/features_on_disk.py                       # data/arxiv-like
    python examples/features_on_disk.py --storage direct      # O_DIRECT reads
    python examples/features_on_disk.py --tiny                # 2,000 nodes
"""
import argparse
import os.path as osp
import time

import torch
import torch.nn.functional as F

from torch_geometric import seed_everything
from torch_geometric.nn import GraphSAGE

from pyg_fastload import (FastNeighborLoader, FeatureCache, loader_scores,
                          open_dataset)
from pyg_fastload.datasets import prepare_synthetic

parser = argparse.ArgumentParser(
    description=__doc__.split('\n\n')[0],
    formatter_class=argparse.ArgumentDefaultsHelpFormatter)
parser.add_argument('--preset', default='arxiv-like',
                    choices=['tiny', 'arxiv-like', 'products-like'],
                    help='the synthetic graph to write')
parser.add_argument('--tiny', action='store_true',
                    help="the 2,000-node 'tiny' preset (--preset tiny)")
parser.add_argument('--root', default='data',
                    help='where the dataset directory is written')
parser.add_argument('--dataset_dir', default=None,
                    help='an existing dataset directory to train on '
                    '(default: ROOT/PRESET, written if missing)')
parser.add_argument('--host_budget', default='10%',
                    help="the host buffer: a share of the feature bytes "
                    "or a size such as '200MiB'")
parser.add_argument('--storage', default='mmap', choices=['mmap', 'direct'],
                    help='how rows missing from the buffer are read')
parser.add_argument('--epochs', type=int, default=None,
                    help='3, or 10 with --tiny')
parser.add_argument('--num_neighbors', type=int, nargs='+', default=[10, 5])
parser.add_argument('--batch_size', type=int, default=1024)
parser.add_argument('--eval_batch_size', type=int, default=4096)
parser.add_argument('--hidden_channels', type=int, default=128)
parser.add_argument('--lr', type=float, default=0.003)
parser.add_argument('--seed', type=int, default=0)
args = parser.parse_args()
if args.tiny:
    args.preset = 'tiny'
if args.epochs is None:
    args.epochs = 10 if args.tiny else 3

wall_clock_start = time.perf_counter()
seed_everything(args.seed)

# 1. The dataset directory, as `pyg-fastload prepare --preset PRESET DIR`
#    writes it (generated once; later runs open what is there):
path = args.dataset_dir or osp.join(args.root, args.preset)
if not osp.exists(osp.join(path, 'meta.json')):
    print(f'Writing {path}...')
    prepare_synthetic(args.preset, path, seed=args.seed)

# 2. The stores: features stay in their files; the host buffer is filled
#    with the rows this loader's fan-outs and batch size will need most.
cache = FeatureCache(host_budget=args.host_budget, policy='expected_access',
                     storage=args.storage)
feature_store, graph_store = open_dataset(
    path, cache, scores=loader_scores(args.num_neighbors, args.batch_size,
                                      seed=args.seed))


def node_array(name):
    return feature_store.get_tensor(group_name=None, attr_name=name,
                                    index=None)


num_nodes, num_features = feature_store.get_tensor_size(group_name=None,
                                                        attr_name='x')
num_classes = int(node_array('y').max()) + 1
print(f'Dataset {path}: {num_nodes:,} nodes, '
      f'{num_features} features, {num_classes} classes; where the rows '
      f'live: {feature_store.places()["x"]}')


# 3. The loaders take the pair where PyG's take a Data object:
def get_loader(mask, batch_size, shuffle=False):
    return FastNeighborLoader(
        (feature_store, graph_store),
        num_neighbors=args.num_neighbors,
        input_nodes=mask,
        batch_size=batch_size,
        shuffle=shuffle,
    )


train_loader = get_loader(node_array('train_mask'), args.batch_size, True)
val_loader = get_loader(node_array('val_mask'), args.eval_batch_size)
test_loader = get_loader(node_array('test_mask'), args.eval_batch_size)

model = GraphSAGE(num_features, args.hidden_channels,
                  num_layers=len(args.num_neighbors), out_channels=num_classes,
                  dropout=0.5)
optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)


def train():
    model.train()
    total_loss = total_examples = 0
    for batch in train_loader:
        optimizer.zero_grad()
        out = model(batch.x, batch.edge_index)[:batch.batch_size]
        loss = F.cross_entropy(out, batch.y[:batch.batch_size])
        loss.backward()
        optimizer.step()
        total_loss += loss.item() * batch.batch_size
        total_examples += batch.batch_size
    return total_loss / total_examples


@torch.no_grad()
def test(loader):
    model.eval()
    total_correct = total_examples = 0
    for batch in loader:
        out = model(batch.x, batch.edge_index)[:batch.batch_size]
        pred = out.argmax(dim=-1)
        total_correct += int((pred == batch.y[:batch.batch_size]).sum())
        total_examples += batch.batch_size
    return total_correct / total_examples


def tier_summary():
    # Feature rows requested by the training batches, and who served them:
    tiers = feature_store.stats('x')['x']
    rows = sum(tier['hits'] for tier in tiers.values())
    return ', '.join(f"{name} {tier['hits'] / max(rows, 1):.0%}"
                     for name, tier in tiers.items())


print(f'Setup took {time.perf_counter() - wall_clock_start:.1f}s. '
      f'Training...')
for epoch in range(1, args.epochs + 1):
    start = time.perf_counter()
    feature_store.reset_counters()
    loss = train()
    served = tier_summary()
    val_acc = test(val_loader)
    print(f'Epoch: {epoch:02d}, Loss: {loss:.4f}, Val: {val_acc:.4f}, '
          f'Time: {time.perf_counter() - start:.1f}s, rows served by '
          f'{served}')

test_acc = test(test_loader)
print(f'Test Accuracy: {100.0 * test_acc:.2f}% (chance: '
      f'{100.0 / num_classes:.2f}%)')
print(f'Total time: {time.perf_counter() - wall_clock_start:.1f}s')
