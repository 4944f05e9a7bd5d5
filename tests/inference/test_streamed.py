r"""Streamed aggregation (``layerwise_inference(stream=True)``): the layers
that take a mean or a sum of the in-neighbours' rows read their input in
order, block by block, once per range of destinations; the outputs equal
the full-batch forward."""
import pytest
import torch
from torch_geometric.data import Data
from torch_geometric.nn import GAT, GIN, GraphConv, GraphSAGE, SAGEConv

import pyg_fastload.inference.streamed as streamed
from pyg_fastload.inference import layerwise_inference
from pyg_fastload.inference.streamed import streamable


class _GraphConvNet(torch.nn.Module):
    r"""A model with ``convs`` and its own ``between``."""
    def __init__(self):
        super().__init__()
        self.convs = torch.nn.ModuleList([GraphConv(8, 16, aggr='mean'),
                                          GraphConv(16, 4)])

    def forward(self, x, edge_index):
        return self.convs[1](self.convs[0](x, edge_index).relu(),
                             edge_index)


def _graph(num_nodes=300, num_edges=2400, seed=0):
    gen = torch.Generator().manual_seed(seed)
    edge_index = torch.randint(0, num_nodes, (2, num_edges), generator=gen)
    edge_index[1, edge_index[1] < 5] = 5  # nodes 0-4: no in-edge
    return Data(x=torch.randn(num_nodes, 8, generator=gen),
                edge_index=edge_index)


@pytest.fixture
def small_blocks(monkeypatch):
    r"""Blocks of 32 input rows and ranges of a few chunks: many of each."""
    monkeypatch.setattr(streamed, 'BLOCK_ROWS', 32)


@pytest.mark.parametrize('model', [
    lambda: GraphSAGE(8, 16, num_layers=3, out_channels=4),
    lambda: GraphSAGE(8, 16, num_layers=2, out_channels=4, aggr='sum'),
    lambda: GIN(8, 16, num_layers=2, out_channels=4),
    lambda: _GraphConvNet(),
], ids=['sage-mean', 'sage-sum', 'gin', 'graphconv'])
def test_streamed_layers_equal_the_full_batch_forward(small_blocks, model,
                                                     tmp_path):
    torch.manual_seed(0)
    model = model().eval()
    data = _graph()
    between = None if isinstance(model, _GraphConvNet) else 'auto'
    if between is None:
        def between(i, x):  # noqa: E306 (what its forward does)
            return x.relu()
    reads = []

    def record(ids):
        reads.append(ids)
        return data.x[ids]

    from pyg_fastload.inference.layer_run import LayerRun
    from pyg_fastload.inference.layers import model_layers
    from pyg_fastload.graph import topology_of
    layers = model_layers(model, between)
    topology = topology_of(data)
    # a budget whose share holds about 100 destinations' rows per range
    # (the layers' outputs go to files in tmp_path, read back from there)
    budget = int(100 * (16 * 4 + 8) / streamed.STREAM_SHARE)
    with torch.no_grad():
        run = LayerRun(layers, topology, [-1] * layers.num_layers, 0, 40,
                       budget, tmp_path, torch.device('cpu'), False, False,
                       layers.num_layers, stream=True)
        out = run({None: record})
        want = model(data.x, data.edge_index)
    assert torch.allclose(out, want, atol=1e-5)
    # the input was read in blocks of consecutive rows, never gathered
    for ids in reads:
        assert torch.equal(ids, torch.arange(int(ids[0]),
                                             int(ids[0]) + ids.numel()))
    blocks = [ids for ids in reads if ids.numel() == 32 or
              int(ids[-1]) == data.num_nodes - 1 and int(ids[0]) % 32 == 0]
    assert len(blocks) > 9  # several ranges, each reading its blocks


def test_the_api_streams_where_it_can_and_gathers_elsewhere(small_blocks):
    torch.manual_seed(0)
    data = _graph()
    sage = GraphSAGE(8, 16, num_layers=2, out_channels=4).eval()
    got = layerwise_inference(sage, data, chunk_size=64, stream=True,
                              memory_budget='1MiB', progress=False)
    assert torch.allclose(got, sage(data.x, data.edge_index), atol=1e-5)
    gat = GAT(8, 16, num_layers=2, out_channels=4).eval()  # attention
    got = layerwise_inference(gat, data, chunk_size=64, stream=True,
                              progress=False)
    assert torch.allclose(got, gat(data.x, data.edge_index), atol=1e-5)
    with pytest.raises(TypeError, match="'stream' must be True or False"):
        layerwise_inference(sage, data, stream='yes', progress=False)


def test_what_streams():
    assert streamable(SAGEConv(8, 8))
    assert streamable(SAGEConv(8, 8, aggr='sum'))
    assert not streamable(SAGEConv(8, 8, aggr='max'))
    assert not streamable(SAGEConv(8, 8, project=True))
    assert streamable(GraphConv(8, 8))
    assert not streamable(GAT(8, 8, num_layers=1).convs[0])


def test_stream_on_a_heterogeneous_graph_is_refused(hetero_graph):
    with pytest.raises(ValueError, match="'stream=True' is for homogeneous"):
        layerwise_inference(torch.nn.Module(), hetero_graph, stream=True,
                            progress=False)
