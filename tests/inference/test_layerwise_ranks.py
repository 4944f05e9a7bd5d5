r"""Layer-wise inference shared by several ranks: each computes every
``world_size``-th chunk of every layer and receives the others' rows, and
every rank returns what one process computes alone."""
from datetime import timedelta

import pytest
import torch

from pyg_fastload.inference import layerwise_inference

from ..distributed.ranks import run_ranks
from ..helpers import random_graph, random_hetero_graph

pytestmark = pytest.mark.timeout(180)

CHUNK = 17


def _sage():
    from torch_geometric.nn import GraphSAGE
    torch.manual_seed(0)
    return GraphSAGE(8, 16, num_layers=3, out_channels=5).eval()


def _hetero_net(data):
    from pyg_fastload.lightning.hetero_net import HeteroNet
    from pyg_fastload.modes import hetero_schema
    torch.manual_seed(0)
    return HeteroNet(hetero_schema(data), 'sage', 16, 2, 0.0,
                     node_embeddings=True).eval()


def _infer(rank, world, hetero):
    from pyg_fastload.distributed import Collectives, DistContext
    coll = Collectives(DistContext.current(timedelta(seconds=30)))
    data = random_hetero_graph() if hetero else random_graph()
    model = _hetero_net(data) if hetero else _sage()
    out = layerwise_inference(model, data, chunk_size=CHUNK, progress=False,
                              collectives=coll)
    received = coll.counters.snapshot()['features']['bytes_received']
    if hetero:
        return {t: v.tolist() for t, v in out.items()}, received
    return out.tolist(), received


@pytest.mark.parametrize('hetero', [False, True])
def test_ranks_share_the_chunks_and_return_every_row(hetero):
    data = random_hetero_graph() if hetero else random_graph()
    model = _hetero_net(data) if hetero else _sage()
    alone = layerwise_inference(model, data, chunk_size=CHUNK,
                                progress=False)
    results = run_ranks(_infer, 2, hetero)
    for rank in range(2):
        status, value = results[rank]
        assert status == 'ok', value
        out, received = value
        if hetero:
            assert set(out) == set(alone)
            for node_type, rows in out.items():
                assert torch.allclose(torch.tensor(rows), alone[node_type],
                                      atol=1e-5), node_type
            assert received > 0
            continue
        assert torch.allclose(torch.tensor(out), alone, atol=1e-5)
        # each rank computed every other chunk and received the rest:
        # the other rank's rows of the three layers (16, 16, 5 wide)
        rows = torch.arange(data.num_nodes)
        theirs = int(((rows // CHUNK) % 2 != rank).sum())
        assert received == theirs * (16 + 16 + 5) * 4
