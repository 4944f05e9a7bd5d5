r"""Training on sampled neighbourhoods, inference layer by layer for every
node.

Mirrors PyG's ``examples/reddit.py``: GraphSAGE trained on mini-batches of
sampled neighbourhoods, then evaluated with full-neighbourhood inference of
every node one layer at a time. PyG's example writes that inference by hand
(a ``NeighborLoader(num_neighbors=[-1], input_nodes=None)`` over one hop and
a ``model.inference(x_all, loader)`` loop holding each layer's outputs for
all nodes); here it is one call, ``pyg_fastload.layerwise_inference(model,
data)``: each layer computed for all nodes in chunks over all their
in-neighbours, its outputs in memory (or in files under ``--work_dir``
beyond ``--memory_budget``), and the result equal to the full-batch
``model(x, edge_index)``. Training uses ``FastNeighborLoader`` where PyG
uses ``NeighborLoader``.

The graph is generated: the ``'products-like'`` preset at ``--scale`` (the
default 0.1: 245k nodes, 12M edges); reddit's own shape is not a preset.

    python examples/layerwise_inference.py            # 245k nodes
    python examples/layerwise_inference.py --tiny     # 2,000 nodes, seconds
"""
import argparse
import dataclasses
import time

import torch
import torch.nn.functional as F

from torch_geometric import seed_everything
from torch_geometric.nn import GraphSAGE

# was: from torch_geometric.loader import NeighborLoader
from pyg_fastload import FastNeighborLoader, layerwise_inference
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
parser.add_argument('--num_neighbors', type=int, nargs='+', default=[25, 10],
                    help="training fan-out per layer (reddit.py's)")
parser.add_argument('--batch_size', type=int, default=1024)
parser.add_argument('--hidden_channels', type=int, default=64)
parser.add_argument('--lr', type=float, default=0.01)
parser.add_argument('--memory_budget', default='auto',
                    help="bytes of layer outputs held in memory ('auto': "
                         "half of what is available)")
parser.add_argument('--work_dir', default=None,
                    help='where layers beyond the budget go (files)')
parser.add_argument('--seed', type=int, default=0)
args = parser.parse_args()
if args.epochs is None:
    args.epochs = 10 if args.tiny else 3

wall_clock_start = time.perf_counter()
seed_everything(args.seed)

if args.tiny:
    config = PRESETS['tiny']
else:
    config = PRESETS['products-like']
    if args.scale != 1.0:
        config = dataclasses.replace(
            config, num_nodes=int(config.num_nodes * args.scale),
            num_edges=int(config.num_edges * args.scale))
data = load_synthetic(config, seed=args.seed).to_data()
print(f'Graph: {data.num_nodes:,} nodes, {data.num_edges:,} edges, '
      f'{config.num_classes} classes')

train_loader = FastNeighborLoader(data, num_neighbors=args.num_neighbors,
                                  input_nodes=data.train_mask,
                                  batch_size=args.batch_size, shuffle=True)
model = GraphSAGE(data.num_features, args.hidden_channels,
                  num_layers=len(args.num_neighbors),
                  out_channels=config.num_classes)
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
def test():
    model.eval()
    # PyG's reddit.py: out = model.inference(data.x, subgraph_loader)
    out = layerwise_inference(model, data, memory_budget=args.memory_budget,
                              work_dir=args.work_dir)
    pred = out.argmax(dim=-1)
    return [float((pred[mask] == data.y[mask]).float().mean())
            for mask in (data.train_mask, data.val_mask, data.test_mask)]


for epoch in range(1, args.epochs + 1):
    loss = train()
    train_acc, val_acc, test_acc = test()
    print(f'Epoch: {epoch:02d}, Loss: {loss:.4f}, Train: {train_acc:.4f}, '
          f'Val: {val_acc:.4f}, Test: {test_acc:.4f}')

print(f'Test Accuracy: {100.0 * test_acc:.2f}% (chance: '
      f'{100.0 / config.num_classes:.2f}%)')
print(f'Total time: {time.perf_counter() - wall_clock_start:.1f}s')
