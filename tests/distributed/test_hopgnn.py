import itertools
from datetime import timedelta

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from pyg_fastload import FastNeighborLoader
from pyg_fastload.distributed import (
    Collectives,
    DistContext,
    PartitionedFeatureStore,
)
from pyg_fastload.distributed.hopgnn import (
    MergeSearch,
    RootRouter,
    assign_steps,
    merge_order,
)
from pyg_fastload.distributed.rank_part import open_rank_part
from pyg_fastload.partition.part_dirs import full_topology
from pyg_fastload.sampling import FastNeighborSampler
from pyg_fastload.storage import CSCGraphStore

from .ranks import run_ranks

pytestmark = pytest.mark.timeout(180)


def _gradients(model, loader, norm):
    model.zero_grad()
    batch = next(iter(loader))
    logits = model(batch.x, batch.edge_index)[:batch.batch_size]
    loss = F.cross_entropy(logits, batch.y[:batch.batch_size].long(),
                           reduction='sum') / norm
    loss.backward()
    return batch


def _step(rank, world, parts_dir, drawn):
    from torch_geometric.nn import GraphSAGE
    coll = Collectives(DistContext.current(timedelta(seconds=30)))
    features, _, book, _ = open_rank_part(parts_dir, coll)
    topo = full_topology(parts_dir)
    data = (PartitionedFeatureStore(features, book, rank, coll),
            CSCGraphStore(topo))
    x = features.get_tensor(attr_name='x', index=None, group_name=None)
    torch.manual_seed(0)  # the same parameters on both ranks
    model = GraphSAGE(x.size(1), 16, 2, out_channels=8)
    roots = torch.tensor(drawn[rank])

    def averaged():  # DDP: the ranks' gradients averaged
        grads = [p.grad.clone() for p in model.parameters()]
        return [coll.all_reduce(g, 'average gradients') / world
                for g in grads]

    # HopGNN: roots routed home, one micrograph each, loss sum / batch
    router = RootRouter(topo, book, rank, coll, [-1, -1])
    hop = FastNeighborLoader(data, [-1, -1], input_nodes=roots,
                             batch_size=roots.numel(),
                             neighbor_sampler=router)
    batch = _gradients(model, hop, roots.numel())
    trained = batch.input_id.tolist()
    grads_hop = averaged()
    # plain data parallelism on the same micrographs (full fan-outs make
    # every micrograph the same wherever it is sampled)
    plain = FastNeighborLoader(
        data, [-1, -1], input_nodes=roots, batch_size=roots.numel(),
        neighbor_sampler=FastNeighborSampler(topo, [-1, -1], disjoint=True))
    _gradients(model, plain, roots.numel())
    grads_ref = averaged()
    homes = book.owner(torch.tensor(trained, dtype=torch.long))
    return (max(float((a - b).abs().max())
                for a, b in zip(grads_hop, grads_ref)),
            max(float(g.abs().max()) for g in grads_ref),
            trained, bool((homes == rank).all()))


@pytest.mark.parametrize('empty', [False, True])
def test_hopgnn_gradients_equal_data_parallel_ones(metis_parts, empty):
    # every rank draws the same number of roots (as data parallelism does)
    drawn = [list(range(0, 2000, 41))[:38], list(range(7, 2000, 53))[:38]]
    if empty:  # rank 1 homes none of the roots: it still takes part
        from pyg_fastload.partition import load_book
        start, _ = load_book(metis_parts).part_range(0)
        drawn = [list(range(start, start + 35)),
                 list(range(start + 35, start + 70))]
    results = run_ranks(_step, 2, metis_parts, drawn)
    trained = []
    for rank in range(2):
        status, value = results[rank]
        assert status == 'ok', value
        diff, scale, roots, at_home = value
        assert diff <= 1e-5 * max(scale, 1.0)
        assert scale > 0
        assert at_home  # every root trained on the rank holding it
        trained += roots
    # every drawn root trained exactly once in the iteration
    assert sorted(trained) == sorted(drawn[0] + drawn[1])
    if empty:
        assert results[1][1][2] == []


# Time steps and micrograph merging ##########################################

def test_merge_order_follows_the_papers_example():
    # HopGNN Fig. 10 (3 servers): step 1 holds the fewest roots; model 1's
    # two roots there go one each to its steps 0 and 2.
    counts = torch.tensor([[2, 0, 3], [4, 2, 2], [3, 1, 2]])
    assert merge_order(counts, 1) == [1]
    steps = torch.tensor([0, 0, 0, 0, 1, 1, 2, 2])  # model 1's roots
    moved = assign_steps(steps, [1], 3)
    assert moved.tolist() == [0, 0, 0, 0, 0, 2, 2, 2]
    assert torch.bincount(moved, minlength=3).tolist() == [5, 0, 3]


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 5).flatmap(lambda n: st.tuples(
    st.lists(st.lists(st.integers(0, 9), min_size=n, max_size=n),
             min_size=n, max_size=n),
    st.integers(0, n - 1))))
def test_merging_keeps_every_root_and_agrees_with_the_counts(case):
    table, merges = case
    counts = torch.tensor(table)
    removed = merge_order(counts, merges)
    n = counts.size(0)
    assert len(set(removed)) == merges
    # every model moves its own roots; the per-step totals every rank
    # computed from the shared counts must match what the models did
    after = torch.zeros_like(counts)
    for m in range(n):
        steps = torch.repeat_interleave(torch.arange(n), counts[m])
        moved = assign_steps(steps, removed, n)
        assert moved.numel() == steps.numel()  # no root lost
        assert not any(int(t) in removed for t in moved)
        after[m] = torch.bincount(moved, minlength=n)
    assert after.sum(1).tolist() == counts.sum(1).tolist()
    assert after[:, removed].sum() == 0
    # merging never removes a step that holds more roots than another
    if merges:
        first = removed[0]
        assert counts[:, first].sum() == counts.sum(0).min()


def test_merge_search_keeps_the_fastest_count():
    search = MergeSearch(4)
    assert search.epoch_done(10.0) == 1  # 4 steps measured, try 3
    assert search.epoch_done(8.0) == 2   # 3 faster: try 2
    assert search.epoch_done(9.0) == 1   # 2 slower: back to 3, keep it
    assert search.epoch_done(5.0) == 1
    assert [h['time_steps'] for h in search.history] == [4, 3, 2, 3]


def test_time_steps_give_the_whole_batchs_outputs(tiny_dir):
    from torch_geometric.nn import GraphSAGE
    from pyg_fastload.datasets import load_synthetic
    from pyg_fastload.distributed.hopgnn import split_time_steps
    data = load_synthetic('tiny', root=tiny_dir[1], progress=False).to_data()
    loader = FastNeighborLoader(data, [5, 3], input_nodes=torch.arange(60),
                                batch_size=60, disjoint=True)
    batch = next(iter(loader))
    batch.step_ptr = torch.tensor([0, 25, 25, 60])  # one step empty
    torch.manual_seed(0)
    model = GraphSAGE(data.num_features, 16, 2).eval()
    whole = model(batch.x, batch.edge_index)[:60]
    steps = split_time_steps(batch)
    assert [s.batch_size for s in steps] == [25, 0, 35]
    assert sum(s.num_nodes for s in steps) == batch.num_nodes
    assert sum(s.edge_index.size(1) for s in steps) == \
        batch.edge_index.size(1)
    parts = [model(s.x, s.edge_index,
                   num_sampled_nodes_per_hop=s.num_sampled_nodes,
                   num_sampled_edges_per_hop=s.num_sampled_edges)[
                       :s.batch_size] for s in steps]
    assert torch.allclose(torch.cat(parts), whole, atol=1e-5)
    assert torch.equal(torch.cat([s.y[:s.batch_size] for s in steps]),
                       batch.y[:60])


def _time_step_grads(rank, world, parts_dir, drawn, merges):
    from pyg_fastload.lightning import NodeClassifier
    coll = Collectives(DistContext.current(timedelta(seconds=30)))
    features, _, book, _ = open_rank_part(parts_dir, coll)
    topo = full_topology(parts_dir)
    data = (PartitionedFeatureStore(features, book, rank, coll),
            CSCGraphStore(topo))
    x = features.get_tensor(attr_name='x', index=None, group_name=None)
    torch.manual_seed(0)
    model = NodeClassifier('sage', x.size(1), 8, hidden_channels=16,
                           num_layers=2, dropout=0.0)
    roots = torch.tensor(drawn[rank])
    router = RootRouter(topo, book, rank, coll, [-1, -1], merges=merges)
    hop = FastNeighborLoader(data, [-1, -1], input_nodes=roots,
                             batch_size=roots.numel(),
                             neighbor_sampler=router)
    batch = next(iter(hop))
    batch.loss_norm = roots.numel()
    model.zero_grad()
    model.training_step(batch, 0).backward()
    grads = [coll.all_reduce(p.grad, 'average') / world
             for p in model.parameters()]
    # the reference: plain data parallelism, one batch per rank
    plain = FastNeighborLoader(
        data, [-1, -1], input_nodes=roots, batch_size=roots.numel(),
        neighbor_sampler=FastNeighborSampler(topo, [-1, -1], disjoint=True))
    ref = next(iter(plain))
    model.zero_grad()
    logits = model(ref)[:ref.batch_size]
    (F.cross_entropy(logits, ref.y[:ref.batch_size].long(),
                     reduction='sum') / roots.numel()).backward()
    refs = [coll.all_reduce(p.grad, 'average') / world
            for p in model.parameters()]
    ptr = batch.step_ptr.tolist()
    steps = [batch.input_id[a:b].tolist() for a, b in zip(ptr, ptr[1:])]
    return (max(float((a - b).abs().max()) for a, b in zip(grads, refs)),
            max(float(g.abs().max()) for g in refs), steps,
            router.stats())


@pytest.mark.parametrize('merges', [0, 1])
def test_time_steps_and_merging_keep_the_data_parallel_update(metis_parts,
                                                              merges):
    drawn = [list(range(0, 2000, 41))[:38], list(range(7, 2000, 53))[:38]]
    results = run_ranks(_time_step_grads, 2, metis_parts, drawn, merges)
    from pyg_fastload.partition import load_book
    book = load_book(metis_parts)
    trained = []
    for rank in range(2):
        status, value = results[rank]
        assert status == 'ok', value
        diff, scale, steps, stats = value
        assert scale > 0 and diff <= 1e-5 * max(scale, 1.0)
        assert len(steps) == 2 - merges == stats['time_steps']
        for j, roots in enumerate(steps):
            # step j on this rank trains the roots of one model only
            if merges == 0:
                origin = (rank - j) % 2
                assert set(roots) <= set(drawn[origin])
                homes = book.owner(torch.tensor(roots, dtype=torch.long))
                assert bool((homes == rank).all())
            trained += roots
        assert stats['rows'] == stats['local'] + stats['remote']
        assert stats['remote_per_step'] >= stats['remote']
    assert sorted(trained) == sorted(drawn[0] + drawn[1])
    if merges:  # one step left: the emptier step merged into the other,
        # so each rank trains all the roots of one model, on one path
        mine = [sorted(results[r][1][2][0]) for r in range(2)]
        assert mine in ([sorted(drawn[0]), sorted(drawn[1])],
                        [sorted(drawn[1]), sorted(drawn[0])])


# Resuming ###################################################################

def _resumed_search(rank, world, parts_dir):
    r"""A pipelined HopGNN loader with the merge search, whose epochs each
    seem faster than the one before (a fake clock): stopped 2 batches into
    epoch 2 and resumed from its state by a new loader and router."""
    import types
    from pyg_fastload.distributed import hopgnn
    from pyg_fastload.distributed.seeds import RankSeedSampler
    coll = Collectives(DistContext.current(timedelta(seconds=30)))
    features, _, book, _ = open_rank_part(parts_dir, coll)
    topo = full_topology(parts_dir)
    # each pipelined stage on a process group of its own
    sampling, fetching = coll.new_stage(), coll.new_stage()
    data = (PartitionedFeatureStore(features, book, rank, fetching),
            CSCGraphStore(topo))
    now = [0.0]

    def perf_counter():  # every call 1 s, then 0.9 s, 0.81 s, ... later
        now.append(now[-1] + 0.9 ** len(now))
        return now[-1]
    hopgnn.time = types.SimpleNamespace(perf_counter=perf_counter)

    def loader(seed):
        router = RootRouter(topo, book, rank, sampling, [3, 2],
                            merge_search=True)
        router.batches_per_epoch = 4
        generator = torch.Generator().manual_seed(seed)
        sampler = RankSeedSampler(400, 4 * 16, generator, rank, world,
                                  shard_across_ranks=True)
        return router, FastNeighborLoader(
            data, [3, 2], input_nodes=torch.arange(400), batch_size=16,
            sampler=sampler, generator=generator, neighbor_sampler=router,
            pipeline=True)

    def ids(iterator):
        return [batch.n_id.tolist() for batch in iterator]

    router, straight = loader(0)
    ids(straight), ids(straight)  # epochs 0 and 1
    ended = straight.state_dict()  # (epoch 1's time not yet searched)
    iterator = iter(straight)
    first = ids(itertools.islice(iterator, 2))
    state = straight.state_dict()
    rest = ids(iterator)
    out = []
    for saved, expected in ((state, rest), (ended, first + rest)):
        resumed_router, resumed = loader(7)
        resumed.load_state_dict(saved)
        out.append((ids(resumed) == expected, resumed_router.merges,
                    resumed_router.search.history == router.search.history))
    return router.merges, out


def test_the_merge_search_resumes_where_it_stood(metis_parts):
    results = run_ranks(_resumed_search, 2, metis_parts)
    for rank in range(2):
        status, value = results[rank]
        assert status == 'ok', value
        merges, resumed = value
        assert merges == 1  # a merge, found faster
        # resumed mid-epoch 2, and after epoch 1
        assert resumed == [(True, 1, True), (True, 1, True)]
