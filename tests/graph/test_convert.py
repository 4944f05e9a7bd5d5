import pytest
import torch
from torch_geometric.data import Data, HeteroData

from pyg_fastload.graph import CSCTopology, topology_of
from pyg_fastload.storage import CSCGraphStore, TieredFeatureStore

from ..helpers import random_graph


def test_data_gives_its_csc_and_reuses_it(graph):
    topo = topology_of(graph)
    expected = CSCTopology.from_edge_index(graph.edge_index, graph.num_nodes)
    assert torch.equal(topo.indptr, expected.indptr)
    assert torch.equal(topo.indices, expected.indices)
    assert topology_of(graph) is topo  # built once per Data


def test_weights_follow_the_csc_order():
    edge_index = torch.tensor([[0, 1, 2], [2, 0, 1]])  # unsorted by dst
    data = Data(edge_index=edge_index, w=torch.tensor([1., 2., 3.]),
                num_nodes=3)
    topo = topology_of(data, 'w')
    # CSC edge e is original edge edge_id[e], so it carries that weight.
    assert torch.equal(topo.edge_weight,
                       data.w[topo.edge_id.long()].double())


def test_stores_give_the_same_topology(graph):
    feature_store = TieredFeatureStore()
    feature_store.put_tensor(graph.x, group_name=None, attr_name='x',
                             index=None)
    graph_store = CSCGraphStore()
    graph_store.put_edge_index(graph.edge_index, edge_type=None, layout='coo',
        size=(graph.num_nodes, graph.num_nodes))
    topo = topology_of((feature_store, graph_store))
    expected = topology_of(graph)
    assert torch.equal(topo.indptr, expected.indptr)
    assert torch.equal(topo.indices.long(), expected.indices.long())


def _untyped_nodes() -> HeteroData:
    data = HeteroData()
    data['a'].y = 3  # not a tensor: no count can be inferred
    return data


@pytest.mark.parametrize('data, weight_attr, error, match', [
    (_untyped_nodes(), None, ValueError, "node type 'a' has no node count"),
    ('graph', None, TypeError, "'data' must be"),
    (Data(), None, ValueError, "neither 'edge_index' nor a node count"),
    (random_graph(), 'missing', ValueError, "'weight_attr='missing''"),
    (random_graph(), 'edge_attr', ValueError, 'one per edge'),
])
def test_errors_name_the_argument(data, weight_attr, error, match):
    with pytest.raises(error, match=match):
        topology_of(data, weight_attr)


def test_a_graph_without_edges_has_an_empty_topology():
    topology = topology_of(Data(x=torch.zeros(3, 1)))  # as PyG samples it
    assert (topology.num_nodes, topology.num_edges) == (3, 0)


def test_negative_weights_are_refused():
    data = Data(edge_index=torch.tensor([[0], [1]]), w=torch.tensor([-1.]),
                num_nodes=2)
    with pytest.raises(ValueError, match='negative'):
        topology_of(data, 'w')


@pytest.mark.reliability(
    fault='NaN or infinite sampling weights',
    behaviour='`ValueError` naming the attribute and how to fix the weights')
@pytest.mark.parametrize('bad', [float('nan'), float('inf')])
def test_non_finite_weights_are_refused(bad):
    data = Data(edge_index=torch.tensor([[0, 1], [1, 0]]),
                w=torch.tensor([1., bad]), num_nodes=2)
    with pytest.raises(ValueError, match="'weight_attr='w''.*NaN or "
                       "infinite"):
        topology_of(data, 'w')


@pytest.mark.reliability(
    fault=('`edge_index` edited in place, replaced, or `num_nodes` changed '
           'after a loader was built'),
    behaviour='the next loader samples the edited graph (no stale cache)')
def test_edits_of_the_graph_are_never_served_stale():
    data = random_graph(num_nodes=20, num_edges=60)
    first = topology_of(data)
    data.edge_index[0, 0] = (data.edge_index[0, 0] + 1) % 20  # in place
    edited = topology_of(data)
    assert edited is not first
    assert torch.equal(edited.to_edge_index().sort(1).values,
                       CSCTopology.from_edge_index(data.edge_index, 20)
                       .to_edge_index().sort(1).values)
    data.num_nodes = 25  # more nodes, same edges
    assert topology_of(data).num_nodes == 25
    data.edge_index = data.edge_index[:, :30].clone()  # another tensor
    assert topology_of(data).num_edges == 30


@pytest.mark.reliability(
    fault=('a HeteroData edge type whose `edge_attr` has another number of '
           'rows than edges, given to a loader'),
    behaviour=('`ValueError` naming the edge type and both counts when the '
               'loader is built (no batch serves it whole, unsliced)'))
def test_a_hetero_edge_attr_of_another_length_is_refused():
    from pyg_fastload import FastNeighborLoader
    data = HeteroData()
    data['a'].x = torch.randn(3, 2)
    store = data['a', 'to', 'a']
    store.edge_index = torch.tensor([[0, 1, 2], [1, 2, 0]])
    store.edge_attr = torch.randn(4, 2)
    with pytest.raises(ValueError, match=r"data\[\('a', 'to', 'a'\)\]\."
                       r"edge_attr has 4 rows but edge type \('a', 'to', "
                       r"'a'\) has 3 edges"):
        FastNeighborLoader(data, [2], input_nodes='a', batch_size=2)
    del store.edge_attr
    store.edge_label = torch.ones(5)  # link supervision: not one per edge
    assert topology_of(data).num_edges == 3
