r"""DSP on heterogeneous partitions: collective sampling over every relation
(typed new ids), one partitioned feature store serving every node type's
rows, and seeds of the labelled type."""
from datetime import timedelta

import numpy as np
import pytest
import torch

from pyg_fastload.distributed import Collectives, DistContext
from pyg_fastload.distributed.collective_sampling import \
    HeteroCollectiveSampler
from pyg_fastload.distributed.dsp import open_dsp_rank
from pyg_fastload.io import open_dataset_dir
from pyg_fastload.sampling import HeteroNeighborSampler

from ..helpers import new_id_topology
from .ranks import run_ranks

pytestmark = pytest.mark.timeout(240)


def _sample(rank, world, parts_dir, fanouts):
    coll = Collectives(DistContext.current(timedelta(seconds=30)))
    dsp = open_dsp_rank(parts_dir, coll)
    sampler = dsp.sampler(fanouts)
    seeds = dsp.seeds('train')[:12]
    out = sampler.sample_hetero(dsp.target, seeds,
                                torch.Generator().manual_seed(rank))
    edges = {'__'.join(e): (out.node[e[0]][out.row[e]].tolist(),
                            out.node[e[2]][out.col[e]].tolist(),
                            out.edge[e].tolist()) for e in out.row}
    # every node type's features, through the partitioned store
    rows = {t: dsp.features.gather('x', ids, t).numpy()
            for t, ids in out.node.items()
            if ('x' in {a.attr_name for a in
                        dsp.features.get_all_tensor_attrs()
                        if a.group_name == t})}
    stats = dsp.features.stats()
    # rows of other parts: each read once, from the owner's files (no
    # cache holds them: DSP's cold rows), under the type's name
    remote = {t: int((dsp.book.owner(out.node[t], t) != rank).sum())
              for t in rows}
    read = {t: stats[f'{t}.x'].get('remote_disk', {}).get('requests', 0)
            for t in rows}
    dsp.close()
    return (type(sampler).__name__, seeds.tolist(),
            {t: v.tolist() for t, v in out.node.items()}, edges, rows,
            coll.counters.snapshot(), remote, read)


def test_full_neighbourhoods_equal_one_machine_sampling(hetero_parts):
    dataset_dir, parts = hetero_parts
    whole, target = new_id_topology(dataset_dir, parts)
    local = HeteroNeighborSampler(whole, [-1, -1])
    dataset = open_dataset_dir(dataset_dir)
    new_id = torch.from_numpy(np.load(parts / 'new_id.npy'))
    offset = dict(zip(dataset.node_types, dataset.topology.node_offset))
    results = run_ranks(_sample, 2, parts, [-1, -1])
    for rank in range(2):
        status, value = results[rank]
        assert status == 'ok', value
        kind, seeds, nodes, edges, rows, counters, remote, read = value
        assert kind == 'HeteroCollectiveSampler'
        ref = local.sample_hetero(target, torch.tensor(seeds))
        # the same nodes of every type, seeds first in their order
        assert nodes[target][:len(seeds)] == seeds
        for node_type, ids in ref.node.items():
            assert sorted(nodes[node_type]) == sorted(ids.tolist())
        # the same edges of every relation, in new ids
        for edge_type in ref.row:
            key = '__'.join(edge_type)
            src, dst, eid = edges[key]
            want = set(zip(ref.node[edge_type[0]][ref.row[edge_type]]
                           .tolist(), ref.node[edge_type[2]]
                           [ref.col[edge_type]].tolist()))
            assert set(zip(src, dst)) == want
            # e_id: distinct ids among the relation's edges of all parts
            assert len(set(eid)) == len(eid)
            assert all(0 <= e < whole.num_edges_of(edge_type) for e in eid)
        # every type's rows are that type's rows of the dataset
        for node_type, got in rows.items():
            original = torch.argsort(
                new_id[offset[node_type]:offset[node_type] +
                       dataset.num_nodes[node_type]] - offset[node_type])
            want = dataset.arrays[node_type]['x'][
                original[torch.tensor(nodes[node_type])]]
            assert np.array_equal(got, want.numpy())
        # hop 0: the seeds are local, nothing moves; hop 1: the remote
        # frontier out and its neighbours back, one message each
        assert counters['sampling']['messages'] == 2
        assert read == remote and sum(remote.values()) >= 10


def _bad(rank, world, parts_dir):
    coll = Collectives(DistContext.current(timedelta(seconds=30)))
    dsp = open_dsp_rank(parts_dir, coll)
    try:
        with pytest.raises(ValueError, match='layer-wise'):
            dsp.sampler([2, 2], layer_wise=True)
        with pytest.raises(ValueError, match='induced'):
            HeteroCollectiveSampler(dsp.graph.topology, dsp.book, rank, coll,
                                    [2], subgraph_type='induced')
    finally:
        dsp.close()
    return 'refused'


def test_homogeneous_only_options_are_refused(hetero_parts):
    _, parts = hetero_parts
    results = run_ranks(_bad, 2, parts)
    assert results == {0: ('ok', 'refused'), 1: ('ok', 'refused')}


def _link_topology(rank, world, dataset_dir, parts_dir):
    from pyg_fastload.distributed.rank_part import new_edge_ids, read_new_ids
    from pyg_fastload.modes.link_split import LinkOptions, link_split
    from pyg_fastload.storage import CSCGraphStore, TieredFeatureStore
    coll = Collectives(DistContext.current(timedelta(seconds=30)))
    dsp = open_dsp_rank(parts_dir, coll)
    dataset = open_dataset_dir(dataset_dir)
    store = TieredFeatureStore()
    store.put_tensor(dataset.arrays['paper']['x'], group_name='paper',
                     attr_name='x', index=None)
    edge_type, reverse = ('author', 'writes', 'paper'), \
        ('paper', 'rev_writes', 'author')
    split = link_split((store, CSCGraphStore(dataset.topology)),
                       LinkOptions(edge_type=list(edge_type)), 0)
    assert split.relation == (edge_type, reverse)
    new_id = read_new_ids(parts_dir, dsp.book)
    passing = new_edge_ids(new_id, dsp.book, split.message_passing('train'),
                           edge_type)
    held_out = new_edge_ids(new_id, dsp.book, torch.cat(
        [split.edges['val'], split.edges['test']], 1), edge_type)
    topo = dsp.topology_with({edge_type: passing,
                              reverse: passing.flip(0)})
    out = {}
    for relation in topo.edge_types:
        rel = topo.relation_topology(relation)
        start, _ = dsp.book.part_range(rank, relation[2])
        dst = torch.arange(rel.num_nodes).repeat_interleave(
            rel.indptr.diff()) + start
        out['__'.join(relation)] = (
            sorted(zip(rel.indices.tolist(), dst.tolist())),
            dsp.graph.topology.num_edges_of(relation))
    sampler = dsp.sampler([2, 2], topo)  # a collective over the new edges
    dsp.close()
    return (out, sorted(zip(*passing.tolist())),
            sorted(zip(*held_out.tolist())), type(sampler).__name__,
            dsp.book.part_range(rank, 'paper'),
            dsp.book.part_range(rank, 'author'))


def test_link_message_passing_topology_holds_only_training_edges(
        hetero_parts):
    dataset_dir, parts = hetero_parts
    results = run_ranks(_link_topology, 2, dataset_dir, parts)
    seen = set()
    for rank in range(2):
        status, value = results[rank]
        assert status == 'ok', value
        relations, passing, held_out, kind, papers, authors = value
        assert kind == 'HeteroCollectiveSampler'
        writes, _ = relations['author__writes__paper']
        rev, _ = relations['paper__rev_writes__author']
        # this part's destinations of the training edges, both ways
        assert writes == [e for e in passing
                          if papers[0] <= e[1] < papers[1]]
        assert rev == sorted((p, a) for a, p in passing
                             if authors[0] <= a < authors[1])
        assert not set(writes) & set(held_out)
        seen |= set(writes)
        for name, (edges, stored) in relations.items():
            if 'writes' not in name:  # every other relation as stored
                assert len(edges) == stored
    assert seen == set(passing)  # the parts together: every training edge


# Temporal collective sampling ###############################################

#: The node types given node times (the others have no time constraint).
TIMED = ('paper', 'author')


def _times(num, seed):
    return torch.randperm(num, generator=torch.Generator().manual_seed(seed))


def _node_times(num_nodes):
    r"""Every timed type's node times, in typed new ids."""
    return {t: _times(num_nodes[t], i) for i, t in enumerate(TIMED)}


def _edge_times(edge_type, src, dst, num_nodes):
    r"""A time per edge of :obj:`edge_type` (typed new ids), one per
    (source, destination) pair: no ties between different pairs."""
    count = num_nodes[edge_type[2]]
    return _times(num_nodes[edge_type[0]] * count, 2)[src * count + dst]


def _part_edges(topo, book, rank, edge_type):
    r"""This part's CSC edges of :obj:`edge_type`, typed new ids."""
    rel = topo.relation_topology(edge_type)
    start, _ = book.part_range(rank, edge_type[2])
    dst = torch.arange(rel.num_nodes).repeat_interleave(rel.indptr.diff())
    return rel.indices.long(), dst + start


def _in_time(rank, world, parts_dir, level, strategy, fanouts):
    coll = Collectives(DistContext.current(timedelta(seconds=30)))
    dsp = open_dsp_rank(parts_dir, coll)
    topo, book = dsp.graph.topology, dsp.book

    def sampler(**times):
        return HeteroCollectiveSampler(topo, book, rank, coll, fanouts,
                                       temporal_strategy=strategy, **times)

    try:
        if level == 'node':
            own = {t: time[slice(*book.part_range(rank, t))]
                   for t, time in _node_times(book.num_nodes).items()}
            times = {'node_time': own}
            edge = ('paper', 'cites', 'paper')
            # bad times, refused alike on every rank
            for bad, match in (
                    ({'node_time': {'venue': own['paper']}},
                     r"'node_time' names node type\(s\) \['venue'\] the "
                     r"graph does not have"),
                    ({'node_time': {'paper': own['paper'][:-1]}},
                     r"'node_time'\['paper'\] has .* nodes part "
                     r".* owns \(typed new-id order\): give one time"),
                    ({'node_time': own, 'edge_time': {edge: own['paper']}},
                     'not both'),
                    ({'node_time': own, 'layer_wise': True}, 'layer-wise'),
                    ({'node_time': own if rank else {'paper': own['paper']}},
                     'the ranks time different node types')):
                with pytest.raises(ValueError, match=match):
                    sampler(**bad)
        else:
            times = {'edge_time': {e: _edge_times(
                e, *_part_edges(topo, book, rank, e), book.num_nodes)
                for e in topo.edge_types}}
        collective = sampler(**times)
        seeds = dsp.seeds('train')[:12]
        seed_time = None
        if level == 'node':  # untimed seeds need their times
            with pytest.raises(ValueError, match="'institution'.* have no "
                               "'node_time' times: give every seed"):
                collective.sample_hetero('institution', torch.tensor([0]))
        else:
            seed_time = torch.randint(
                20_000, 120_000, (seeds.numel(), ),
                generator=torch.Generator().manual_seed(rank))
        out = collective.sample_hetero(
            dsp.target, seeds, torch.Generator().manual_seed(rank), seed_time)
    finally:
        dsp.close()
    nodes = {t: list(zip(out.batch[t].tolist(), out.node[t].tolist()))
             for t in out.node}
    edges = {e: list(zip(out.batch[e[2]][out.col[e]].tolist(),
                         out.node[e[0]][out.row[e]].tolist(),
                         out.node[e[2]][out.col[e]].tolist()))
             for e in out.row}
    return (seeds.tolist(), None if seed_time is None else seed_time.tolist(),
            nodes, edges)


def _timed_whole(dataset_dir, parts_dir, level):
    r"""``(data, target)``: the whole graph in typed new ids, as a
    ``HeteroData`` with the times the ranks were given."""
    from torch_geometric.data import HeteroData
    whole, target = new_id_topology(dataset_dir, parts_dir)
    num_nodes = {t: whole.num_nodes_of(t) for t in whole.node_types}
    data = HeteroData()
    for node_type, count in num_nodes.items():
        data[node_type].num_nodes = count
    if level == 'node':
        for node_type, time in _node_times(num_nodes).items():
            data[node_type].time = time
    for edge_type in whole.edge_types:
        rel = whole.relation_topology(edge_type)
        src = rel.indices.long()
        dst = torch.arange(rel.num_nodes).repeat_interleave(rel.indptr.diff())
        data[edge_type].edge_index = torch.stack([src, dst])
        if level == 'edge':
            data[edge_type].time = _edge_times(edge_type, src, dst,
                                               num_nodes)
    return data, target


@pytest.mark.parametrize('level, strategy, fanouts', [
    ('node', 'uniform', [-1, -1]), ('node', 'last', [2, 1]),
    ('edge', 'last', [3, 2])])
def test_temporal_draws_equal_one_machine_sampling_in_time(
        hetero_parts, level, strategy, fanouts):
    dataset_dir, parts = hetero_parts
    data, target = _timed_whole(dataset_dir, parts, level)
    local = HeteroNeighborSampler(data, fanouts, time_attr='time',
                                  temporal_strategy=strategy)
    results = run_ranks(_in_time, 2, parts, level, strategy, fanouts)
    for rank in range(2):
        status, value = results[rank]
        assert status == 'ok', value
        seeds, seed_time, nodes, edges = value
        ref = local.sample_hetero(
            target, torch.tensor(seeds), None,
            None if seed_time is None else torch.tensor(seed_time))
        limit = data[target].time[seeds] if seed_time is None \
            else torch.tensor(seed_time)
        # the same trees: every (tree, node) of every type
        for node_type, ids in ref.node.items():
            assert sorted(nodes[node_type]) == sorted(zip(
                ref.batch[node_type].tolist(), ids.tolist()))
            if level == 'node' and node_type in TIMED:  # none later
                time = data[node_type].time
                assert all(time[n] <= limit[b] for b, n in nodes[node_type])
        # the same (tree, source, destination) of every relation
        for e in ref.row:
            assert sorted(edges[e]) == sorted(zip(
                ref.batch[e[2]][ref.col[e]].tolist(),
                ref.node[e[0]][ref.row[e]].tolist(),
                ref.node[e[2]][ref.col[e]].tolist()))
            if level == 'edge':  # no edge later than its tree's seed
                count = data[e[2]].num_nodes
                time = _times(data[e[0]].num_nodes * count, 2)
                assert all(time[s * count + d] <= limit[b]
                           for b, s, d in edges[e])
        assert sum(map(len, edges.values())) > len(seeds)  # something drawn
