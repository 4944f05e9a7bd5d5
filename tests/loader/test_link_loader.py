r"""``FastLinkNeighborLoader``: PyG's ``LinkNeighborLoader`` contract on
homogeneous and heterogeneous graphs, and beyond the defaults: one tree per
label edge endpoint (``disjoint``), temporal label edges, strict
negatives."""
import pytest
import torch
from torch_geometric.data import Data, HeteroData
from torch_geometric.sampler import NegativeSampling
from torch_geometric.testing import MyFeatureStore, MyGraphStore

from pyg_fastload import FastLinkNeighborLoader

from ..helpers import random_graph, requires_torch_sparse
from ..sampling.test_temporal import RELATIONS, timed_hetero


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
    for a, b in zip(batches, again, strict=True):
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
          'the wrong length; label times without the graph\'s times',
    behaviour='an error naming the argument (not yet supported: naming '
              'what to use)')
def test_bad_label_edges_are_named():
    graph = random_graph()
    cases = [
        (dict(edge_label_index=torch.tensor([[0, 1], [2, 200]])),
         IndexError, r"'edge_label_index' holds destination node id 200, "
                     r"outside \[0, 200\)"),
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
    for batches in zip(*runs, strict=True):
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


def _hetero():
    from pyg_fastload.datasets import generate_hetero
    return generate_hetero('hetero-tiny')


@pytest.mark.parametrize('neg', [None, 'binary', 'triplet'])
@pytest.mark.reliability(
    fault='heterogeneous link batches whose label edges, negatives or '
          'sampled edges point at the wrong nodes of their types',
    behaviour="label edges map back through each type's n_id to the given "
              "edges, negatives are labelled 0 (triplet: in range), every "
              "sampled edge exists in its relation, seeds come first")
def test_hetero_label_edges_and_their_neighbourhoods(neg):
    data = _hetero()
    edge_type = ('author', 'writes', 'paper')
    src_type, _, dst_type = edge_type
    label = data[edge_type].edge_index[:, :150]
    neg_sampling = None if neg is None else NegativeSampling(
        neg, amount=2 if neg == 'triplet' else 1)
    loader = FastLinkNeighborLoader(
        data, [3, 2], edge_label_index=(edge_type, label), batch_size=50,
        neg_sampling=neg_sampling, shuffle=True,
        generator=torch.Generator().manual_seed(0))
    relations = {e: set(zip(*data[e].edge_index.tolist()))
                 for e in data.edge_types}
    seen = []
    for batch in loader:
        src_ids, dst_ids = batch[src_type].n_id, batch[dst_type].n_id
        input_id = batch[edge_type].input_id
        seen.append(input_id)
        given = label[:, input_id]
        if neg == 'triplet':
            assert torch.equal(src_ids[batch[src_type].src_index], given[0])
            assert torch.equal(dst_ids[batch[dst_type].dst_pos_index],
                               given[1])
            neg_index = batch[dst_type].dst_neg_index
            assert neg_index.shape == (input_id.numel(), 2)
            assert int(neg_index.max()) < dst_ids.numel()
        else:
            index = batch[edge_type].edge_label_index
            pos = index[:, :input_id.numel()]
            assert torch.equal(src_ids[pos[0]], given[0])
            assert torch.equal(dst_ids[pos[1]], given[1])
            if neg == 'binary':
                assert index.size(1) == 2 * input_id.numel()
                assert torch.equal(batch[edge_type].edge_label,
                                   torch.cat([torch.ones(input_id.numel()),
                                              torch.zeros(
                                                  input_id.numel())]))
        # every labelled source (negatives too) is a seed: first, distinct
        labelled = batch[src_type].src_index if neg == 'triplet' else \
            batch[edge_type].edge_label_index[0]
        seeds = torch.unique(src_ids[labelled])
        assert torch.equal(torch.sort(src_ids[:seeds.numel()]).values, seeds)
        for e in batch.edge_types:
            store = batch[e]
            if store.edge_index.numel():
                glob = torch.stack([batch[e[0]].n_id[store.edge_index[0]],
                                    batch[e[-1]].n_id[store.edge_index[1]]])
                assert set(zip(*glob.tolist())) <= relations[e], e
        assert torch.equal(batch[dst_type].x, data[dst_type].x[dst_ids])
    assert sorted(torch.cat(seen).tolist()) == list(range(150))


@requires_torch_sparse
def test_hetero_link_batches_have_pyg_attributes():
    from torch_geometric.loader import LinkNeighborLoader
    data = _hetero()
    edge_type = ('author', 'writes', 'paper')
    for neg in ('binary', 'triplet'):
        kwargs = dict(num_neighbors=[3, 2], batch_size=40, neg_sampling=neg,
                      edge_label_index=(edge_type, None))
        ours = next(iter(FastLinkNeighborLoader(data, **kwargs)))
        pyg = next(iter(LinkNeighborLoader(data, **kwargs)))
        assert set(ours.node_types) == set(pyg.node_types)
        for key in pyg.node_types + pyg.edge_types:
            extra = set(ours[key].keys()) - set(pyg[key].keys())
            # torch_sparse's hetero sampler gives no per-hop counts
            assert extra <= {'num_sampled_nodes', 'num_sampled_edges'}, key
            assert set(pyg[key].keys()) <= set(ours[key].keys()), key


def test_bad_hetero_label_edges_are_named():
    data = _hetero()
    cases = [
        (('author', 'reads', 'paper'), ValueError,
         r"names edge type \('author', 'reads', 'paper'\), which the graph "
         r"does not have"),
        ((('author', 'writes', 'paper'), torch.tensor([[0], [10**6]])),
         IndexError, r"destination node id 1000000, outside \[0, \d+\) for "
                     r"edge type \('author', 'writes', 'paper'\)"),
        (torch.tensor([[0], [1]]), ValueError,
         "of a HeteroData must name the edge type"),
    ]
    for label, error, match in cases:
        with pytest.raises(error, match=match):
            FastLinkNeighborLoader(data, [2], edge_label_index=label)
    # temporal sampling is disjoint by itself (as in PyG): the times are
    # looked for next
    with pytest.raises(ValueError, match="'time_attr='time'' is a tensor "
                       "of no node type and no edge type of the graph"):
        FastLinkNeighborLoader(data, [2], time_attr='time',
                               edge_label_index=('author', 'writes', 'paper'),
                               edge_label_time=torch.zeros(3))


@pytest.mark.reliability(
    fault="a link loader given a sampler (neighbor_sampler=) of the other "
          "kind of graph (homogeneous for a HeteroData, or the reverse)",
    behaviour="a ValueError naming 'neighbor_sampler' and the sampler to "
              "give; a sampler of the data's kind is drawn with")
def test_a_given_sampler_is_used_and_refused_on_a_hetero_graph():
    from torch_geometric.data import Data

    from pyg_fastload import FastNeighborSampler
    from pyg_fastload.sampling import HeteroNeighborSampler

    from ..helpers import random_hetero_graph
    gen = torch.Generator().manual_seed(0)
    data = Data(x=torch.randn(50, 4, generator=gen),
                edge_index=torch.randint(0, 50, (2, 300), generator=gen))
    sampler = FastNeighborSampler(data, num_neighbors=[2])
    loader = FastLinkNeighborLoader(data, num_neighbors=[5, 5],
                                    neighbor_sampler=sampler, batch_size=16)
    assert loader.link_sampler is sampler
    batch = next(iter(loader))
    assert len(batch.num_sampled_edges) == 1  # the sampler's one hop
    hetero = random_hetero_graph()
    edge_type = ('author', 'writes', 'paper')
    with pytest.raises(ValueError, match=r"'neighbor_sampler' \("
                       r"FastNeighborSampler\) samples a homogeneous graph, "
                       r"'data' is heterogeneous: give a sampler of its kind "
                       r"\(HeteroNeighborSampler\)"):
        FastLinkNeighborLoader(
            hetero, num_neighbors=[2], edge_label_index=edge_type,
            neighbor_sampler=sampler, batch_size=16)
    typed = HeteroNeighborSampler(hetero, num_neighbors=[1])
    loader = FastLinkNeighborLoader(hetero, num_neighbors=[5, 5],
                                    edge_label_index=edge_type,
                                    neighbor_sampler=typed, batch_size=16)
    assert loader.link_sampler is typed
    batch = next(iter(loader))  # the typed sampler's one hop
    assert all(len(n) == 1 for n in batch.num_sampled_edges_dict.values())
    with pytest.raises(ValueError, match=r"\(HeteroNeighborSampler\) "
                       r"samples a heterogeneous graph, 'data' is "
                       r"homogeneous: give a sampler of its kind "
                       r"\(FastNeighborSampler\)"):
        FastLinkNeighborLoader(data, num_neighbors=[2],
                               neighbor_sampler=typed, batch_size=16)


@pytest.mark.reliability(
    fault='`LinkNeighborLoader` on a graph with no edges '
          '(`Data(num_nodes=100)`, or `HeteroData(paper=dict(num_nodes=100))` '
          "with label edges `(('paper', 'paper'), index)`), `num_neighbors=[]`",
    behaviour="served as PyG serves it: batches of the label edges' "
              "endpoints alone (was: refused for lack of 'edge_index' or of "
              'a paper-to-paper relation)')
def test_link_batches_of_a_graph_without_edges():
    index = torch.randint(0, 100, (2, 100),
                          generator=torch.Generator().manual_seed(0))
    loader = FastLinkNeighborLoader(Data(num_nodes=100), num_neighbors=[],
                                    batch_size=20, edge_label_index=index)
    batches = list(loader)
    assert len(batches) == 5
    for batch in batches:
        assert batch.input_id.numel() == 20
        assert batch.edge_label_index.size(1) == 20
        assert batch.num_nodes == batch.edge_label_index.unique().numel()
    loader = FastLinkNeighborLoader(
        HeteroData(paper=dict(num_nodes=100)), num_neighbors=[],
        edge_label_index=(('paper', 'paper'), index), batch_size=20)
    batches = list(loader)
    assert len(batches) == 5
    for batch in batches:
        store = batch['paper', 'to', 'paper']
        assert store.input_id.numel() == 20
        assert store.edge_label_index.size(1) == 20
        assert batch['paper'].num_nodes == \
            store.edge_label_index.unique().numel()
    # a relation the graph lacks, named in full, is still a typo
    with pytest.raises(ValueError, match="names edge type .*'cites'"):
        FastLinkNeighborLoader(
            HeteroData(paper=dict(num_nodes=100)), num_neighbors=[],
            edge_label_index=(('paper', 'cites', 'paper'), index),
            batch_size=20)


BUYS = RELATIONS[0]       # user -> item: two node types
ALSO = RELATIONS[2]       # item -> item: one node type


def _label_trees(batch, edge_type, neg):
    r"""``(node type, local index, expected tree)`` of every label edge
    endpoint of a disjoint batch."""
    src_type, _, dst_type = edge_type
    if neg == 'triplet':
        src = batch[src_type].src_index
        num_pos = src.numel()
        dst_pos = batch[dst_type].dst_pos_index
        dst_neg = batch[dst_type].dst_neg_index.view(num_pos, -1)
        pos = torch.arange(num_pos)
        return [(src_type, src, pos), (dst_type, dst_pos, pos),
                (dst_type, dst_neg.reshape(-1),
                 pos.repeat_interleave(dst_neg.size(1)))]
    index = batch[edge_type].edge_label_index
    num_pos = batch[edge_type].input_id.numel()
    tree = torch.arange(index.size(1))
    # PyG's layout (pyg-lib's, checked by hand): the seeds are [sources,
    # destinations] and a seed's tree is its position modulo num_pos.
    return [(src_type, index[0], tree % num_pos),
            (dst_type, index[1], (tree + index.size(1)) % num_pos)]


@pytest.mark.parametrize('edge_type', [BUYS, ALSO])
@pytest.mark.parametrize('neg', [None, 'binary', 'binary-half', 'triplet'])
@pytest.mark.reliability(
    fault='disjoint heterogeneous link batches whose trees do not belong '
          'to their label edges',
    behaviour="every label edge endpoint roots the tree of its positive "
              "edge (PyG's batch % num_pos), sampled edges stay within one "
              "tree, positives map back to the given edges")
def test_disjoint_hetero_link_trees_belong_to_their_edges(edge_type, neg):
    data = timed_hetero(5)
    label = data[edge_type].edge_index[:, :60]
    amount = {'binary': 1, 'binary-half': 0.5, 'triplet': 2}
    neg_sampling = None if neg is None else NegativeSampling(
        neg.split('-')[0], amount=amount[neg])
    loader = FastLinkNeighborLoader(
        data, [3, 2], edge_label_index=(edge_type, label), batch_size=20,
        neg_sampling=neg_sampling, disjoint=True, shuffle=True,
        generator=torch.Generator().manual_seed(0))
    batches = list(loader)
    assert len(batches) == 3
    src_type, _, dst_type = edge_type
    for batch in batches:
        for node_type, local, tree in _label_trees(batch, edge_type, neg):
            assert torch.equal(batch[node_type].batch[local], tree)
        for e in RELATIONS:
            row, col = batch[e].edge_index
            assert torch.equal(batch[e[0]].batch[row],
                               batch[e[2]].batch[col]), e
        ids = batch[edge_type].input_id
        num_pos = ids.numel()
        if neg == 'triplet':
            src = batch[src_type].n_id[batch[src_type].src_index]
            dst = batch[dst_type].n_id[batch[dst_type].dst_pos_index]
        else:
            index = batch[edge_type].edge_label_index[:, :num_pos]
            src = batch[src_type].n_id[index[0]]
            dst = batch[dst_type].n_id[index[1]]
        assert torch.equal(torch.stack([src, dst]), label[:, ids])


@pytest.mark.parametrize('neg', ['binary', 'triplet'])
@pytest.mark.reliability(
    fault='a temporal heterogeneous link batch with a neighbour or a '
          'negative later than its label edge, or without the label times',
    behaviour="neighbours and negatives are at or before the label edge's "
              "time; the batch carries edge_label_time (binary) or "
              "seed_time (triplet)")
def test_temporal_hetero_link_batches_respect_label_times(neg):
    data = timed_hetero(6)
    label = data[BUYS].edge_index[:, :48]
    label_time = torch.randint(40, 100, (48, ),
                               generator=torch.Generator().manual_seed(1))
    loader = FastLinkNeighborLoader(
        data, [3, 2], edge_label_index=(BUYS, label),
        edge_label_time=label_time, time_attr='time', disjoint=True,
        neg_sampling=NegativeSampling(neg, amount=2), batch_size=16,
        generator=torch.Generator().manual_seed(2))
    for batch in loader:
        ids = batch[BUYS].input_id
        num_pos = ids.numel()
        if neg == 'binary':
            when = batch[BUYS].edge_label_time
            index = batch[BUYS].edge_label_index
            assert torch.equal(when, label_time[ids].repeat(3))
            neg_items = batch['item'].n_id[index[1, num_pos:]]
            neg_time = when[num_pos:]
        else:
            when = batch['user'].seed_time
            assert torch.equal(when, label_time[ids])
            assert torch.equal(batch['item'].seed_time, when)
            neg_index = batch['item'].dst_neg_index
            neg_items = batch['item'].n_id[neg_index.reshape(-1)]
            neg_time = when.repeat_interleave(neg_index.size(1))
        assert bool((data['item'].time[neg_items] <= neg_time).all())
        for e in RELATIONS:
            row, col = batch[e].edge_index
            tree = batch[e[2]].batch[col]
            nbr = data[e[0]].time[batch[e[0]].n_id[row]]
            assert bool((nbr <= label_time[ids][tree]).all()), e


@pytest.mark.parametrize('neg', ['binary', 'triplet'])
@pytest.mark.reliability(
    fault='strict heterogeneous negatives that are true edges of the '
          'relation',
    behaviour='no negative pair is an edge of the label relation')
def test_strict_hetero_negatives_are_never_edges(neg):
    data = timed_hetero(7, num_edges=700)  # about 58% of user-item pairs
    pairs = set(zip(*data[BUYS].edge_index.tolist()))
    loader = FastLinkNeighborLoader(
        data, [2], edge_label_index=BUYS, batch_size=100,
        neg_sampling=NegativeSampling(neg, amount=3), strict_negatives=True,
        generator=torch.Generator().manual_seed(3))
    checked = 0
    for batch in loader:
        users, items = batch['user'].n_id, batch['item'].n_id
        if neg == 'binary':
            num_pos = batch[BUYS].input_id.numel()
            index = batch[BUYS].edge_label_index[:, num_pos:]
            src, dst = users[index[0]], items[index[1]]
        else:
            dst_neg = batch['item'].dst_neg_index
            src = users[batch['user'].src_index].repeat_interleave(
                dst_neg.size(1))
            dst = items[dst_neg.reshape(-1)]
        hits = [p for p in zip(src.tolist(), dst.tolist()) if p in pairs]
        assert not hits
        checked += src.numel()
    assert checked == 3 * 700


@pytest.mark.reliability(
    fault='strict heterogeneous triplet negatives for a source linked to '
          'every destination loop or return a true edge',
    behaviour='an error naming the node and the fix')
def test_strict_hetero_negatives_name_a_source_without_non_edges():
    data = timed_hetero(8)
    every = torch.arange(40)
    data[BUYS].edge_index = torch.cat([data[BUYS].edge_index, torch.stack(
        [torch.zeros(40, dtype=torch.long), every])], dim=1)
    loader = FastLinkNeighborLoader(
        data, [2], edge_label_index=(BUYS, torch.tensor([[0], [3]])),
        neg_sampling=NegativeSampling('triplet'), strict_negatives=True)
    with pytest.raises(ValueError, match='source node 0 has an edge to '
                                         'every node'):
        next(iter(loader))
