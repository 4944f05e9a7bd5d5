r"""Layer-wise inference of a heterogeneous graph equals the model's
full-batch forward for every node of every type a relation leads into
(``HeteroConv`` models: the project's ``HeteroNet``, a user's), from a
``HeteroData`` or from stores, in memory or in files."""
import pytest
import torch
from torch_geometric.nn import HeteroConv, SAGEConv

from pyg_fastload.caching import stores_from_data
from pyg_fastload.inference import layerwise_inference
from pyg_fastload.inference.outputs import output_file
from pyg_fastload.lightning.hetero_net import HeteroNet
from pyg_fastload.modes import hetero_schema

from ..helpers import random_hetero_graph, randomise_parameters


def _full_batch(net, data):
    r"""The net's full-batch output of every type (every node's id as its
    ``n_id``, as a batch of the whole graph carries)."""
    whole = data.clone()
    for node_type in whole.node_types:
        whole[node_type].n_id = torch.arange(whole[node_type].num_nodes)
    net.trim = False
    with torch.no_grad():
        return net.embed(whole)


def _net(model, data, layers=2, seed=0):
    r"""A network with every parameter drawn at random (GAT's and the
    linear layers' biases start at zero, where a computation leaving
    them out would still match)."""
    return randomise_parameters(HeteroNet(hetero_schema(data), model, 16,
                                          layers, 0.5, heads=2),
                                seed).eval()


@pytest.mark.parametrize('model', ['sage', 'gat'])
def test_every_type_equals_the_full_batch_forward(model):
    data = random_hetero_graph()
    net = _net(model, data, layers=3)
    expected = _full_batch(net, data)
    out = layerwise_inference(net, data, chunk_size=17, progress=False)
    assert set(out) == set(expected)  # the types a relation leads into
    for node_type, rows in out.items():
        assert rows.shape == expected[node_type].shape
        assert torch.allclose(rows, expected[node_type], atol=1e-5), \
            node_type
    # the logits the model predicts with: its target type's
    assert torch.allclose(out['paper'], net(_whole(data)), atol=1e-5)


def _whole(data):
    whole = data.clone()
    for node_type in whole.node_types:
        whole[node_type].n_id = torch.arange(whole[node_type].num_nodes)
    return whole


def test_stores_and_files_give_the_same_rows(tmp_path):
    data = random_hetero_graph()
    net = _net('sage', data)
    expected = _full_batch(net, data)
    mine = tmp_path / output_file(index=0)  # a user's file of that name
    mine.write_bytes(b'mine')
    out = layerwise_inference(net, stores_from_data(data), chunk_size=50,
                              memory_budget=0, work_dir=tmp_path,
                              progress=False)
    [own] = tmp_path.glob('layerwise-*')  # the run's own directory
    for node_type, rows in out.items():
        assert torch.allclose(rows, expected[node_type], atol=1e-5)
        index = data.node_types.index(node_type)
        assert (own / output_file(index=index)).stat().st_size == \
            rows.numel() * rows.element_size()  # kept in its file
    leftovers = sorted(p.name for p in own.iterdir())
    assert leftovers == sorted(output_file(index=data.node_types.index(t))
                               for t in out)  # the layers' files removed
    assert mine.read_bytes() == b'mine'
    # a second run (other weights) keeps its own files: the first's stand
    with torch.no_grad():
        for param in net.parameters():
            param.add_(0.5)
    again = layerwise_inference(net, stores_from_data(data), chunk_size=50,
                                memory_budget=0, work_dir=tmp_path,
                                progress=False)
    assert len(list(tmp_path.glob('layerwise-*'))) == 2
    for node_type, rows in out.items():
        assert torch.allclose(rows, expected[node_type], atol=1e-5)
        assert not torch.allclose(again[node_type], rows, atol=1e-3)


def test_hidden_rows_are_what_the_last_layer_reads():
    data = random_hetero_graph()
    net = _net('sage', data)
    hidden = layerwise_inference(net, data, hidden=True, progress=False)
    read = {}
    net.convs[-1].register_forward_pre_hook(
        lambda module, args: read.update(args[0]))
    _full_batch(net, data)
    for node_type, rows in hidden.items():
        assert torch.allclose(rows, read[node_type], atol=1e-5)


def test_a_fan_out_is_drawn_the_same_under_a_seed_and_all_of_it_is_exact():
    data = random_hetero_graph()
    net = _net('sage', data)
    sampled = [layerwise_inference(net, data, num_neighbors=[2, 2],
                                   seed=seed, progress=False)['paper']
               for seed in (3, 3, 4)]
    assert torch.equal(sampled[0], sampled[1])
    assert not torch.allclose(sampled[0], sampled[2])
    everything = layerwise_inference(net, data, num_neighbors=[1000, 1000],
                                     progress=False)['paper']
    assert torch.allclose(everything, _full_batch(net, data)['paper'],
                          atol=1e-5)


class _Users(torch.nn.Module):
    r"""A user's HeteroConv model: mean over relations, features as they
    are, ReLU between layers."""
    def __init__(self, edge_types, with_inputs):
        super().__init__()
        self.convs = torch.nn.ModuleList([
            HeteroConv({e: SAGEConv((-1, -1), 8) for e in edge_types},
                       aggr='mean') for _ in range(2)])
        if with_inputs:
            self.node_inputs = lambda t, n_id, x: \
                torch.ones(n_id.numel(), 6) if x is None else x

    def between(self, i, x):
        return x.relu()

    def forward(self, x, edge_index):
        for i, conv in enumerate(self.convs):
            x = conv(x, edge_index)
            if i == 0:
                x = {t: self.between(i, v) for t, v in x.items()}
        return x


def test_a_users_heteroconv_model_with_mean_over_relations():
    data = random_hetero_graph()
    model = _Users(data.edge_types, with_inputs=True)
    x = {t: data[t].x if 'x' in data[t] else
         torch.ones(data[t].num_nodes, 6) for t in data.node_types}
    with torch.no_grad():
        expected = model(x, data.edge_index_dict)  # lazy shapes set too
    out = layerwise_inference(model, data, chunk_size=33, progress=False)
    for node_type, rows in expected.items():
        assert torch.allclose(out[node_type], rows, atol=1e-5)


def test_a_featureless_type_without_node_inputs_is_named():
    data = random_hetero_graph()
    model = _Users(data.edge_types, with_inputs=False)
    with pytest.raises(ValueError, match=r"'institution' has no features "
                                         r"'x'.*node_inputs"):
        layerwise_inference(model, data, progress=False)


def test_features_with_a_row_per_node_of_another_count_are_named():
    data = random_hetero_graph()
    net = _net('sage', data)
    data['paper'].num_nodes = data['paper'].x.size(0) + 1
    with pytest.raises(ValueError, match=r"'x' of 'paper' have 120 rows "
                                         r"but the graph has 121 such"):
        layerwise_inference(net, data, progress=False)


def test_a_relation_the_graph_lacks_is_named():
    data = random_hetero_graph()
    net = _net('sage', data)
    del data['paper', 'cites', 'paper']
    with pytest.raises(ValueError, match=r"relation \['paper', 'cites', "
                                         r"'paper'\].*does not have"):
        layerwise_inference(net, data, progress=False)


def test_with_hidden_gives_every_types_outputs_and_hidden_rows():
    data = random_hetero_graph()
    net = _net('gat', data, layers=3)
    out, hidden = layerwise_inference(net, data, with_hidden=True,
                                      chunk_size=40, progress=False)
    alone = layerwise_inference(net, data, hidden=True, chunk_size=40,
                                progress=False)
    expected = _full_batch(net, data)
    assert set(out) == set(expected) and set(hidden) == set(alone)
    for node_type, rows in out.items():
        assert torch.allclose(rows, expected[node_type], atol=1e-5)
    for node_type, rows in hidden.items():
        assert torch.equal(rows, alone[node_type])


def test_reduce_stores_every_type_reduced():
    data = random_hetero_graph()
    net = _net('sage', data)
    expected = _full_batch(net, data)
    out = layerwise_inference(net, data, chunk_size=17, progress=False,
                              reduce=lambda y: y.argmax(dim=-1))
    assert set(out) == set(expected)
    for node_type, rows in out.items():
        assert torch.equal(rows, expected[node_type].argmax(dim=-1))
