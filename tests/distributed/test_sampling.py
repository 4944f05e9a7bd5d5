from datetime import timedelta

import numpy as np
import pytest
import torch
from scipy.stats import chi2

from pyg_fastload.distributed import Collectives, DistContext
from pyg_fastload.distributed.rank_part import open_rank_part
from pyg_fastload.distributed.collective_sampling import CollectiveSampler
from pyg_fastload.io import open_dataset_dir
from pyg_fastload.sampling import FastNeighborSampler

from .ranks import run_ranks

pytestmark = pytest.mark.timeout(180)


def _sampler(rank, parts_dir, fanouts, **kwargs):
    coll = Collectives(DistContext.current(timedelta(seconds=30)))
    _, graph, book, _ = open_rank_part(parts_dir, coll)
    return CollectiveSampler(graph.topology, book, rank, coll, fanouts,
                             **kwargs), book


def _full(rank, world, parts_dir):
    sampler, book = _sampler(rank, parts_dir, [-1, -1], edge_ids=True)
    start, end = book.part_range(rank)
    seeds = torch.arange(start, min(end, start + 40))
    out = sampler.sample(seeds, torch.Generator().manual_seed(rank))
    traffic = sampler.collectives.counters.snapshot()['sampling']
    pull = sampler.collectives.counters.snapshot()['sampling_pull']
    return (out.node.numpy(), out.row.numpy(), out.col.numpy(),
            out.edge.numpy(), out.num_sampled_nodes, traffic,
            pull['bytes_received'])


def test_full_neighbourhoods_equal_local_sampling(hash_parts):
    dataset_dir, root = hash_parts
    parts = root / 'a'
    topo = open_dataset_dir(dataset_dir).topology
    new_id = torch.from_numpy(np.load(parts / 'new_id.npy'))
    order = torch.argsort(new_id)
    local = FastNeighborSampler(topo, [-1, -1])
    offsets = torch.from_numpy(np.load(parts / 'offsets.npy'))
    results = run_ranks(_full, 2, parts)
    for rank in range(2):
        status, value = results[rank]
        assert status == 'ok', value
        node, row, col, edge, counts, traffic, pull = value
        node = torch.from_numpy(node)
        seeds = order[node[:counts[0]]]
        ref = local.sample(seeds)
        # the same nodes in the same order, the same edges
        assert torch.equal(order[node], ref.node)
        assert counts == ref.num_sampled_nodes
        ours = set(zip(row.tolist(), col.tolist()))
        assert ours == set(zip(ref.row.tolist(), ref.col.tolist()))
        assert (edge >= 0).all() and len(set(edge.tolist())) == len(edge)
        # hop 0: the seeds are local, nothing moves; hop 1: remote
        # frontier ids out and their neighbours back, one message each
        assert traffic['bytes_sent'] > 0 and traffic['messages'] == 2
        # pulling instead: an indptr pair and the int32 list of every
        # frontier node the other rank sent here at hop 1
        other = results[1 - rank][1]
        frontier = torch.from_numpy(other[0])[other[4][0]:sum(other[4][:2])]
        owned = frontier[(frontier >= offsets[rank]) &
                         (frontier < offsets[rank + 1])]
        degree = topo.indptr[order[owned] + 1] - topo.indptr[order[owned]]
        assert pull == 16 * owned.numel() + 4 * int(degree.sum()) > 0


def _draws(rank, world, parts_dir, reps):
    sampler, book = _sampler(rank, parts_dir, [3])
    start, end = book.part_range(1 - rank)  # the other rank's nodes
    seeds = torch.arange(start, start + 30)
    gen = torch.Generator().manual_seed(100 + rank)
    pairs = []
    for _ in range(reps):
        out = sampler.sample(seeds, gen)
        pairs.append(np.stack([out.node[out.row].numpy(),
                               out.node[out.col].numpy()]))
    return seeds.numpy(), np.concatenate(pairs, 1)


def test_remote_draws_are_uniform_over_in_edges(hash_parts):
    dataset_dir, root = hash_parts
    parts = root / 'a'
    topo = open_dataset_dir(dataset_dir).topology
    new_id = np.load(parts / 'new_id.npy')
    reps = 300
    results = run_ranks(_draws, 2, parts, reps)
    for rank in range(2):
        status, value = results[rank]
        assert status == 'ok', value
        seeds, pairs = value
        order = np.argsort(new_id)
        counts = {}
        for src, dst in zip(*pairs.tolist()):
            counts[(src, dst)] = counts.get((src, dst), 0) + 1
        stat, dof = 0.0, 0
        for seed in seeds.tolist():
            v = int(order[seed])
            nbrs = new_id[topo.indices[topo.indptr[v]:
                                       topo.indptr[v + 1]].long().numpy()]
            observed = [counts.pop((int(u), seed), 0) for u in nbrs]
            deg = len(nbrs)
            if deg <= 3:  # every in-edge, every time
                assert observed == [reps] * deg
                continue
            expected = reps * 3 / deg
            stat += sum((o - expected) ** 2 / expected for o in observed)
            dof += deg - 1
        assert counts == {}  # nothing sampled that is not an in-edge
        assert chi2.sf(stat, dof) > 1e-3, (stat, dof)


def _layer_draws(rank, world, parts_dir, reps, size):
    sampler, book = _sampler(rank, parts_dir, [size], layer_wise=True)
    start, _ = book.part_range(rank)
    other, _ = book.part_range(1 - rank)
    # a frontier half local, half remote
    seeds = torch.cat([torch.arange(start, start + 10),
                       torch.arange(other, other + 10)])
    gen = torch.Generator().manual_seed(7 + rank)
    pairs = []
    for _ in range(reps):
        out = sampler.sample(seeds, gen)
        assert out.row.numel() <= size
        pairs.append(np.stack([out.node[out.row].numpy(),
                               out.node[out.col].numpy()]))
    return seeds.numpy(), pairs


def test_layer_wise_draws_follow_eq_2(hash_parts):
    # DSP Eq. 2: `size` draws with replacement from the union of the
    # frontier's in-edges, so every in-edge is in a layer with probability
    # 1 - (1 - 1/E)^size, E the frontier's total in-degree
    dataset_dir, root = hash_parts
    parts = root / 'a'
    topo = open_dataset_dir(dataset_dir).topology
    new_id = np.load(parts / 'new_id.npy')
    order = np.argsort(new_id)
    reps, size = 300, 40
    results = run_ranks(_layer_draws, 2, parts, reps, size)
    for rank in range(2):
        status, value = results[rank]
        assert status == 'ok', value
        seeds, batches = value
        edges = []
        for seed in seeds.tolist():
            v = int(order[seed])
            nbrs = new_id[topo.indices[topo.indptr[v]:
                                       topo.indptr[v + 1]].long().numpy()]
            edges += [(int(u), seed) for u in nbrs]
        p = 1 - (1 - 1 / len(edges)) ** size
        counts = dict.fromkeys(edges, 0)
        for pairs in batches:
            for edge in set(zip(*pairs.tolist())):
                assert edge in counts  # only in-edges of the frontier
                counts[edge] += 1
        expected = reps * p
        stat = sum((o - expected) ** 2 / (expected * (1 - p))
                   for o in counts.values())
        assert chi2.sf(stat, len(edges)) > 1e-3, (stat, len(edges))


# Temporal collective sampling ###############################################

def _times(num, seed):
    return torch.randperm(num, generator=torch.Generator().manual_seed(seed))


def _in_time(rank, world, parts_dir, level, strategy, fanouts):
    coll = Collectives(DistContext.current(timedelta(seconds=30)))
    _, graph, book, _ = open_rank_part(parts_dir, coll)
    start, end = book.part_range(rank)
    topo = graph.topology
    edges = coll.all_gather_ints([topo.num_edges], 'edges').view(-1)
    first = int(edges[:rank].sum())
    times = {'node_time': _times(book.num_nodes, 0)[start:end]} \
        if level == 'node' else \
        {'edge_time': _times(int(edges.sum()), 1)[first:first +
                                                   topo.num_edges]}
    if level == 'node':  # bad times, refused alike on every rank
        own = times['node_time']
        for bad, match in (({'edge_time': own}, 'not both'),
                           ({'layer_wise': True}, 'the times unset'),
                           ({'node_time': own[:-1]},
                            r"'node_time' has .* nodes part .* owns "
                            r"\(new-id order\): give one time")):
            with pytest.raises(ValueError, match=match):
                CollectiveSampler(topo, book, rank, coll, fanouts,
                                  **{'node_time': own, **bad})
    sampler = CollectiveSampler(topo, book, rank, coll, fanouts,
                                edge_ids=True, temporal_strategy=strategy,
                                **times)
    seeds = torch.arange(start, min(end, start + 30))
    seed_time = None if level == 'node' else \
        torch.full((seeds.numel(), ), int(edges.sum()) // 2)
    out = sampler.sample(seeds, torch.Generator().manual_seed(rank),
                         sampler.seed_time(seeds, seed_time))
    return (out.node.tolist(), out.batch.tolist(),
            out.node[out.row].tolist(), out.node[out.col].tolist(),
            out.edge.tolist(), None if seed_time is None
            else seed_time.tolist())


@pytest.mark.parametrize('level, strategy, fanouts', [
    ('node', 'uniform', [-1, -1]), ('edge', 'last', [3, 2])])
def test_temporal_draws_equal_one_machine_sampling_in_time(
        metis_parts, level, strategy, fanouts):
    from pyg_fastload.partition.part_dirs import full_topology
    from torch_geometric.data import Data
    whole = full_topology(metis_parts)  # new ids, parts end to end
    data = Data(edge_index=whole.to_edge_index(), num_nodes=whole.num_nodes)
    if level == 'node':
        data.time = _times(whole.num_nodes, 0)
    else:
        data.time = _times(whole.num_edges, 1)  # CSC order = part order
    local = FastNeighborSampler(data, fanouts, time_attr='time',
                                temporal_strategy=strategy)
    results = run_ranks(_in_time, 2, metis_parts, level, strategy, fanouts)
    for rank in range(2):
        status, value = results[rank]
        assert status == 'ok', value
        node, batch, src, dst, edge, seed_time = value
        size = len(set(batch))
        seeds = torch.tensor(node[:size])
        ref = local.sample(seeds, seed_time=local.seed_time(
            seeds, None if seed_time is None else torch.tensor(seed_time)))
        # the same trees: every (tree, node) and every (tree, edge)
        assert sorted(zip(batch, node)) == sorted(zip(
            ref.batch.tolist(), ref.node.tolist()))
        # the same edges, with their ids (parts' CSCs end to end: the
        # whole graph's CSC order)
        assert sorted(zip(src, dst, edge)) == sorted(zip(
            ref.node[ref.row].tolist(), ref.node[ref.col].tolist(),
            ref.edge.tolist()))
        # no neighbour later than its tree's seed
        if level == 'node':
            limit = data.time[seeds]
            for b, n in zip(batch, node):
                assert data.time[n] <= limit[b]
        else:
            assert all(int(data.time[e]) <= seed_time[0] for e in edge)
        assert len(edge) > len(seeds)  # something was drawn
