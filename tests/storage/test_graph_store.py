import pytest
import torch

from pyg_fastload.graph import CSCTopology
from pyg_fastload.storage import CSCGraphStore

from ..conftest import random_graph


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


def test_heterogeneous_edges_are_refused():
    store = CSCGraphStore()
    with pytest.raises(NotImplementedError, match='homogeneous'):
        store.put_edge_index((torch.tensor([0]), torch.tensor([1])),
                             edge_type=('a', 'to', 'b'), layout='coo',
                             size=(2, 2))
