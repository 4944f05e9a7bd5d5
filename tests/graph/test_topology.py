import pytest
import torch

from pyg_fastload import CSCTopology

from ..helpers import random_graph


def test_csc_groups_in_neighbors_by_destination():
    data = random_graph()
    topo = CSCTopology.from_edge_index(data.edge_index, data.num_nodes)
    assert topo.indices.dtype == torch.int32
    assert topo.indptr[-1] == data.num_edges == topo.num_edges
    for v in [0, 5, 17]:
        got = topo.indices[topo.indptr[v]:topo.indptr[v + 1]].tolist()
        mask = data.edge_index[1] == v
        assert got == data.edge_index[0, mask].tolist()  # stable order
    # edge_id maps CSC positions back to the original edges:
    assert torch.equal(data.edge_index[:, topo.edge_id.long()],
                       topo.to_edge_index())
    assert torch.equal(topo.in_degree(),
                       torch.bincount(data.edge_index[1], minlength=200))
    assert torch.equal(topo.out_degree(),
                       torch.bincount(data.edge_index[0], minlength=200))


def test_out_degree_counted_in_chunks(monkeypatch):
    from pyg_fastload.graph import topology
    data = random_graph()
    topo = CSCTopology.from_edge_index(data.edge_index, data.num_nodes)
    monkeypatch.setattr(topology, '_COUNT_CHUNK', 333)  # 2000 edges: 7
    assert torch.equal(topo.out_degree(),
                       torch.bincount(data.edge_index[0], minlength=200))


def test_sorted_input_keeps_identity_and_weights():
    edge_index = torch.tensor([[1, 2, 0, 2], [0, 0, 1, 2]])
    topo = CSCTopology.from_edge_index(edge_index, 3,
                                       edge_weight=torch.arange(4.))
    assert topo.edge_id is None
    assert topo.indptr.tolist() == [0, 2, 3, 4]
    assert topo.edge_weight.tolist() == [0., 1., 2., 3.]
    unsorted = CSCTopology.from_edge_index(edge_index.flip(1), 3,
                                           edge_weight=torch.arange(4.))
    assert unsorted.edge_weight.tolist() == [2., 3., 1., 0.]


def test_bad_edge_index():
    with pytest.raises(ValueError, match=r'shape \[2, num_edges\]'):
        CSCTopology.from_edge_index(torch.zeros(3, 4, dtype=torch.long))
    with pytest.raises(TypeError, match='integer'):
        CSCTopology.from_edge_index(torch.zeros(2, 4))
    with pytest.raises(ValueError, match='node id 5'):
        CSCTopology.from_edge_index(torch.tensor([[0, 5], [1, 1]]), 3)
    with pytest.raises(ValueError, match='node id -1'):
        CSCTopology.from_edge_index(torch.tensor([[0, -1], [1, 1]]), 3)
    empty = CSCTopology.from_edge_index(torch.zeros(2, 0, dtype=torch.long),
                                        4)
    assert empty.indptr.tolist() == [0] * 5
