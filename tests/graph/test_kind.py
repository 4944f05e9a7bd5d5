r"""The kind of graph a loader gets is answered by one function, as PyG's
``DataType.from_data`` does: in memory or stores, typed or not; and the
kind of a graph or topology anywhere else by the functions beside it."""
import pytest
import torch
from torch_geometric.data import Data
from torch_geometric.sampler import HeteroSamplerOutput, SamplerOutput

from pyg_fastload.caching import stores_from_data
from pyg_fastload.graph import (GraphInput, graph_input, is_data, is_hetero,
                                 is_topology, stores_of, topology_of)
from pyg_fastload.graph.kind import is_sampler_output

from ..helpers import random_hetero_graph


def test_each_input_is_told_apart():
    data = Data(x=torch.randn(5, 2), edge_index=torch.tensor([[0, 1],
                                                              [1, 2]]))
    hetero = random_hetero_graph()
    assert graph_input(data) == GraphInput(hetero=False, stores=False)
    assert graph_input(hetero) == GraphInput(hetero=True, stores=False)
    pair = stores_from_data(data)
    assert graph_input(pair) == GraphInput(hetero=False, stores=True)
    assert graph_input(list(pair)) == GraphInput(hetero=False, stores=True)
    assert stores_of(list(pair)) == tuple(pair)
    typed = stores_from_data(hetero)
    assert graph_input(typed) == GraphInput(hetero=True, stores=True)
    assert stores_of(data) is None
    assert stores_of((pair[1], pair[0])) is None  # the order PyG takes


@pytest.mark.parametrize('bad', [None, (1, 2), [torch.zeros(2)], 'cora'])
def test_anything_else_is_refused_naming_the_argument(bad):
    with pytest.raises(TypeError, match=r"^'graph' must be a torch_geometric"
                       r"\.data\.Data, a HeteroData or a \(FeatureStore, "
                       r"GraphStore\) tuple, got "):
        graph_input(bad, 'graph')


def test_each_kind_is_told_apart_by_one_function_per_question():
    data = Data(x=torch.randn(3, 2), edge_index=torch.tensor([[0, 1],
                                                              [1, 2]]))
    hetero = random_hetero_graph()
    topo, typed = topology_of(data), topology_of(hetero)
    pair = stores_from_data(hetero)
    assert [is_data(g) for g in (data, hetero, topo, pair)] == \
        [True, True, False, False]
    assert [is_data(g, hetero=True) for g in (data, hetero)] == [False, True]
    assert [is_data(g, hetero=False) for g in (data, hetero)] == [True, False]
    assert [is_topology(g) for g in (topo, typed, data, None)] == \
        [True, True, False, False]
    assert [is_topology(g, hetero=True) for g in (topo, typed)] == \
        [False, True]
    assert [is_topology(g, hetero=False) for g in (topo, typed)] == \
        [True, False]
    assert [is_hetero(g) for g in (data, hetero, topo, typed, pair,
                                   stores_from_data(data))] == \
        [False, True, False, True, True, False]


def test_a_sampler_output_is_told_apart_by_its_kind():
    out = SamplerOutput(torch.arange(3), torch.tensor([0]),
                        torch.tensor([1]), None)
    typed = HeteroSamplerOutput({'a': torch.arange(3)}, {}, {}, {})
    data = Data(x=torch.randn(3, 2))
    assert [is_sampler_output(o) for o in (out, typed, data, None)] == \
        [True, True, False, False]
    assert [is_sampler_output(o, hetero=True) for o in (out, typed)] == \
        [False, True]
    assert [is_sampler_output(o, hetero=False) for o in (out, typed)] == \
        [True, False]


@pytest.mark.parametrize('bad', [None, {'x': 1}, 'cora'])
def test_is_hetero_refuses_what_is_no_graph_naming_the_argument(bad):
    with pytest.raises(TypeError, match=r"^'graph' must be a torch_geometric"
                       r"\.data\.Data, a HeteroData, a \(FeatureStore, "
                       r"GraphStore\) tuple, a CSCTopology or a "
                       r"HeteroTopology, got "):
        is_hetero(bad, 'graph')
