r"""``FastNeighborLoader`` on a ``HeteroData``: PyG's batch layout, the
input forms ``NeighborLoader`` accepts, pipelined equal to sequential, and
a hetero model trained on the batches with per-layer trimming."""
import pytest
import torch
import torch.nn.functional as F

from pyg_fastload import FastNeighborLoader

from ..helpers import random_hetero_graph, requires_torch_sparse

PAPER = 'paper'


def _loader(data, **kwargs):
    kwargs.setdefault('input_nodes', (PAPER, data[PAPER].train_mask))
    return FastNeighborLoader(data, [4, 3], batch_size=16, shuffle=True,
                              generator=torch.Generator().manual_seed(2),
                              **kwargs)


def test_batches_carry_pygs_attributes_per_type(hetero_graph):
    data = hetero_graph
    seeds = data[PAPER].train_mask.nonzero().view(-1)
    batches = list(_loader(data, pipeline=False))
    assert len(batches) == -(-seeds.numel() // 16)
    seen = []
    for batch in batches:
        paper = batch[PAPER]
        assert paper.batch_size == paper.input_id.numel()
        # from a mask, PyG's input_id are the seeds' node ids
        assert torch.equal(paper.n_id[:paper.batch_size], paper.input_id)
        seen += paper.input_id.tolist()
        for node_type in data.node_types:
            store = batch[node_type]
            for key in ('x', 'y', 'train_mask'):
                if key in data[node_type]:
                    assert torch.equal(store[key],
                                       data[node_type][key][store.n_id])
            assert sum(store.num_sampled_nodes) == store.n_id.numel()
        assert 'x' not in batch['institution']  # declared, not faked
        for edge_type in data.edge_types:
            src, _, dst = edge_type
            store = batch[edge_type]
            original = data[edge_type].edge_index[:, store.e_id]
            assert torch.equal(batch[src].n_id[store.edge_index[0]],
                               original[0])
            assert torch.equal(batch[dst].n_id[store.edge_index[1]],
                               original[1])
            assert sum(store.num_sampled_edges) == store.e_id.numel()
    assert sorted(seen) == seeds.tolist()  # each seed once


def test_pipelined_batches_equal_sequential_ones(hetero_graph):
    runs = [list(_loader(hetero_graph, pipeline=p)) for p in (False, True)]
    for a, b in zip(*runs, strict=True):
        for node_type in hetero_graph.node_types:
            assert torch.equal(a[node_type].n_id, b[node_type].n_id)
        for edge_type in hetero_graph.edge_types:
            assert torch.equal(a[edge_type].edge_index,
                               b[edge_type].edge_index)


def test_worker_processes_sample_hetero_batches(hetero_graph):
    loader = FastNeighborLoader(hetero_graph, [3, 2], input_nodes=PAPER,
                                batch_size=50, num_workers=2)
    batches = list(loader)
    assert sum(b[PAPER].batch_size for b in batches) == 120
    for batch in batches:
        for node_type in ('paper', 'author'):
            store = batch[node_type]
            assert torch.equal(store.x, hetero_graph[node_type].x[store.n_id])
        writes = batch['author', 'writes', 'paper']
        original = hetero_graph['author', 'writes', 'paper'].edge_index
        assert torch.equal(original[:, writes.e_id], torch.stack([
            batch['author'].n_id[writes.edge_index[0]],
            batch[PAPER].n_id[writes.edge_index[1]]]))


def test_input_node_forms(hetero_graph):
    whole = list(FastNeighborLoader(hetero_graph, [2], input_nodes=PAPER,
                                    batch_size=200))
    assert whole[0][PAPER].batch_size == 120
    ids = torch.tensor([7, 3, 99])
    batch = next(iter(FastNeighborLoader(hetero_graph, [2], batch_size=3,
                                         input_nodes=(PAPER, ids))))
    assert torch.equal(batch[PAPER].n_id[:3], ids)
    author = next(iter(FastNeighborLoader(hetero_graph, [2], batch_size=4,
                                          input_nodes=('author', None))))
    assert author['author'].batch_size == 4
    assert 'batch_size' not in author[PAPER]


@pytest.mark.reliability(
    fault="hetero 'input_nodes' of an unknown type, without a type, or a "
          "mask or ids that do not fit the type",
    behaviour='an error naming the node type and the fix')
@pytest.mark.parametrize('kwargs, error, match', [
    ({'input_nodes': 'venue'}, ValueError, "node type 'venue', which the "
     "graph does not have"),
    ({'input_nodes': None}, ValueError, "must name the seeds' node type"),
    ({'input_nodes': (PAPER, torch.ones(5, dtype=torch.bool))}, ValueError,
     "mask of length 5, but node type 'paper' has 120 nodes"),
    ({'input_nodes': (PAPER, torch.tensor([120]))}, IndexError,
     r"node id 120, outside \[0, 120\) for node type 'paper'"),
])
def test_bad_input_nodes_name_the_type(hetero_graph, kwargs, error, match):
    with pytest.raises(error, match=match):
        FastNeighborLoader(hetero_graph, [2], **kwargs)


@pytest.mark.reliability(
    fault="a node type's features with the wrong row count",
    behaviour='an error naming the type, the attribute and both counts')
def test_features_with_the_wrong_row_count_are_named():
    data = random_hetero_graph()
    data['author'].x = torch.randn(79, 6)
    data['author'].num_nodes = 80
    with pytest.raises(ValueError, match=r"data\['author'\]\.x has 79 rows "
                       r"but node type 'author' has 80 nodes"):
        FastNeighborLoader(data, [2], input_nodes=PAPER)


def test_a_hetero_model_trains_with_trimming():
    from torch_geometric.nn import HeteroConv, SAGEConv
    from torch_geometric.utils import trim_to_layer

    data = random_hetero_graph()
    data['institution'].x = torch.zeros(10, 6)  # every type needs inputs
    # learnable labels: the class is the sign pattern of two features
    x = data[PAPER].x
    data[PAPER].y = (x[:, 0] > 0).long() * 2 + (x[:, 1] > 0).long()

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.convs = torch.nn.ModuleList([HeteroConv(
                {e: SAGEConv((-1, -1), width) for e in data.edge_types})
                for width in (32, 4)])

        def forward(self, batch):
            x, edges = batch.x_dict, batch.edge_index_dict
            for i, conv in enumerate(self.convs):
                x, edges, _ = trim_to_layer(
                    i, batch.num_sampled_nodes_dict,
                    batch.num_sampled_edges_dict, x, edges)
                x = conv(x, edges)
                if i == 0:
                    x = {key: value.relu() for key, value in x.items()}
            return x[PAPER]

    torch.manual_seed(0)
    model = Net()
    loader = _loader(data)
    model(next(iter(loader)))  # lazy parameters
    optim = torch.optim.Adam(model.parameters(), lr=0.01)
    losses = []
    for _ in range(15):
        total = 0.0
        for batch in loader:
            size = batch[PAPER].batch_size
            loss = F.cross_entropy(model(batch)[:size],
                                   batch[PAPER].y[:size])
            optim.zero_grad()
            loss.backward()
            optim.step()
            total += loss.item()
        losses.append(total)
    assert losses[-1] < 0.5 * losses[0]


def _stores(data, ours: bool):
    from torch_geometric.testing import MyFeatureStore, MyGraphStore

    from pyg_fastload.storage import CSCGraphStore, TieredFeatureStore
    features = TieredFeatureStore() if ours else MyFeatureStore()
    graph = CSCGraphStore() if ours else MyGraphStore()
    for node_type in data.node_types:
        for key, value in data[node_type].items():
            if isinstance(value, torch.Tensor):
                features.put_tensor(value, group_name=node_type,
                                    attr_name=key, index=None)
    for edge_type in data.edge_types:
        src, _, dst = edge_type
        graph.put_edge_index(data[edge_type].edge_index,
                             edge_type=edge_type, layout='coo',
                             size=(data[src].num_nodes, data[dst].num_nodes))
    return features, graph


@pytest.mark.parametrize('ours', [True, False])
def test_stores_give_the_batches_of_the_hetero_data(hetero_graph, ours):
    # pyg_fastload's stores, and PyG's own (its remote-backend contract)
    kwargs = dict(input_nodes=(PAPER, torch.arange(40)), batch_size=16)
    a = list(FastNeighborLoader(_stores(hetero_graph, ours), [3, 2],
                                generator=torch.Generator().manual_seed(4),
                                **kwargs))
    b = list(FastNeighborLoader(hetero_graph, [3, 2],
                                generator=torch.Generator().manual_seed(4),
                                **kwargs))
    assert len(a) == len(b) == 3
    for x, y in zip(a, b):
        for node_type in hetero_graph.node_types:
            assert torch.equal(x[node_type].n_id, y[node_type].n_id)
            if 'x' in y[node_type]:
                assert torch.equal(x[node_type].x, y[node_type].x)
        for edge_type in hetero_graph.edge_types:
            assert torch.equal(x[edge_type].edge_index,
                               y[edge_type].edge_index)
            assert torch.equal(x[edge_type].e_id, y[edge_type].e_id)
        assert x[PAPER].batch_size == y[PAPER].batch_size


@requires_torch_sparse
def test_batches_have_the_attributes_of_pygs(hetero_graph):
    from torch_geometric.loader import NeighborLoader
    kwargs = dict(input_nodes=(PAPER, torch.arange(8)), batch_size=8)
    ours = next(iter(FastNeighborLoader(hetero_graph, [3, 2], **kwargs)))
    theirs = next(iter(NeighborLoader(hetero_graph, [3, 2], **kwargs)))
    for key in hetero_graph.node_types + hetero_graph.edge_types:
        # torch_sparse's sampler reports no per-hop counts; ours does
        assert set(theirs[key].keys()) <= set(ours[key].keys())
        assert set(ours[key].keys()) - set(theirs[key].keys()) <= {
            'num_sampled_nodes', 'num_sampled_edges'}
