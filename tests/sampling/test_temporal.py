r"""Temporal sampling (``time_attr``), on homogeneous and heterogeneous
graphs: neighbours never later than their seed's time (per relation),
``'last'`` takes the most recent, types without times unconstrained, and
loaders' temporal arguments checked."""
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch_geometric.data import Data, HeteroData
from torch_geometric.sampler import NodeSamplerInput

from pyg_fastload import (
    FastLinkNeighborLoader,
    FastNeighborLoader,
    FastNeighborSampler,
)
from pyg_fastload.sampling import HeteroNeighborSampler


def timed_graph(num_nodes=60, num_edges=500, seed=0, level='node'):
    gen = torch.Generator().manual_seed(seed)
    graph = Data(x=torch.randn(num_nodes, 3, generator=gen),
                 edge_index=torch.randint(num_nodes, (2, num_edges),
                                          generator=gen),
                 num_nodes=num_nodes)
    count = num_nodes if level == 'node' else num_edges
    graph.time = torch.randint(0, 100, (count, ), generator=gen)
    return graph


def neighbour_times(graph, out, level):
    r"""The time of every sampled edge's source (node-level) or of the
    edge itself, and the seed time of the tree it lies in."""
    if level == 'node':
        return graph.time[out.node[out.row]]
    return graph.time[out.edge]


@pytest.mark.reliability(
    fault='a temporal sample holding a neighbour later than its seed time '
          '(node- or edge-level times, any hop, uniform or last)',
    behaviour='every sampled neighbour is at or before the time of the '
              'seed whose tree it joins')
@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**16), level=st.sampled_from(['node', 'edge']),
       strategy=st.sampled_from(['uniform', 'last']),
       fanout=st.sampled_from([[2, 2], [-1], [3, -1]]))
def test_no_neighbour_is_later_than_its_seed(seed, level, strategy, fanout):
    graph = timed_graph(seed=seed, level=level)
    sampler = FastNeighborSampler(graph, fanout, time_attr='time',
                                  disjoint=True, temporal_strategy=strategy)
    gen = torch.Generator().manual_seed(seed)
    seeds = torch.randint(60, (12, ), generator=gen)
    times = torch.randint(0, 100, (12, ), generator=gen)
    out = sampler.sample_from_nodes(NodeSamplerInput(None, seeds, times),
                                    generator=gen)
    seed_time = times[out.batch[out.col]]
    assert bool((neighbour_times(graph, out, level) <= seed_time).all())
    # trees are the seeds' own: every edge joins two nodes of one tree
    assert torch.equal(out.batch[out.row], out.batch[out.col])


@pytest.mark.reliability(
    fault='a temporal filter that drops valid neighbours, or "last" that '
          'is not the most recent',
    behaviour='fan-out -1 gives exactly the in-neighbours at or before the '
              'seed time; "last" with fan-out k gives the k latest of them')
@pytest.mark.parametrize('level', ['node', 'edge'])
def test_valid_neighbours_all_found_and_last_is_latest(level):
    graph = timed_graph(level=level)
    src, dst = graph.edge_index
    edge_time = graph.time[src] if level == 'node' else graph.time
    seeds = torch.arange(40)
    times = torch.randint(0, 100, (40, ),
                          generator=torch.Generator().manual_seed(1))
    inputs = NodeSamplerInput(None, seeds, times)
    every = FastNeighborSampler(graph, [-1], time_attr='time',
                                disjoint=True).sample_from_nodes(inputs)
    last = FastNeighborSampler(graph, [2], time_attr='time', disjoint=True,
                               temporal_strategy='last'
                               ).sample_from_nodes(inputs)
    for i in range(40):
        valid = ((dst == i) & (edge_time <= times[i])).nonzero().view(-1)
        got = every.edge[every.batch[every.col] == i]
        assert sorted(got.tolist()) == sorted(valid.tolist())
        latest = torch.sort(edge_time[valid], descending=True).values[:2]
        picked = last.edge[last.batch[last.col] == i]
        assert sorted(edge_time[picked].tolist()) == sorted(latest.tolist())


def test_uniform_draws_every_valid_neighbour_evenly():
    # node 0 has 6 in-neighbours at times 0..5; seed time 3: 4 are valid
    graph = Data(x=torch.zeros(7, 1), edge_index=torch.tensor(
        [[1, 2, 3, 4, 5, 6], [0, 0, 0, 0, 0, 0]]),
        time=torch.tensor([9, 0, 1, 2, 3, 4, 5]))
    sampler = FastNeighborSampler(graph, [1], time_attr='time', disjoint=True)
    inputs = NodeSamplerInput(None, torch.zeros(4000, dtype=torch.long),
                              torch.full((4000, ), 3))
    out = sampler.sample_from_nodes(
        inputs, generator=torch.Generator().manual_seed(0))
    counts = torch.bincount(out.node[out.row], minlength=7)
    assert counts[[0, 5, 6]].sum() == 0
    # 1000 expected per valid neighbour; 4 sigma is about +-110
    assert bool(((counts[1:5] - 1000).abs() < 130).all()), counts


@pytest.mark.reliability(
    fault='a temporal loader whose pipelined batches differ from the '
          'sequential ones, or that ignores input_time',
    behaviour='equal batches either way; the seeds carry their input '
              'times and no neighbour is later')
def test_temporal_node_loader_pipelined_equals_sequential():
    graph = timed_graph(num_nodes=200, num_edges=2000)
    times = torch.randint(20, 100, (200, ),
                          generator=torch.Generator().manual_seed(3))

    def run(pipeline):
        loader = FastNeighborLoader(
            graph, [4, 3], input_nodes=torch.arange(200), input_time=times,
            time_attr='time', disjoint=True, batch_size=32,
            pipeline=pipeline, shuffle=True,
            generator=torch.Generator().manual_seed(5))
        return list(loader)

    sequential, pipelined = run(False), run(True)
    for a, b in zip(sequential, pipelined, strict=True):
        assert torch.equal(a.n_id, b.n_id)
        assert torch.equal(a.edge_index, b.edge_index)
        assert torch.equal(a.seed_time, times[a.input_id])
        tree_time = a.seed_time[a.batch]
        assert bool((graph.time[a.n_id] <= tree_time)[a.batch_size:].all())


@pytest.mark.reliability(
    fault='a temporal link batch with a neighbour or a negative later '
          'than its label edge, or label times lost',
    behaviour='every node of a label edge\'s trees and every negative is '
              'at or before the edge\'s time; edge_label_time is returned')
@pytest.mark.parametrize('neg', ['binary', 'triplet'])
def test_temporal_link_batches_respect_label_times(neg):
    graph = timed_graph(num_nodes=300, num_edges=3000, seed=4)
    label = graph.edge_index[:, :200]
    label_time = torch.maximum(graph.time[label[0]], graph.time[label[1]])
    loader = FastLinkNeighborLoader(
        graph, [4, 2], edge_label_index=label, edge_label_time=label_time,
        time_attr='time', disjoint=True, neg_sampling=neg, batch_size=50,
        generator=torch.Generator().manual_seed(0))
    for batch in loader:
        when = label_time[batch.input_id]
        tree_time = when[batch.batch]
        assert bool((graph.time[batch.n_id] <= tree_time).all())
        if neg == 'binary':
            assert torch.equal(batch.edge_label_time[:50], when)
            assert batch.edge_label_index.size(1) == 100
        else:
            assert torch.equal(batch.seed_time, when)
            # each negative's tree is its positive's
            assert torch.equal(batch.batch[batch.dst_neg_index],
                               torch.arange(50))


def test_temporal_sampling_is_disjoint_without_asking_as_in_pyg():
    # PyG turns 'disjoint' on when sampling is temporal, so its scripts
    # pass 'time_attr' alone: the batches equal those of disjoint=True
    graph = timed_graph(num_nodes=200, num_edges=2000)
    label = graph.edge_index[:, :64]

    def node_batches(**kwargs):
        return list(FastNeighborLoader(
            graph, [4, 3], time_attr='time', batch_size=32, shuffle=True,
            generator=torch.Generator().manual_seed(5), **kwargs))

    def link_batches(**kwargs):
        return list(FastLinkNeighborLoader(
            graph, [4, 3], edge_label_index=label, time_attr='time',
            edge_label_time=graph.time[label[1]], batch_size=16,
            neg_sampling='binary', shuffle=True,
            generator=torch.Generator().manual_seed(5), **kwargs))

    for batches in (node_batches, link_batches):
        plain, disjoint = batches(), batches(disjoint=True)
        assert len(plain) == len(disjoint)
        for a, b in zip(plain, disjoint):
            assert torch.equal(a.n_id, b.n_id)
            assert torch.equal(a.edge_index, b.edge_index)
            assert torch.equal(a.batch, b.batch)  # one tree per seed
    loader = FastNeighborLoader(graph, [2], time_attr='time')
    assert loader.node_sampler.disjoint


@pytest.mark.reliability(
    fault='careless temporal arguments (input_time without '
          'time_attr or of the wrong length, an unknown strategy, float '
          'seed times on integer times, 2-D or boolean times, label times '
          'of the wrong length)',
    behaviour='an error naming the argument and the fix (was: '
              'NotImplementedError, temporal_strategy silently ignored)')
def test_bad_temporal_input_is_named():
    graph = timed_graph()
    edge_timed = timed_graph(level='edge')
    cases = [
        (dict(input_time=torch.ones(60, dtype=torch.long), disjoint=True),
         ValueError, "'input_time' was given but 'time_attr' was not"),
        (dict(time_attr='time', disjoint=True,
              input_time=torch.ones(5, dtype=torch.long)),
         ValueError, "'input_time' has 5 entries for 60 seed nodes"),
        (dict(time_attr='time', disjoint=True, temporal_strategy='first'),
         ValueError, "'temporal_strategy='first'' is not one of"),
        (dict(time_attr='time', disjoint=True, weight_attr='time'),
         NotImplementedError, 'weighted temporal sampling'),
    ]
    for kwargs, error, match in cases:
        with pytest.raises(error, match=match):
            FastNeighborLoader(graph, [2], **kwargs)
    float_time = FastNeighborLoader(graph, [2], time_attr='time',
                                    disjoint=True, input_time=torch.ones(60))
    with pytest.raises(TypeError, match="'input_time' holds floating-point "
                       "times but the graph's times are integers"):
        next(iter(float_time))
    with pytest.raises(ValueError, match="edge-level: give every seed its "
                       "time with 'input_time'"):
        next(iter(FastNeighborLoader(edge_timed, [2], time_attr='time',
                                     disjoint=True)))
    graph.time = graph.time.view(-1, 1).repeat(1, 2)
    with pytest.raises(ValueError, match=r"holds neither one time per node"):
        FastNeighborLoader(graph, [2], time_attr='time', disjoint=True)
    graph.time = torch.zeros(60, dtype=torch.bool)
    with pytest.raises(TypeError, match="has dtype torch.bool"):
        FastNeighborLoader(graph, [2], time_attr='time', disjoint=True)
    label = edge_timed.edge_index[:, :10]
    with pytest.raises(ValueError, match=r"'edge_label_time' is \[3\]: give "
                       r"one time per label edge"):
        FastLinkNeighborLoader(edge_timed, [2], edge_label_index=label,
                               edge_label_time=torch.ones(3), disjoint=True,
                               time_attr='time')
    with pytest.raises(ValueError, match="got only 'time_attr'"):
        FastLinkNeighborLoader(edge_timed, [2], edge_label_index=label,
                               disjoint=True, time_attr='time')


RELATIONS = [('user', 'buys', 'item'), ('item', 'bought_by', 'user'),
             ('item', 'also', 'item')]


def timed_hetero(seed=0, level='node', untimed=None, num_edges=300):
    r"""Users and items, three relations, times on every node type
    (``level='node'``) or edge type (``'edge'``) except :obj:`untimed`."""
    gen = torch.Generator().manual_seed(seed)
    data = HeteroData()
    counts = {'user': 30, 'item': 40}
    for node_type, count in counts.items():
        data[node_type].x = torch.randn(count, 3, generator=gen)
        if level == 'node' and node_type != untimed:
            data[node_type].time = torch.randint(0, 100, (count, ),
                                                 generator=gen)
    for src, rel, dst in RELATIONS:
        e = (src, rel, dst)
        data[e].edge_index = torch.stack([
            torch.randint(counts[src], (num_edges, ), generator=gen),
            torch.randint(counts[dst], (num_edges, ), generator=gen)])
        if level == 'edge' and e != untimed:
            data[e].time = torch.randint(0, 100, (num_edges, ), generator=gen)
    return data


def edge_times(data, out, edge_type, level):
    r"""The time of every sampled edge of :obj:`edge_type` (its source
    node's, or its own); ``None`` where that type has no times."""
    src = edge_type[0]
    if level == 'node':
        if 'time' not in data[src]:
            return None
        return data[src].time[out.node[src][out.row[edge_type]]]
    if 'time' not in data[edge_type]:
        return None
    return data[edge_type].time[out.edge[edge_type]]


@pytest.mark.reliability(
    fault='a heterogeneous temporal sample holding a neighbour later than '
          'its seed time (any relation, node- or edge-level, any hop, '
          'uniform or last)',
    behaviour='every sampled neighbour along a timed relation is at or '
              'before the time of the seed whose tree it joins')
@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**16), level=st.sampled_from(['node', 'edge']),
       strategy=st.sampled_from(['uniform', 'last']),
       fanout=st.sampled_from([[2, 2], [-1], [3, -1]]))
def test_no_hetero_neighbour_is_later_than_its_seed(seed, level, strategy, fanout):
    data = timed_hetero(seed, level)
    sampler = HeteroNeighborSampler(data, fanout, time_attr='time',
                                    disjoint=True,
                                    temporal_strategy=strategy)
    gen = torch.Generator().manual_seed(seed)
    seeds = torch.randint(40, (10, ), generator=gen)
    times = torch.randint(0, 100, (10, ), generator=gen)
    out = sampler.sample_from_nodes(
        NodeSamplerInput(None, seeds, times, 'item'), generator=gen)
    sampled = 0
    for edge_type in RELATIONS:
        tree = out.batch[edge_type[2]][out.col[edge_type]]
        got = edge_times(data, out, edge_type, level)
        assert bool((got <= times[tree]).all()), edge_type
        # every edge joins two nodes of one tree
        assert torch.equal(out.batch[edge_type[0]][out.row[edge_type]], tree)
        sampled += got.numel()
    assert torch.equal(out.node['item'][:10], seeds)
    assert sampled == sum(out.num_sampled_edges[e][h] for e in RELATIONS
                          for h in range(len(fanout)))


@pytest.mark.reliability(
    fault='a heterogeneous temporal filter that drops valid neighbours, '
          'constrains a relation without times, or a "last" that is not '
          'the most recent',
    behaviour='fan-out -1 gives exactly the in-neighbours at or before the '
              'seed time per relation (all of them along an untimed one); '
              '"last" with fan-out k gives the k latest')
@pytest.mark.parametrize('level', ['node', 'edge'])
def test_valid_hetero_neighbours_all_found_and_last_is_latest(level):
    untimed = 'user' if level == 'node' else ('item', 'also', 'item')
    data = timed_hetero(1, level, untimed=untimed)
    seeds = torch.arange(40)
    times = torch.randint(0, 100, (40, ),
                          generator=torch.Generator().manual_seed(2))
    inputs = NodeSamplerInput(None, seeds, times, 'item')
    every = HeteroNeighborSampler(data, [-1], time_attr='time',
                                  disjoint=True).sample_from_nodes(inputs)
    last = HeteroNeighborSampler(data, [2], time_attr='time', disjoint=True,
                                 temporal_strategy='last'
                                 ).sample_from_nodes(inputs)
    for edge_type in [e for e in RELATIONS if e[2] == 'item']:
        src, dst = data[edge_type].edge_index
        if level == 'node':
            store = data[edge_type[0]]
            edge_time = store.time[src] if 'time' in store else None
        else:
            store = data[edge_type]
            edge_time = store.time if 'time' in store else None
        for i in range(40):
            valid = dst == i
            if edge_time is not None:
                valid &= edge_time <= times[i]
            valid = valid.nonzero().view(-1)
            mine = every.batch['item'][every.col[edge_type]] == i
            got = every.edge[edge_type][mine]
            assert sorted(got.tolist()) == sorted(valid.tolist()), edge_type
            if edge_time is None:
                continue
            latest = torch.sort(edge_time[valid], descending=True).values
            mine = last.batch['item'][last.col[edge_type]] == i
            picked = last.edge[edge_type][mine]
            assert sorted(edge_time[picked].tolist()) == \
                sorted(latest[:2].tolist())


@pytest.mark.reliability(
    fault='a heterogeneous temporal loader whose pipelined batches differ '
          'from the sequential ones, or that drops the seed times',
    behaviour="equal batches either way, carrying the seed type's "
              "'seed_time', with no neighbour later than its seed")
def test_temporal_hetero_loader_pipelined_equals_sequential():
    data = timed_hetero(3)
    times = torch.randint(20, 100, (40, ),
                          generator=torch.Generator().manual_seed(4))

    def run(pipeline):
        loader = FastNeighborLoader(
            data, [3, 2], input_nodes=('item', torch.arange(40)),
            input_time=times, time_attr='time', disjoint=True,
            batch_size=16, pipeline=pipeline, shuffle=True,
            generator=torch.Generator().manual_seed(5))
        return list(loader)

    sequential, pipelined = run(False), run(True)
    assert len(sequential) == 3
    for a, b in zip(sequential, pipelined, strict=True):
        for key in ('n_id', 'input_id', 'seed_time', 'batch'):
            assert torch.equal(a['item'][key], b['item'][key]), key
        for e in RELATIONS:
            assert torch.equal(a[e].e_id, b[e].e_id)
        assert torch.equal(a['item'].seed_time,
                           times[a['item'].input_id])
        for e in RELATIONS:
            tree = a[e[2]].batch[a[e].edge_index[1]]
            nbr_time = data[e[0]].time[a[e[0]].n_id[a[e].edge_index[0]]]
            assert bool((nbr_time <= a['item'].seed_time[tree]).all())


@pytest.mark.reliability(
    fault='bad heterogeneous temporal arguments accepted silently',
    behaviour='an error naming the argument, the value and the fix')
def test_bad_hetero_temporal_arguments_are_named():
    data = timed_hetero(0, 'node', untimed='user')
    with pytest.raises(TypeError, match="'time_attr' must name an "
                                        "attribute"):
        HeteroNeighborSampler(data, [2], time_attr=5, disjoint=True)
    with pytest.raises(ValueError, match="is a tensor of no node type and "
                                         "no edge type"):
        HeteroNeighborSampler(data, [2], time_attr='stamp', disjoint=True)
    sampler = HeteroNeighborSampler(data, [2], time_attr='time',
                                    disjoint=True)
    with pytest.raises(ValueError, match=r"seeds of node type\(s\) \['user'\] "
                                         r"have no 'time' times: give every "
                                         r"seed its time with 'input_time'"):
        sampler.sample_from_nodes(NodeSamplerInput(None, torch.arange(3),
                                                   None, 'user'))
    both = timed_hetero(0, 'node')
    both[RELATIONS[0]].time = torch.zeros(300, dtype=torch.long)
    with pytest.raises(ValueError, match='names node times .* and edge '
                                         'times .*: keep one level'):
        HeteroNeighborSampler(both, [2], time_attr='time', disjoint=True)
    short = timed_hetero(0, 'node')
    short['item'].time = torch.zeros(5, dtype=torch.long)
    with pytest.raises(ValueError, match=r"data\['item'\]\.time has 5 "
                                         r"entries for the 40 'item' nodes"):
        HeteroNeighborSampler(short, [2], time_attr='time', disjoint=True)
    with pytest.raises(ValueError, match="'input_time' has 2 entries for 40 "
                                         "seed nodes"):
        FastNeighborLoader(data, [2], input_nodes='item', time_attr='time',
                           disjoint=True, input_time=torch.zeros(2))


@pytest.mark.reliability(
    fault="a feature store's node times read wrongly (or not at all) by "
          "a heterogeneous temporal loader",
    behaviour='the stores of a HeteroData give the same temporal batches '
              'as the HeteroData itself')
def test_feature_store_times_equal_hetero_data_times():
    from pyg_fastload.caching import stores_from_data
    data = timed_hetero(9, 'node', untimed='user')
    times = torch.randint(0, 100, (40, ),
                          generator=torch.Generator().manual_seed(6))
    kwargs = dict(num_neighbors=[-1, -1], input_time=times,
                  input_nodes=('item', torch.arange(40)), time_attr='time',
                  disjoint=True, batch_size=40)
    a = next(iter(FastNeighborLoader(data, **kwargs)))
    b = next(iter(FastNeighborLoader(stores_from_data(data), **kwargs)))
    untimed = next(iter(FastNeighborLoader(data, **dict(
        kwargs, input_time=torch.full((40, ), 10**6)))))
    for e in RELATIONS:
        assert torch.equal(a[e].e_id, b[e].e_id), e
        assert torch.equal(a[e[2]].batch[a[e].edge_index[1]],
                           b[e[2]].batch[b[e].edge_index[1]]), e
    assert a[RELATIONS[0]].e_id.numel() < untimed[RELATIONS[0]].e_id.numel()
