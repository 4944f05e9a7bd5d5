import pytest
import torch

from pyg_fastload.graph import CSCTopology
from pyg_fastload.storage import CSCGraphStore

from ..helpers import random_graph


def edges(row, col):
    return sorted(zip(row.tolist(), col.tolist()))


def test_layouts_hold_the_same_edges_in_original_order():
    data = random_graph(num_nodes=50, num_edges=300)
    store = CSCGraphStore(CSCTopology.from_edge_index(data.edge_index, 50))
    row, col = store.get_edge_index(edge_type=None, layout='coo')
    assert torch.equal(torch.stack([row, col]), data.edge_index)  # e_id
    rowptr, col_csr = store.get_edge_index(edge_type=None, layout='csr')
    src = torch.repeat_interleave(torch.arange(50), rowptr.diff())
    assert edges(src, col_csr) == edges(*data.edge_index)
    indices, indptr = store.get_edge_index(edge_type=None, layout='csc')
    dst = torch.repeat_interleave(torch.arange(50), indptr.diff())
    assert edges(indices, dst) == edges(*data.edge_index)


@pytest.mark.parametrize('layout', ['coo', 'csr', 'csc'])
def test_put_in_any_layout(layout):
    data = random_graph(num_nodes=20, num_edges=60)
    reference = CSCGraphStore(CSCTopology.from_edge_index(data.edge_index,
                                                          20))
    index = reference.get_edge_index(edge_type=None, layout=layout)
    store = CSCGraphStore()
    store.put_edge_index(index, edge_type=None, layout=layout, size=(20, 20))
    assert store.topology.num_nodes == 20
    row, col = store.get_edge_index(edge_type=None, layout='coo')
    assert edges(row, col) == edges(*data.edge_index)


@pytest.mark.parametrize('layout', ['coo', 'csr', 'csc'])
def test_relations_are_held_per_edge_type(hetero_graph, layout):
    store = CSCGraphStore()
    for edge_type in hetero_graph.edge_types:
        src, _, dst = edge_type
        size = (hetero_graph[src].num_nodes, hetero_graph[dst].num_nodes)
        # put in any layout, through a store holding that relation alone
        single = CSCGraphStore()
        single.put_edge_index(hetero_graph[edge_type].edge_index,
                              edge_type=edge_type, layout='coo', size=size)
        index = single.get_edge_index(edge_type=edge_type, layout=layout,
                                      size=size)
        store.put_edge_index(index, edge_type=edge_type, layout=layout,
                             size=size)
    attrs = {a.edge_type: a.size for a in store.get_all_edge_attrs()}
    assert attrs[('author', 'writes', 'paper')] == (80, 120)
    for edge_type in hetero_graph.edge_types:
        row, col = store.get_edge_index(edge_type=edge_type, layout='coo')
        assert edges(row, col) == edges(*hetero_graph[edge_type].edge_index)
    assert store.topology.num_nodes_of('institution') == 10


def test_inconsistent_node_counts_are_named():
    store = CSCGraphStore()
    edge = (torch.tensor([0]), torch.tensor([1]))
    store.put_edge_index(edge, edge_type=('a', 'to', 'b'), layout='coo',
                         size=(2, 2))
    store.put_edge_index(edge, edge_type=('b', 'to', 'a'), layout='coo',
                         size=(3, 2))
    with pytest.raises(ValueError, match="node type 'b' was put with 2 and "
                       "3 nodes"):
        store.get_all_edge_attrs()
    with pytest.raises(ValueError, match=r"size=\(num_source_nodes"):
        CSCGraphStore().put_edge_index(edge, edge_type=('a', 'to', 'b'),
                                       layout='coo')
