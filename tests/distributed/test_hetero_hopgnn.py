r"""HopGNN on heterogeneous partitions: roots of the labelled type routed to
the rank holding their features, micrographs over every relation of the
whole typed topology, and time steps of a typed batch trained one by one
with the whole batch's result."""
from datetime import timedelta

import pytest
import torch

from pyg_fastload import FastNeighborLoader
from pyg_fastload.distributed import Collectives, DistContext
from pyg_fastload.distributed.dsp import open_dsp_rank
from pyg_fastload.distributed.hopgnn import split_time_steps
from pyg_fastload.lightning.hetero_net import HeteroNet
from pyg_fastload.modes import hetero_schema
from pyg_fastload.partition.part_dirs import full_topology
from pyg_fastload.sampling import HeteroNeighborSampler

from ..helpers import new_id_topology, random_hetero_graph
from .ranks import run_ranks

pytestmark = pytest.mark.timeout(240)


def _steps_batch(data, ptr, seeds=30):
    loader = FastNeighborLoader(data, [3, 2], batch_size=seeds,
                                input_nodes=('paper', torch.arange(seeds)),
                                disjoint=True)
    batch = next(iter(loader))
    batch.step_ptr = torch.tensor(ptr)
    return batch


@pytest.mark.parametrize('trim', [False, True])
def test_typed_time_steps_give_the_whole_batch_logits(trim):
    data = random_hetero_graph()
    ptr = [0, 11, 11, 19, 30]  # an empty step too
    batch = _steps_batch(data, ptr)
    torch.manual_seed(0)
    net = HeteroNet(hetero_schema(data), 'sage', 16, 2, 0.0,
                    node_embeddings=True, trim=trim).eval()
    with torch.no_grad():
        whole = net(batch)[:30]
        steps = split_time_steps(batch)
        parts = [net(step)[:step['paper'].batch_size] for step in steps]
    assert [s['paper'].batch_size for s in steps] == [11, 0, 8, 11]
    assert torch.allclose(torch.cat(parts), whole, atol=1e-5)
    # every node and edge in exactly one step, the hop counts split
    for node_type in batch.node_types:
        assert sum(s[node_type].num_nodes for s in steps) == \
            batch[node_type].num_nodes
        hops = torch.tensor([s[node_type].num_sampled_nodes for s in steps])
        assert hops.sum(0).tolist() == batch[node_type].num_sampled_nodes
        ids = torch.cat([s[node_type].n_id for s in steps])
        assert sorted(ids.tolist()) == sorted(batch[node_type].n_id.tolist())
    for edge_type in batch.edge_types:
        assert sum(s[edge_type].edge_index.size(1) for s in steps) == \
            batch[edge_type].edge_index.size(1)
    # step j's seeds are roots [ptr[j], ptr[j + 1]) with their labels
    for j, step in enumerate(steps):
        size = step['paper'].batch_size
        assert torch.equal(step['paper'].n_id[:size],
                           batch['paper'].n_id[ptr[j]:ptr[j + 1]])
        assert torch.equal(step['paper'].y[:size],
                           batch['paper'].y[ptr[j]:ptr[j + 1]])


def _route(rank, world, parts_dir, drawn):
    coll = Collectives(DistContext.current(timedelta(seconds=30)))
    dsp = open_dsp_rank(parts_dir, coll, feature_centric=True)
    router = dsp.sampler([-1, -1])
    roots = torch.tensor(drawn[rank])
    loader = FastNeighborLoader(dsp.data, [-1, -1], batch_size=roots.numel(),
                                input_nodes=(dsp.target, roots),
                                neighbor_sampler=router)
    batch = next(iter(loader))
    size = batch[dsp.target].batch_size
    trained = batch[dsp.target].n_id[:size]
    homes = dsp.book.owner(trained, dsp.target)
    nodes = {t: batch[t].n_id.tolist() for t in batch.node_types}
    edges = {'__'.join(e): batch[e].edge_index.size(1)
             for e in batch.edge_types}
    x = batch['paper'].x.size(0)  # every paper's row gathered
    dsp.close()
    return (type(router).__name__, trained.tolist(),
            bool((homes == rank).all()), batch.step_ptr.tolist(), nodes,
            edges, x, router.stats())


def test_typed_roots_train_at_home_on_their_micrographs(hetero_parts):
    dataset_dir, parts = hetero_parts
    whole, target = new_id_topology(dataset_dir, parts)
    # the whole topology the ranks assemble from their parts is the graph
    assembled = full_topology(parts)
    assert assembled.edge_types == whole.edge_types
    assert torch.equal(assembled.node_offset, whole.node_offset)
    for edge_type in whole.edge_types:
        a = assembled.relation_topology(edge_type)
        w = whole.relation_topology(edge_type)
        assert torch.equal(a.indptr, w.indptr)
        for col in range(0, a.num_nodes, 37):
            got = a.indices[a.indptr[col]:a.indptr[col + 1]]
            want = w.indices[w.indptr[col]:w.indptr[col + 1]]
            assert sorted(got.tolist()) == sorted(want.tolist())
    drawn = [list(range(0, 400, 13)), list(range(5, 400, 17))]
    results = run_ranks(_route, 2, parts, drawn)
    local = HeteroNeighborSampler(whole, [-1, -1], disjoint=True)
    trained = []
    for rank in range(2):
        status, value = results[rank]
        assert status == 'ok', value
        kind, roots, at_home, ptr, nodes, edges, x, stats = value
        assert kind == 'HeteroRootRouter'
        assert at_home and roots  # every root on the rank holding it
        assert ptr[-1] == len(roots) and len(ptr) == 3  # a step per model
        trained += roots
        # full fan-outs: the micrographs sampling on one machine draws
        ref = local.sample_hetero(target, torch.tensor(roots))
        for node_type, ids in ref.node.items():
            assert sorted(nodes[node_type]) == sorted(ids.tolist())
        for edge_type, row in ref.row.items():
            assert edges['__'.join(edge_type)] == row.numel()
        assert x == len(nodes['paper'])
        # other ranks' rows were fetched: some of the micrographs' rows
        assert 0 < stats['remote'] < stats['rows']
    assert sorted(trained) == sorted(drawn[0] + drawn[1])
