r"""``FastLinkNeighborLoader``: PyG's ``LinkNeighborLoader`` contract on
homogeneous graphs."""
import pytest
import torch
from torch_geometric.data import HeteroData
from torch_geometric.sampler import NegativeSampling
from torch_geometric.testing import MyFeatureStore, MyGraphStore

from pyg_fastload import FastLinkNeighborLoader

from ..conftest import random_graph, requires_torch_sparse


def edge_set(graph):
    return set(zip(*graph.edge_index.tolist()))


def loader(graph, seed=0, **kwargs):
    if 'edge_label_index' not in kwargs:
        kwargs['edge_label_index'] = graph.edge_index[:, :120]
    kwargs.setdefault('batch_size', 40)
    return FastLinkNeighborLoader(
        graph, [3, 2], generator=torch.Generator().manual_seed(seed),
        **kwargs)


def test_label_edges_and_their_sampled_neighbourhoods():
    graph = random_graph()
    edges = edge_set(graph)
    seen = []
    for batch in loader(graph):
        label = graph.edge_index[:, batch.input_id]
        # label edges in batch-local ids, their endpoints among the seeds
        assert torch.equal(batch.n_id[batch.edge_label_index], label)
        seeds = torch.unique(label.reshape(-1))
        assert set(batch.n_id[:seeds.numel()].tolist()) == set(
            seeds.tolist())
        # every sampled edge exists, with its original id
        glob = batch.n_id[batch.edge_index]
        assert set(zip(*glob.tolist())) <= edges
        assert torch.equal(graph.edge_index[:, batch.e_id], glob)
        assert torch.equal(batch.x, graph.x[batch.n_id])
        seen.append(batch.input_id)
    assert torch.equal(torch.cat(seen), torch.arange(120))


@pytest.mark.reliability(
    fault='binary negatives mislabelled, or drawn from the global RNG',
    behaviour='positives then negatives labelled 0; the generator fixes '
              'them')
def test_binary_negatives_are_labelled_zero_and_seeded():
    graph = random_graph()
    batches = list(loader(graph, neg_sampling='binary'))
    again = list(loader(graph, neg_sampling=NegativeSampling('binary')))
    other = list(loader(graph, seed=1, neg_sampling='binary'))
    for a, b in zip(batches, again):
        assert torch.equal(a.n_id[a.edge_label_index],
                           b.n_id[b.edge_label_index])
    size = batches[0].input_id.numel()
    first = batches[0]
    assert torch.equal(first.edge_label, torch.cat([torch.ones(size),
                                                    torch.zeros(size)]))
    assert not torch.equal(first.n_id[first.edge_label_index],
                           other[0].n_id[other[0].edge_label_index])
    # given labels: shifted so that 0 means a negative (PyG's rule)
    labels = torch.randint(0, 3, (120, ))
    batch = next(iter(loader(graph, edge_label=labels,
                             neg_sampling_ratio=2.0)))
    assert torch.equal(batch.edge_label[:40], labels[:40] + 1)
    assert torch.equal(batch.edge_label[40:], torch.zeros(80,
                                                          dtype=torch.long))


def test_triplet_negatives_index_the_batch():
    graph = random_graph()
    weight = torch.zeros(graph.num_nodes)
    weight[7] = 1.0  # every negative destination is node 7
    batch = next(iter(loader(graph, neg_sampling=NegativeSampling(
        'triplet', amount=3, dst_weight=weight))))
    label = graph.edge_index[:, batch.input_id]
    assert torch.equal(batch.n_id[batch.src_index], label[0])
    assert torch.equal(batch.n_id[batch.dst_pos_index], label[1])
    assert batch.dst_neg_index.shape == (40, 3)
    assert bool((batch.n_id[batch.dst_neg_index] == 7).all())
    with pytest.raises(ValueError, match=r"'neg_sampling.dst_weight' has 5 "
                       r"entries, the graph 200 nodes"):
        next(iter(loader(graph, neg_sampling=NegativeSampling(
            'triplet', dst_weight=torch.ones(5)))))


def test_disjoint_trees_per_label_endpoint():
    graph = random_graph()
    batch = next(iter(loader(graph, disjoint=True, neg_sampling='binary')))
    assert torch.equal(batch.edge_label_index,
                       torch.arange(160).view(2, -1))
    assert int(batch.batch.max()) < 40  # trees of the positive edges


def test_stores_serve_the_same_label_edges_and_negatives():
    graph = random_graph()
    feature_store, graph_store = MyFeatureStore(), MyGraphStore()
    feature_store.put_tensor(graph.x, group_name=None, attr_name='x',
                             index=None)
    graph_store.put_edge_index(graph.edge_index, edge_type=None,
                               layout='coo',
                               size=(graph.num_nodes, graph.num_nodes))
    edges = edge_set(graph)
    expected = list(loader(graph, neg_sampling='binary'))
    got = list(loader((feature_store, graph_store), neg_sampling='binary',
                      edge_label_index=graph.edge_index[:, :120]))
    assert len(expected) == len(got) == 3
    for a, b in zip(expected, got):
        # the same positives and negatives (neighbour lists may be in
        # another order in the store, so the neighbours may differ)
        assert torch.equal(a.n_id[a.edge_label_index],
                           b.n_id[b.edge_label_index])
        assert torch.equal(b.x, graph.x[b.n_id])
        assert set(zip(*b.n_id[b.edge_index].tolist())) <= edges


@requires_torch_sparse
def test_batches_have_pyg_link_loader_attributes():
    from torch_geometric.loader import LinkNeighborLoader
    graph = random_graph()
    for neg in (None, 'binary', NegativeSampling('triplet', amount=2)):
        kwargs = dict(edge_label_index=graph.edge_index[:, :64],
                      batch_size=32, neg_sampling=neg)
        ours = next(iter(FastLinkNeighborLoader(graph, [3, 2], **kwargs)))
        pyg = next(iter(LinkNeighborLoader(graph, [3, 2], **kwargs)))
        # ours adds the per-hop counts (its sampler has them)
        assert set(pyg.keys()) == set(ours.keys()) - {
            'num_sampled_nodes', 'num_sampled_edges'}
        for key in ('edge_label_index', 'edge_label', 'src_index',
                    'dst_pos_index', 'dst_neg_index', 'input_id'):
            if key in pyg:
                assert ours[key].shape == pyg[key].shape, key


@pytest.mark.reliability(
    fault='label edges out of range, of the wrong shape or with labels of '
          'the wrong length; label times without the graph\'s times; '
          'heterogeneous link loading',
    behaviour='an error naming the argument (not yet supported: naming '
              'what to use)')
def test_bad_label_edges_are_named():
    graph = random_graph()
    cases = [
        (dict(edge_label_index=torch.tensor([[0, 1], [2, 200]])),
         IndexError, r"'edge_label_index' holds node id 200, outside "
                     r"\[0, 200\)"),
        (dict(edge_label_index=torch.zeros(3, 4, dtype=torch.long)),
         ValueError, r"'edge_label_index' has shape \[3, 4\]"),
        (dict(edge_label=torch.ones(5)), ValueError,
         r"'edge_label' has 5 entries for 120 label edges"),
        (dict(edge_label_time=torch.ones(120)), ValueError,
         "needs both 'edge_label_time'.*got only 'edge_label_time'"),
        (dict(edge_label=torch.ones(120), neg_sampling='triplet'),
         ValueError, "'edge_label' needs to be undefined"),
    ]
    for kwargs, error, match in cases:
        with pytest.raises(error, match=match):
            loader(graph, **kwargs)
    hetero = HeteroData()
    hetero['a'].x = torch.zeros(3, 1)
    hetero['a', 'to', 'a'].edge_index = torch.tensor([[0], [1]])
    with pytest.raises(NotImplementedError, match='homogeneous graphs so '
                       "far; use PyG's LinkNeighborLoader"):
        FastLinkNeighborLoader(hetero, [2], edge_label_index=(
            ('a', 'to', 'a'), None))


@pytest.mark.reliability(
    fault='a strict negative that is a true edge, or a source linked to '
          'every node',
    behaviour='no negative pair is an edge; an error names the node')
def test_strict_negatives_are_never_edges():
    from torch_geometric.data import Data
    # a dense graph: most random pairs are edges
    n = 12
    src, dst = torch.meshgrid(torch.arange(n), torch.arange(n),
                              indexing='ij')
    keep = (src + 2 * dst) % 5 != 0
    graph = Data(x=torch.randn(n, 2), edge_index=torch.stack(
        [src[keep], dst[keep]]))
    edges = edge_set(graph)
    for neg in ('binary', NegativeSampling('triplet', amount=4)):
        for batch in loader(graph, neg_sampling=neg, strict_negatives=True,
                            edge_label_index=graph.edge_index[:, :60],
                            batch_size=20):
            if neg == 'binary':
                pairs = batch.n_id[batch.edge_label_index[:, 20:]]
            else:
                pairs = torch.stack([
                    batch.n_id[batch.src_index].repeat_interleave(4),
                    batch.n_id[batch.dst_neg_index].view(-1)])
            assert not set(zip(*pairs.tolist())) & edges
    # without strict, this graph's negatives hit true edges
    batch = next(iter(loader(graph, neg_sampling='binary',
                             edge_label_index=graph.edge_index[:, :60],
                             batch_size=60)))
    pairs = batch.n_id[batch.edge_label_index[:, 60:]]
    assert set(zip(*pairs.tolist())) & edges
    full = Data(x=torch.randn(3, 1), edge_index=torch.tensor(
        [[0, 0, 0, 1], [0, 1, 2, 2]]))
    with pytest.raises(ValueError, match='source node 0 has an edge to '
                       'every node'):
        next(iter(loader(full, neg_sampling='triplet', strict_negatives=True,
                         edge_label_index=full.edge_index[:, :1])))


@pytest.mark.reliability(
    fault='a pipelined link loader whose batches differ from sequential '
          'ones, or a tiered feature store serving other rows to link '
          'batches',
    behaviour='pipelined, sequential and tiered-store (host cache) link '
              'batches are equal: nodes, edges, labels and features')
def test_link_batches_pipelined_and_through_tiers_are_equal():
    from pyg_fastload import FeatureCache, stores_from_data
    graph = random_graph()
    del graph.edge_attr  # the tiers hold node features
    stores = stores_from_data(graph, FeatureCache(host_budget=0.3))
    label = graph.edge_index[:, :120]
    runs = [list(loader(data, shuffle=True, pipeline=flag,
                        neg_sampling='binary', edge_label_index=label))
            for data, flag in ((graph, False), (graph, True),
                               (stores, True))]
    assert len(runs[0]) == 3
    for batches in zip(*runs):
        first = batches[0]
        for other in batches[1:]:
            for key in ('n_id', 'e_id', 'edge_index', 'edge_label_index',
                        'edge_label', 'input_id'):
                assert torch.equal(first[key], other[key]), key
            assert torch.equal(other.x, graph.x[other.n_id])
    served = stores[0].stats()['x']  # requests of one pass, both tiers
    assert served['host']['hits'] > 0 and served['storage']['hits'] > 0
    assert served['host']['requests'] == sum(
        b.num_nodes for b in runs[2])
