r"""A graph reads the same in each of PyG's three forms (``Data``,
``HeteroData``, stores): node counts, relations, edges, node attributes, and
the same graph with other edges."""
import pytest
import torch
from torch_geometric.data import Data

from pyg_fastload.caching import stores_from_data
from pyg_fastload.graph import GraphView

from ..helpers import random_hetero_graph


def _pairs(edges):
    return sorted(map(tuple, edges.t().tolist()))


def _homogeneous():
    edge_index = torch.tensor([[0, 1, 2, 3, 4], [1, 2, 0, 0, 3]])
    return Data(x=torch.arange(10.).view(5, 2), edge_index=edge_index,
                y=torch.tensor([0, 1, 1, 0, 1]),
                train_mask=torch.tensor([1, 0, 1, 0, 0]).bool())


@pytest.mark.parametrize('stores', [False, True])
def test_a_homogeneous_graph_reads_alike_in_memory_and_in_stores(stores):
    data = _homogeneous()
    view = GraphView.of(stores_from_data(data) if stores else data)
    assert view.kind.stores is stores and not view.kind.hetero
    assert view.num_nodes() == 5 and view.edge_types() == []
    assert _pairs(view.edges()) == _pairs(data.edge_index)
    assert view.edges().dtype == torch.long
    assert torch.equal(view.node_attr('y', index=torch.tensor([4, 1])),
                       torch.tensor([1, 1]))
    assert torch.equal(view.node_attr('train_mask').view(-1).bool(),
                       data.train_mask)
    assert view.node_attr('no_such_attribute') is None
    fewer = view.with_edges({None: torch.tensor([[4], [0]])})
    again = GraphView.of(fewer)
    assert again.kind == view.kind  # the same form comes back
    assert _pairs(again.edges()) == [(4, 0)] and again.num_nodes() == 5
    assert torch.equal(again.node_attr('x', index=torch.tensor([3])),
                       data.x[3:4])  # features kept


@pytest.mark.parametrize('stores', [False, True])
def test_a_heterogeneous_graph_reads_alike_in_memory_and_in_stores(stores):
    data = random_hetero_graph()
    view = GraphView.of(stores_from_data(data) if stores else data)
    assert view.kind.hetero and view.kind.stores is stores
    assert sorted(view.edge_types()) == sorted(map(tuple, data.edge_types))
    for node_type in data.node_types:
        assert view.num_nodes(node_type) == data[node_type].num_nodes
    for edge_type in data.edge_types:
        assert _pairs(view.edges(edge_type)) == \
            _pairs(data[edge_type].edge_index)
    node_type = data.node_types[0]
    index = torch.tensor([2, 0])
    assert torch.equal(view.node_attr('x', node_type, index),
                       data[node_type].x[index])
    changed, kept = data.edge_types[0], data.edge_types[1]
    out = GraphView.of(view.with_edges({changed: torch.tensor([[0], [1]])}))
    assert out.kind == view.kind
    assert _pairs(out.edges(changed)) == [(0, 1)]
    assert _pairs(out.edges(kept)) == _pairs(data[kept].edge_index)
    assert out.num_nodes(node_type) == data[node_type].num_nodes


def test_anything_else_is_refused_naming_the_argument():
    with pytest.raises(TypeError, match="'graph' must be"):
        GraphView.of({'edge_index': None}, name='graph')
