r"""Temporal link regression: predicting users' ratings of movies, each
from the graph as it was just before the rating.

Mirrors PyG's ``examples/hetero/temporal_link_pred.py``: a heterogeneous
user-movie graph (MovieLens there) with a timestamp on every rating, split
80/10/10 by time; ``FastLinkNeighborLoader`` (PyG's ``LinkNeighborLoader``
there, which needs pyg-lib for temporal sampling; this loader does not)
samples, for each rating, only edges older than the rating
(``time_attr='time'``, ``edge_label_time = time - 1``, the most recent
neighbours first with ``temporal_strategy='last'``); a GraphSAGE encoder made
heterogeneous by ``to_hetero`` and an MLP decoder regress the rating (MSE),
reported as RMSE.

The ratings are generated (no download), MovieLens-like: each user and movie
has a hidden taste vector, a rating (0 to 5) follows their agreement, movies'
popularity is skewed, and movies carry features that reveal their taste
vector through noise (as the sentence embeddings of MovieLens' titles do);
users have no features: each gets a learned embedding (PyG's example gives
them one-hot features, which in temporal batches, where every rating has a
tree of its own, would be a large dense input). The default size (1,000
users, 4,000 movies, 50,000 ratings: half of MovieLens' small release)
trains in a few minutes on a laptop CPU; every rating samples its own
neighbourhood (``disjoint``, as temporal sampling needs), so a batch holds
up to 61 nodes per endpoint with the default fan-outs ``[10, 5]``.

    python examples/temporal_link_pred.py
    python examples/temporal_link_pred.py --tiny     # 3,000 ratings, seconds
"""
import argparse
import time

import torch
import torch.nn.functional as F
from torch.nn import Linear

from torch_geometric import seed_everything
from torch_geometric.data import HeteroData
from torch_geometric.nn import SAGEConv, to_hetero

# was: from torch_geometric.loader import LinkNeighborLoader
from pyg_fastload import FastLinkNeighborLoader

parser = argparse.ArgumentParser(
    description=__doc__.split('\n\n')[0],
    formatter_class=argparse.ArgumentDefaultsHelpFormatter)
parser.add_argument('--num_users', type=int, default=1_000)
parser.add_argument('--num_movies', type=int, default=4_000)
parser.add_argument('--num_ratings', type=int, default=50_000)
parser.add_argument('--tiny', action='store_true',
                    help='100 users, 200 movies, 3,000 ratings')
parser.add_argument('--epochs', type=int, default=None,
                    help='3, or 10 with --tiny')
parser.add_argument('--num_neighbors', type=int, nargs='+', default=[10, 5],
                    help="fan-out per layer (PyG's example: 20 10)")
parser.add_argument('--batch_size', type=int, default=None,
                    help='1024, or 256 with --tiny')
parser.add_argument('--hidden_channels', type=int, default=32)
parser.add_argument('--lr', type=float, default=0.01)
parser.add_argument('--seed', type=int, default=0)
args = parser.parse_args()
if args.tiny:
    args.num_users, args.num_movies, args.num_ratings = 100, 200, 3_000
if args.epochs is None:
    args.epochs = 10 if args.tiny else 3
if args.batch_size is None:
    args.batch_size = 256 if args.tiny else 1024

wall_clock_start = time.perf_counter()
seed_everything(args.seed)


def generate_ratings(num_users, num_movies, num_ratings, dim=8,
                     num_features=32):
    r"""A MovieLens-like HeteroData: users rate movies (0 to 5) at given
    times; ratings follow the agreement of hidden taste vectors."""
    user_taste = torch.randn(num_users, dim)
    movie_taste = torch.randn(num_movies, dim)
    # Movie features: a noisy linear view of the movie's taste vector.
    movie_x = movie_taste @ torch.randn(dim, num_features)
    movie_x = movie_x / dim**0.5 + 0.5 * torch.randn(num_movies, num_features)

    # Who rates what: active users rate more often, popular movies are
    # rated more often, and users pick movies that suit their taste (the
    # best of 8 candidates by taste and chance), so the movies a user rated
    # tell the model about the user.
    user_weight = torch.rand(num_users) + 0.2
    movie_weight = 1.0 / torch.arange(1, num_movies + 1).float()**0.8
    movie_weight = movie_weight[torch.randperm(num_movies)]
    src = torch.multinomial(user_weight, num_ratings, replacement=True)
    candidates = torch.multinomial(movie_weight, num_ratings * 8,
                                   replacement=True).view(num_ratings, 8)
    suits = (user_taste[src].unsqueeze(1) * movie_taste[candidates]).sum(-1)
    suits = suits + torch.randn(num_ratings, 8)
    dst = candidates.gather(1, suits.argmax(1, keepdim=True)).view(-1)
    pair = torch.unique(src * num_movies + dst)  # one rating per pair
    src, dst = pair // num_movies, pair % num_movies

    agreement = (user_taste[src] * movie_taste[dst]).sum(-1) / dim**0.5
    rating = (2.0 + 1.5 * agreement + 0.5 * torch.randn(src.numel()))
    rating = rating.round().clamp(0, 5).long()
    # Seconds over about three years, ratings in random order of time:
    rating_time = torch.randint(0, 100_000_000, (src.numel(), ))

    data = HeteroData()
    data['user'].num_nodes = num_users  # no user features (see Model)
    data['movie'].x = movie_x
    data['user', 'rates', 'movie'].edge_index = torch.stack([src, dst])
    data['user', 'rates', 'movie'].edge_label = rating
    data['user', 'rates', 'movie'].time = rating_time
    # The reverse relation for message passing (PyG's example gets it from
    # T.ToUndirected), with the ratings' times but not their labels:
    data['movie', 'rev_rates', 'user'].edge_index = torch.stack([dst, src])
    data['movie', 'rev_rates', 'user'].time = rating_time
    return data


data = generate_ratings(args.num_users, args.num_movies, args.num_ratings)
print(data)

# Perform an 80/10/10 temporal link-level split:
perm = torch.argsort(data['user', 'movie'].time)
train_idx = perm[:int(0.8 * perm.size(0))]
val_idx = perm[int(0.8 * perm.size(0)):int(0.9 * perm.size(0))]
test_idx = perm[int(0.9 * perm.size(0)):]

edge_index = data['user', 'movie'].edge_index
kwargs = dict(
    data=data,
    num_neighbors=args.num_neighbors,
    batch_size=args.batch_size,
    time_attr='time',  # sample only edges not later than the seed's time
    temporal_strategy='last',  # the most recent ones
)


def get_loader(idx, shuffle=False):
    return FastLinkNeighborLoader(
        edge_label_index=(('user', 'movie'), edge_index[:, idx]),
        edge_label=data['user', 'movie'].edge_label[idx],
        # `- 1`: the rating being predicted is not in its own sample
        edge_label_time=data['user', 'movie'].time[idx] - 1,
        shuffle=shuffle,
        **kwargs,
    )


train_loader = get_loader(train_idx, shuffle=True)
val_loader = get_loader(val_idx)
test_loader = get_loader(test_idx)


class GNNEncoder(torch.nn.Module):
    def __init__(self, hidden_channels, out_channels):
        super().__init__()
        self.conv1 = SAGEConv((-1, -1), hidden_channels)
        self.conv2 = SAGEConv((-1, -1), out_channels)

    def forward(self, x, edge_index):
        x = self.conv1(x, edge_index).relu()
        x = self.conv2(x, edge_index)
        return x


class EdgeDecoder(torch.nn.Module):
    def __init__(self, hidden_channels):
        super().__init__()
        self.lin1 = Linear(2 * hidden_channels, hidden_channels)
        self.lin2 = Linear(hidden_channels, 1)

    def forward(self, z_dict, edge_label_index):
        row, col = edge_label_index
        z = torch.cat([z_dict['user'][row], z_dict['movie'][col]], dim=-1)
        z = self.lin1(z).relu()
        z = self.lin2(z)
        return z.view(-1)


class Model(torch.nn.Module):
    def __init__(self, hidden_channels):
        super().__init__()
        self.user_emb = torch.nn.Embedding(data['user'].num_nodes,
                                           hidden_channels)
        self.encoder = GNNEncoder(hidden_channels, hidden_channels)
        self.encoder = to_hetero(self.encoder, data.metadata(), aggr='sum')
        self.decoder = EdgeDecoder(hidden_channels)

    def forward(self, batch):
        x_dict = {'user': self.user_emb(batch['user'].n_id),
                  'movie': batch['movie'].x}
        z_dict = self.encoder(x_dict, batch.edge_index_dict)
        edge_label_index = batch['user', 'movie'].edge_label_index
        return self.decoder(z_dict, edge_label_index)


model = Model(hidden_channels=args.hidden_channels)
with torch.no_grad():  # Initialize lazy parameters with one batch:
    model(next(iter(train_loader)))
optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)


def train():
    model.train()
    total_loss = total_examples = 0
    for batch in train_loader:
        optimizer.zero_grad()
        pred = model(batch)
        target = batch['user', 'movie'].edge_label.float()
        loss = F.mse_loss(pred, target)
        loss.backward()
        optimizer.step()

        total_loss += loss.item() * pred.size(0)
        total_examples += pred.size(0)
    return total_loss / total_examples


@torch.no_grad()
def test(loader):
    model.eval()
    preds, targets = [], []
    for batch in loader:
        pred = model(batch).clamp(min=0, max=5)
        preds.append(pred)
        targets.append(batch['user', 'movie'].edge_label.float())

    pred = torch.cat(preds, dim=0)
    target = torch.cat(targets, dim=0)
    return float((pred - target).pow(2).mean().sqrt())


for epoch in range(1, args.epochs + 1):
    start = time.perf_counter()
    loss = train()
    val_rmse = test(val_loader)
    test_rmse = test(test_loader)
    print(f'Epoch: {epoch:02d}, Loss: {loss:.4f}, Val RMSE: {val_rmse:.4f}, '
          f'Test RMSE: {test_rmse:.4f}, '
          f'Time: {time.perf_counter() - start:.1f}s')

# The baseline a model must beat: always predicting the mean training rating.
label = data['user', 'movie'].edge_label.float()
baseline = float((label[test_idx] - label[train_idx].mean()).pow(2).mean()
                 .sqrt())
print(f'Final Test RMSE: {test_rmse:.4f} (predicting the mean rating: '
      f'{baseline:.4f})')
print(f'Total time: {time.perf_counter() - wall_clock_start:.1f}s')
