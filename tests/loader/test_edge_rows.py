r"""A homogeneous ``Data`` whose edge-level attribute (``edge_attr``,
``edge_weight``, ...) or named node attribute (``pos``, ...) has the wrong
length: PyG tells edge from node attributes by length
(``Data.is_edge_attr``), so it serves such a tensor whole in every batch,
or slices an ``edge_attr`` of ``num_nodes`` rows by the batch's nodes; the
loaders refuse it, as they refuse it on a ``HeteroData``."""
import numpy as np
import pytest
import torch
from torch_geometric.loader import NeighborLoader

from pyg_fastload import FastLinkNeighborLoader, FastNeighborLoader

from ..helpers import random_graph, random_hetero_graph, requires_torch_sparse

NODES, EDGES = 60, 300

#: A bad attribute, what PyG's batch holds of it (in terms of the batch),
#: and the message.
BAD = {
    'edge_attr one row short': (
        'edge_attr', torch.randn(EDGES - 1, 3), lambda b: EDGES - 1,
        r"^'data\.edge_attr' has 299 rows but 'edge_index' has 300 edges: "
        r"an edge attribute needs one row per edge \(PyG would have it "
        r"served whole in every batch\); give every edge one row of "
        r"'edge_attr', or drop it \(del data\.edge_attr\)"),
    'edge_attr with num_nodes rows': (
        'edge_attr', torch.randn(NODES, 3), lambda b: b.num_nodes,
        r"^'data\.edge_attr' has 60 rows but 'edge_index' has 300 edges: "
        r".*sliced by the batch's nodes, as a node attribute"),
    'edge_weight too long': (
        'edge_weight', torch.rand(EDGES + 5), lambda b: EDGES + 5,
        r"^'data\.edge_weight' has 305 rows but 'edge_index' has 300 "
        r"edges"),
    'NumPy edge_attr': (
        'edge_attr', np.zeros((EDGES + 1, 2)), lambda b: EDGES + 1,
        r"^'data\.edge_attr' has 301 rows but 'edge_index' has 300 edges"),
    'pos one row short': (
        'pos', torch.randn(NODES - 1, 3), lambda b: NODES - 1,
        r"^'data\.pos' has 59 rows but the graph has num_nodes = 60; give "
        r"every node one row"),
}


@requires_torch_sparse
@pytest.mark.reliability(
    fault="a homogeneous Data whose edge_attr / edge_weight (tensor or "
          "NumPy) has the wrong length, or whose pos has the wrong number "
          "of rows",
    behaviour="an error naming 'data.<attr>', its length, the edge (or "
              "node) count and the fix, from both loaders (PyG serves it "
              "whole in every batch, or slices it by the batch's nodes)")
@pytest.mark.parametrize('name', list(BAD))
def test_wrong_length_attributes_are_refused(name):
    r"""Edge- and node-level attributes of the wrong length are refused
    when the loader is built, not served unsliced."""
    key, value, pyg_rows, match = BAD[name]
    data = random_graph(num_nodes=NODES, num_edges=EDGES)
    del data.edge_attr
    data[key] = value
    batch = next(iter(NeighborLoader(data, [-1], batch_size=4)))
    assert batch[key].shape[0] == pyg_rows(batch)  # what PyG serves
    assert batch[key].shape[0] != (batch.num_nodes if key == 'pos'
                                   else batch.edge_index.size(1))
    with pytest.raises(ValueError, match=match):
        FastNeighborLoader(data, [-1], batch_size=4)
    with pytest.raises(ValueError, match=match):
        FastLinkNeighborLoader(data, [-1], batch_size=4)


@requires_torch_sparse
def test_attributes_that_are_not_per_edge_are_served_as_pyg_serves_them():
    r"""What is not per edge by its name keeps PyG's treatment: link labels
    of their own length, a graph-level tensor (whole), and an ``edge_attr``
    of one row per edge (sliced by ``e_id``)."""
    data = random_graph(num_nodes=NODES, num_edges=EDGES)
    data.edge_label = torch.ones(7)
    data.edge_label_weight = torch.ones(7)
    data.graph_feature = torch.tensor([1.0, 2.0])
    ours = next(iter(FastNeighborLoader(data, [-1], batch_size=4)))
    ref = next(iter(NeighborLoader(data, [-1], batch_size=4)))
    assert set(ref.keys()) <= set(ours.keys())
    for key in ('edge_label', 'edge_label_weight', 'graph_feature'):
        assert torch.equal(ours[key], ref[key])
        assert torch.equal(ours[key], data[key])
    assert torch.equal(ours.edge_attr, data.edge_attr[ours.e_id])
    assert torch.equal(ref.edge_attr, data.edge_attr[ref.e_id])


def test_hetero_link_labels_of_their_own_length_are_kept():
    r"""On a ``HeteroData`` too, ``edge_label*`` tensors of a relation are
    link supervision of their own length, not edge rows; a relation's
    ``edge_attr`` of the wrong length is still refused."""
    data = random_hetero_graph()
    relation = ('author', 'writes', 'paper')
    data[relation].edge_label_weight = torch.ones(7)
    batch = next(iter(FastNeighborLoader(data, [2], input_nodes='paper',
                                         batch_size=4)))
    assert torch.equal(batch[relation].edge_label_weight, torch.ones(7))
    data[relation].edge_attr = torch.ones(7, 2)
    with pytest.raises(ValueError, match=r"edge type \('author', 'writes', "
                       r"'paper'\) has 300 edges"):
        FastNeighborLoader(data, [2], input_nodes='paper', batch_size=4)


@requires_torch_sparse
def test_label_edges_as_many_as_the_nodes_are_no_node_attribute():
    r"""An ``edge_label_index`` with as many columns as the graph has nodes
    (a random link split makes one by chance) is taken as PyG takes it, not
    refused as a node attribute of 2 rows."""
    from torch_geometric.loader import LinkNeighborLoader
    n = 6
    data = label_edges_as_many_as_nodes(n)
    kwargs = dict(edge_label_index=data.edge_label_index,
                  edge_label=data.edge_label, batch_size=n)
    ours = next(iter(FastLinkNeighborLoader(data, [2], **kwargs)))
    pyg = next(iter(LinkNeighborLoader(data, [2], **kwargs)))
    assert torch.equal(ours.n_id[ours.edge_label_index],
                       pyg.n_id[pyg.edge_label_index])
    assert torch.equal(ours.edge_label, pyg.edge_label)


def label_edges_as_many_as_nodes(n):
    from torch_geometric.data import Data
    return Data(x=torch.randn(n, 4), num_nodes=n,
                edge_index=torch.tensor([[0, 1, 2, 3, 4, 5, 0],
                                         [1, 2, 3, 4, 5, 0, 3]]),
                edge_label_index=torch.tensor([[0, 1, 2, 3, 4, 5],
                                               [2, 3, 4, 5, 0, 1]]),
                edge_label=torch.ones(n))
