r"""Node classification with GraphSAGE on a products-like graph.

Mirrors PyG's ``examples/ogbn_train.py`` run as ``--dataset ogbn-products
--model sage`` (which replaced ``examples/ogbn_products_sage.py``): the same
loaders, model and training loop, with one change: ``FastNeighborLoader`` is
imported from ``pyg_fastload`` where PyG imports ``NeighborLoader`` from
``torch_geometric.loader``; it takes the same arguments and yields the same
kind of batches. The defaults are sized for a CPU (2 layers, fan-outs
``[10, 5]``, 128 hidden channels; PyG's are 3 layers of 10 and 256):
``--num_neighbors 10 10 10 --hidden_channels 256`` gives PyG's.

The graph is generated (no download): the ``'products-like'`` preset copies
ogbn-products' feature width (100), class count (47), split sizes (8% train,
1.6% validation, 90% test) and degree distribution. ``--scale`` shrinks its
node and edge counts (mean degree kept); the default, 0.1 (245k nodes, 12M
edges), trains in a few minutes on a laptop CPU. ``--scale 1`` is the full
2.4M nodes and 124M edges: about 3 minutes and 6 GB of memory to generate
once (then cached), and much longer to train on a CPU.

    python examples/products_sage.py              # 245k nodes, 3 epochs
    python examples/products_sage.py --scale 1    # the full products-like
    python examples/products_sage.py --tiny       # 2,000 nodes, seconds
"""
import argparse
import dataclasses
import time

import torch
import torch.nn.functional as F

from torch_geometric import seed_everything
from torch_geometric.nn import GraphSAGE
from tqdm import tqdm

# was: from torch_geometric.loader import NeighborLoader
from pyg_fastload import FastNeighborLoader
from pyg_fastload.datasets import PRESETS, load_synthetic

parser = argparse.ArgumentParser(
    description=__doc__.split('\n\n')[0],
    formatter_class=argparse.ArgumentDefaultsHelpFormatter)
parser.add_argument('--scale', type=float, default=0.1,
                    help="share of the products-like graph's nodes and edges")
parser.add_argument('--tiny', action='store_true',
                    help="the 2,000-node 'tiny' preset, for a quick check")
parser.add_argument('--epochs', type=int, default=None,
                    help='3, or 10 with --tiny')
parser.add_argument('--num_neighbors', type=int, nargs='+', default=[10, 5],
                    help='fan-out per layer (one number per layer)')
parser.add_argument('--batch_size', type=int, default=1024)
parser.add_argument('--eval_batch_size', type=int, default=4096)
parser.add_argument('--hidden_channels', type=int, default=128)
parser.add_argument('--dropout', type=float, default=0.5)
parser.add_argument('--lr', type=float, default=0.003)
parser.add_argument('--seed', type=int, default=0)
args = parser.parse_args()
if args.epochs is None:
    args.epochs = 10 if args.tiny else 3

wall_clock_start = time.perf_counter()
seed_everything(args.seed)  # model init, shuffling and neighbour sampling

# The graph: generated once and cached (~/.cache/pyg_fastload/synthetic, or
# $PYG_FASTLOAD_CACHE), memory-mapped on later runs.
if args.tiny:
    config = PRESETS['tiny']
else:
    config = PRESETS['products-like']
    if args.scale != 1.0:
        config = dataclasses.replace(
            config, num_nodes=int(config.num_nodes * args.scale),
            num_edges=int(config.num_edges * args.scale))
graph = load_synthetic(config, seed=args.seed)
data = graph.to_data()  # a torch_geometric.data.Data with x, y and the masks
num_classes = config.num_classes
print(f'Graph: {data.num_nodes:,} nodes, {data.num_edges:,} edges, '
      f'{data.num_features} features, {num_classes} classes '
      f'({int(data.train_mask.sum()):,} training nodes)')


def get_loader(mask, batch_size, shuffle=False):
    # The same arguments as PyG's NeighborLoader:
    return FastNeighborLoader(
        data,
        num_neighbors=args.num_neighbors,
        input_nodes=mask,
        batch_size=batch_size,
        shuffle=shuffle,
    )


train_loader = get_loader(data.train_mask, args.batch_size, shuffle=True)
val_loader = get_loader(data.val_mask, args.eval_batch_size)
test_loader = get_loader(data.test_mask, args.eval_batch_size)

model = GraphSAGE(
    in_channels=data.num_features,
    hidden_channels=args.hidden_channels,
    num_layers=len(args.num_neighbors),
    out_channels=num_classes,
    dropout=args.dropout,
)
optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)


def train():
    model.train()
    total_loss = total_correct = total_examples = 0
    for batch in train_loader:
        optimizer.zero_grad()
        # The first `batch_size` nodes of a batch are its seed nodes:
        out = model(batch.x, batch.edge_index)[:batch.batch_size]
        y = batch.y[:batch.batch_size]
        loss = F.cross_entropy(out, y)
        loss.backward()
        optimizer.step()

        total_loss += loss.item() * batch.batch_size
        total_correct += int(out.argmax(dim=-1).eq(y).sum())
        total_examples += batch.batch_size
    return total_loss / total_examples, total_correct / total_examples


@torch.no_grad()
def test(loader, desc):
    model.eval()
    total_correct = total_examples = 0
    for batch in tqdm(loader, desc=desc, leave=False):
        out = model(batch.x, batch.edge_index)[:batch.batch_size]
        pred = out.argmax(dim=-1)
        total_correct += int((pred == batch.y[:batch.batch_size]).sum())
        total_examples += batch.batch_size
    return total_correct / total_examples


print(f'Setup took {time.perf_counter() - wall_clock_start:.1f}s. '
      f'Training...')
best_val = 0.0
for epoch in range(1, args.epochs + 1):
    start = time.perf_counter()
    loss, train_acc = train()
    train_time = time.perf_counter() - start
    val_acc = test(val_loader, 'Validating')
    best_val = max(best_val, val_acc)
    print(f'Epoch: {epoch:02d}, Loss: {loss:.4f}, Approx. Train: '
          f'{train_acc:.4f}, Val: {val_acc:.4f}, Train time: '
          f'{train_time:.1f}s')

test_acc = test(test_loader, 'Testing')  # 90% of the nodes: the longest
print(f'Best Validation Accuracy: {100.0 * best_val:.2f}%')
print(f'Test Accuracy: {100.0 * test_acc:.2f}% (chance: '
      f'{100.0 / num_classes:.2f}%)')
print(f'Total time: {time.perf_counter() - wall_clock_start:.1f}s')
