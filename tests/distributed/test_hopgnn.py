from datetime import timedelta

import pytest
import torch
import torch.nn.functional as F

from pyg_fastload import FastNeighborLoader
from pyg_fastload.distributed import (
    Collectives,
    DistContext,
    PartitionedFeatureStore,
)
from pyg_fastload.distributed.hopgnn import RootRouter
from pyg_fastload.distributed.parts import open_rank_part
from pyg_fastload.partition import partition_dataset
from pyg_fastload.partition.parts import full_topology
from pyg_fastload.sampling import FastNeighborSampler
from pyg_fastload.storage import CSCGraphStore

from .ranks import run_ranks

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope='module')
def metis_parts(tmp_path_factory, tiny_dir):
    dataset_dir, _ = tiny_dir
    out = tmp_path_factory.mktemp('hopgnn') / 'parts'
    partition_dataset(dataset_dir, out, 2, 'metis', progress=False)
    return out


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
    features, _, book, _ = open_rank_part(parts_dir, coll, progress=False)
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
        from pyg_fastload.partition import PartitionBook
        start, _ = PartitionBook.load(metis_parts).part_range(0)
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
