r"""Heterogeneous node classification on an ogbn-mag-like graph with
``to_hetero``.

Mirrors PyG's ``examples/hetero/to_hetero_mag.py``: a homogeneous GraphSAGE
turned into a heterogeneous model by ``to_hetero`` (one ``SAGEConv`` per
relation, summed per node type), trained on the papers' venues with
mini-batches of ``FastNeighborLoader`` (PyG's ``NeighborLoader`` there),
fan-outs ``[10, 10]`` for every relation.

The graph is generated (no download): ``'mag-like'`` has ogbn-mag's node and
edge types and counts (736k papers, 1.1M authors, 8.7k institutions, 60k
fields of study; every relation also stored reversed, as ``ToUndirected``
gives), 128 paper features and 349 classes. ``--scale`` shrinks every
count; the default 0.03 (22k papers, 34k authors) trains in a few minutes on
a laptop CPU (3 epochs reach about 8% test accuracy, 29 times chance, and
still climbing: PyG's example trains 20, ``--epochs 20``). Only papers have
features, as in ogbn-mag: PyG's example reads metapath2vec features for the
other types, here each of them gets a learned ``torch.nn.Embedding`` looked
up by the batch's ``n_id``.

    python examples/to_hetero_mag.py              # mag-like at scale 0.03
    python examples/to_hetero_mag.py --scale 1    # full size (slow on a CPU)
    python examples/to_hetero_mag.py --tiny       # 'hetero-tiny', seconds
"""
import argparse
import time

import torch
import torch.nn.functional as F

from torch_geometric import seed_everything
from torch_geometric.nn import Linear, SAGEConv, to_hetero

# was: from torch_geometric.loader import NeighborLoader
from pyg_fastload import FastNeighborLoader
from pyg_fastload.datasets import generate_hetero

parser = argparse.ArgumentParser(
    description=__doc__.split('\n\n')[0],
    formatter_class=argparse.ArgumentDefaultsHelpFormatter)
parser.add_argument('--scale', type=float, default=0.03,
                    help="share of mag-like's node and edge counts, in (0, 1]")
parser.add_argument('--tiny', action='store_true',
                    help="the few-hundred-node 'hetero-tiny' preset")
parser.add_argument('--epochs', type=int, default=None,
                    help='3, or 10 with --tiny')
parser.add_argument('--num_neighbors', type=int, nargs='+', default=[10, 10],
                    help='fan-out per layer, for every relation')
parser.add_argument('--batch_size', type=int, default=1024)
parser.add_argument('--hidden_channels', type=int, default=64)
parser.add_argument('--lr', type=float, default=0.01)
parser.add_argument('--seed', type=int, default=0)
args = parser.parse_args()
if args.epochs is None:
    args.epochs = 10 if args.tiny else 3

wall_clock_start = time.perf_counter()
seed_everything(args.seed)

# A HeteroData with papers (x, y, masks), authors, institutions and fields
# of study (node counts only), generated in memory from the seed:
if args.tiny:
    data = generate_hetero('hetero-tiny', seed=args.seed)
else:
    data = generate_hetero('mag-like', seed=args.seed, scale=args.scale)
num_classes = int(data['paper'].y.max()) + 1
print(data)

train_input_nodes = ('paper', data['paper'].train_mask)
val_input_nodes = ('paper', data['paper'].val_mask)
test_input_nodes = ('paper', data['paper'].test_mask)
kwargs = {'batch_size': args.batch_size,
          'num_neighbors': args.num_neighbors}  # PyG's example: [10] * 2

train_loader = FastNeighborLoader(data, shuffle=True,
                                  input_nodes=train_input_nodes, **kwargs)
val_loader = FastNeighborLoader(data, input_nodes=val_input_nodes, **kwargs)
test_loader = FastNeighborLoader(data, input_nodes=test_input_nodes,
                                 **kwargs)

# The homogeneous model of PyG's example, written as a class (with torch
# 2.13 and PyG 2.8.1, `to_hetero` fails to trace PyG's `Sequential`); lazy
# input sizes (-1) let every relation take its source type's width:
class GNN(torch.nn.Module):
    def __init__(self, hidden_channels, out_channels):
        super().__init__()
        self.conv1 = SAGEConv((-1, -1), hidden_channels)
        self.conv2 = SAGEConv((-1, -1), hidden_channels)
        self.lin = Linear(-1, out_channels)

    def forward(self, x, edge_index):
        x = self.conv1(x, edge_index).relu()
        x = self.conv2(x, edge_index).relu()
        return self.lin(x)


class Net(torch.nn.Module):
    r"""Learned embeddings for the featureless node types, then the
    heterogeneous GNN that ``to_hetero`` builds."""
    def __init__(self):
        super().__init__()
        self.embeddings = torch.nn.ModuleDict({
            node_type: torch.nn.Embedding(data[node_type].num_nodes,
                                          args.hidden_channels)
            for node_type in data.node_types if 'x' not in data[node_type]
        })
        gnn = GNN(args.hidden_channels, num_classes)
        self.gnn = to_hetero(gnn, data.metadata(), aggr='sum')

    def forward(self, batch):
        x_dict = dict(batch.x_dict)
        for node_type, embedding in self.embeddings.items():
            # n_id: the batch's nodes of that type, in global ids
            x_dict[node_type] = embedding(batch[node_type].n_id)
        return self.gnn(x_dict, batch.edge_index_dict)


model = Net()


@torch.no_grad()
def init_params():
    # Initialize lazy parameters via forwarding a single batch to the model:
    model(next(iter(train_loader)))


def train():
    model.train()
    total_examples = total_loss = 0
    for batch in train_loader:
        optimizer.zero_grad()
        batch_size = batch['paper'].batch_size
        out = model(batch)['paper'][:batch_size]
        loss = F.cross_entropy(out, batch['paper'].y[:batch_size])
        loss.backward()
        optimizer.step()

        total_examples += batch_size
        total_loss += loss.item() * batch_size
    return total_loss / total_examples


@torch.no_grad()
def test(loader):
    model.eval()
    total_examples = total_correct = 0
    for batch in loader:
        batch_size = batch['paper'].batch_size
        out = model(batch)['paper'][:batch_size]
        pred = out.argmax(dim=-1)

        total_examples += batch_size
        total_correct += int((pred == batch['paper'].y[:batch_size]).sum())
    return total_correct / total_examples


init_params()  # Initialize parameters.
optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)

print(f'Setup took {time.perf_counter() - wall_clock_start:.1f}s. '
      f'Training...')
for epoch in range(1, args.epochs + 1):
    start = time.perf_counter()
    loss = train()
    val_acc = test(val_loader)
    print(f'Epoch: {epoch:02d}, Loss: {loss:.4f}, Val: {val_acc:.4f}, '
          f'Time: {time.perf_counter() - start:.1f}s')

test_acc = test(test_loader)
print(f'Test Accuracy: {100.0 * test_acc:.2f}% (chance: '
      f'{100.0 / num_classes:.2f}%)')
print(f'Total time: {time.perf_counter() - wall_clock_start:.1f}s')
