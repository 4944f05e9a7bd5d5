r"""Temporal sampling on heterogeneous graphs: per relation, no neighbour
later than its tree's seed, ``'last'`` the most recent, types without times
unconstrained, and the loaders' temporal batches."""
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch_geometric.data import HeteroData
from torch_geometric.sampler import NodeSamplerInput

from pyg_fastload import FastNeighborLoader
from pyg_fastload.sampling import HeteroNeighborSampler

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
def test_no_neighbour_is_later_than_its_seed(seed, level, strategy, fanout):
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
def test_valid_neighbours_all_found_and_last_is_latest(level):
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
