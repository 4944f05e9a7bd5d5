r"""Link prediction with a GraphSAGE encoder and mini-batches of
``FastLinkNeighborLoader``.

Mirrors PyG's ``examples/link_pred.py`` (the ``RandomLinkSplit`` into
training, validation and test links, a GNN encoder with a dot-product
decoder, validation and test AUC, "Final Test" at the best validation
epoch), trained in mini-batches as PyG's ``examples/graph_sage_unsup.py``
does with ``LinkNeighborLoader``: each batch holds ``batch_size`` training
links and as many random negative links (``neg_sampling='binary'``), and the
endpoints' neighbourhoods are sampled around them.

The graph is generated (no download): the ``'arxiv-like'`` preset
(ogbn-arxiv's 169k nodes, 1.2M undirected edges and 128 features), shrunk
by ``--scale``; the default 0.1 (17k nodes, 117k edges) trains in a few
minutes on a laptop CPU.

    python examples/link_pred.py                   # arxiv-like at scale 0.1
    python examples/link_pred.py --scale 1         # the full arxiv-like graph
    python examples/link_pred.py --tiny            # scale 0.01, seconds
"""
import argparse
import dataclasses
import time

import torch
import torch.nn.functional as F
from torchmetrics.functional.classification import binary_auroc

import torch_geometric.transforms as T
from torch_geometric import seed_everything
from torch_geometric.nn import GraphSAGE

# was: from torch_geometric.loader import LinkNeighborLoader
from pyg_fastload import FastLinkNeighborLoader
from pyg_fastload.datasets import PRESETS, load_synthetic

parser = argparse.ArgumentParser(
    description=__doc__.split('\n\n')[0],
    formatter_class=argparse.ArgumentDefaultsHelpFormatter)
parser.add_argument('--scale', type=float, default=0.1,
                    help="share of the arxiv-like graph's nodes and edges")
parser.add_argument('--tiny', action='store_true',
                    help='scale 0.01 (1,693 nodes), for a quick check')
parser.add_argument('--epochs', type=int, default=None,
                    help='3, or 10 with --tiny')
parser.add_argument('--num_neighbors', type=int, nargs='+', default=[10, 5])
parser.add_argument('--batch_size', type=int, default=1024,
                    help='training links per batch (plus as many negatives)')
parser.add_argument('--eval_batch_size', type=int, default=4096)
parser.add_argument('--hidden_channels', type=int, default=64)
parser.add_argument('--lr', type=float, default=0.01)
parser.add_argument('--seed', type=int, default=0)
args = parser.parse_args()
if args.epochs is None:
    args.epochs = 10 if args.tiny else 3

wall_clock_start = time.perf_counter()
seed_everything(args.seed)

# The graph (generated once and cached, see load_synthetic); only the node
# features and the edges matter here, not the labels:
if args.tiny:
    args.scale = 0.01
config = PRESETS['arxiv-like']
if args.scale != 1.0:
    config = dataclasses.replace(
        config, num_nodes=int(config.num_nodes * args.scale),
        num_edges=int(config.num_edges * args.scale))
graph = load_synthetic(config, seed=args.seed)
data = graph.to_data()

# 85/5/10 link split. Training links are the messages of every split's
# graph; validation and test links come with as many negative links
# (edge_label 0). Training negatives are drawn by the loader per batch.
train_data, val_data, test_data = T.RandomLinkSplit(
    num_val=0.05, num_test=0.1, is_undirected=True,
    add_negative_train_samples=False)(data)
print(f'Graph: {data.num_nodes:,} nodes, {data.num_edges:,} edges; '
      f'{train_data.edge_label_index.size(1):,} training links')

train_loader = FastLinkNeighborLoader(
    train_data,
    num_neighbors=args.num_neighbors,
    edge_label_index=train_data.edge_label_index,
    neg_sampling='binary',  # one random negative link per positive
    batch_size=args.batch_size,
    shuffle=True,
)


def eval_loader(split):
    # Given edge_label and no negative sampling: the split's own
    # positives and negatives, sampled over the training links only.
    return FastLinkNeighborLoader(
        split,
        num_neighbors=args.num_neighbors,
        edge_label_index=split.edge_label_index,
        edge_label=split.edge_label,
        batch_size=args.eval_batch_size,
    )


val_loader = eval_loader(val_data)
test_loader = eval_loader(test_data)


class Net(torch.nn.Module):
    def __init__(self, in_channels, hidden_channels):
        super().__init__()
        self.encoder = GraphSAGE(in_channels, hidden_channels, num_layers=2)

    def encode(self, x, edge_index):
        return self.encoder(x, edge_index)

    def decode(self, z, edge_label_index):
        return (z[edge_label_index[0]] * z[edge_label_index[1]]).sum(dim=-1)


model = Net(data.num_features, args.hidden_channels)
optimizer = torch.optim.Adam(params=model.parameters(), lr=args.lr)


def train():
    model.train()
    total_loss = total_examples = 0
    for batch in train_loader:
        optimizer.zero_grad()
        z = model.encode(batch.x, batch.edge_index)
        # edge_label_index: the batch's positives, then its negatives, in
        # batch-local node ids; edge_label: 1 for positives, 0 for negatives
        out = model.decode(z, batch.edge_label_index)
        loss = F.binary_cross_entropy_with_logits(out, batch.edge_label)
        loss.backward()
        optimizer.step()
        total_loss += loss.item() * out.numel()
        total_examples += out.numel()
    return total_loss / total_examples


@torch.no_grad()
def test(loader):
    model.eval()
    preds, targets = [], []
    for batch in loader:
        z = model.encode(batch.x, batch.edge_index)
        preds.append(model.decode(z, batch.edge_label_index).sigmoid())
        targets.append(batch.edge_label)
    return float(binary_auroc(torch.cat(preds), torch.cat(targets).long()))


best_val_auc = final_test_auc = 0.0
for epoch in range(1, args.epochs + 1):
    start = time.perf_counter()
    loss = train()
    val_auc = test(val_loader)
    test_auc = test(test_loader)
    if val_auc > best_val_auc:
        best_val_auc = val_auc
        final_test_auc = test_auc
    print(f'Epoch: {epoch:02d}, Loss: {loss:.4f}, Val: {val_auc:.4f}, '
          f'Test: {test_auc:.4f}, Time: {time.perf_counter() - start:.1f}s')

print(f'Final Test AUC: {final_test_auc:.4f} (chance: 0.5)')
print(f'Total time: {time.perf_counter() - wall_clock_start:.1f}s')
