r"""Parity with PyG's samplers backed by pyg-lib, where pyg-lib is
installed (it is not on the package index; docs/benchmarks.md says how to
build the wheel): heterogeneous temporal neighbourhoods and disjoint link
layouts, which PyG offers only through pyg-lib. Skipped without it."""
import importlib.util

import pytest
import torch
from torch_geometric.loader import LinkNeighborLoader, NeighborLoader
from torch_geometric.sampler import NegativeSampling

from pyg_fastload import FastLinkNeighborLoader, FastNeighborLoader
from tests.sampling.test_temporal import RELATIONS, timed_hetero

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec('pyg_lib') is None,
    reason="needs pyg-lib, which is not on the package index (so never in "
    "this suite's venv; docs/benchmarks.md builds its wheel): PyG without "
    "it refuses 'disjoint' sampling, which temporal sampling implies "
    "(torch_sparse has no disjoint sampler), so there is no reference; "
    "test_temporal.py checks one hop of every neighbour exactly")


def _edges_per_tree(batch):
    out = {}
    for e in RELATIONS:
        tree = batch[e[2]].batch[batch[e].edge_index[1]]
        out[e] = sorted(zip(tree.tolist(), batch[e].e_id.tolist()))
    return out


@pytest.mark.parametrize('level,untimed', [
    ('node', None), ('edge', None), ('node', 'user'),
    ('edge', ('item', 'also', 'item'))])
def test_hetero_temporal_neighbourhoods_equal_pyg_lib(level, untimed):
    data = timed_hetero(1, level, untimed=untimed)
    times = torch.randint(0, 100, (40, ),
                          generator=torch.Generator().manual_seed(2))
    kwargs = dict(num_neighbors=[-1, -1],
                  input_nodes=('item', torch.arange(40)), input_time=times,
                  time_attr='time', batch_size=40, disjoint=True)
    ours = next(iter(FastNeighborLoader(data, **kwargs)))
    pyg = next(iter(NeighborLoader(data, **kwargs)))
    assert _edges_per_tree(ours) == _edges_per_tree(pyg)


@pytest.mark.parametrize('edge_type', [RELATIONS[0], RELATIONS[2]])
def test_disjoint_hetero_link_layout_equals_pyg_lib(edge_type):
    data = timed_hetero(5)
    kwargs = dict(num_neighbors=[3, 2], batch_size=20, disjoint=True,
                  edge_label_index=(edge_type,
                                    data[edge_type].edge_index[:, :20]),
                  neg_sampling=NegativeSampling('binary', amount=0.5))
    ours = next(iter(FastLinkNeighborLoader(data, **kwargs)))
    pyg = next(iter(LinkNeighborLoader(data, **kwargs)))
    src, _, dst = edge_type
    for batch in (ours, pyg):
        index = batch[edge_type].edge_label_index
        batch.trees = (batch[src].batch[index[0]], batch[dst].batch[index[1]])
    assert torch.equal(ours.trees[0], pyg.trees[0])
    assert torch.equal(ours.trees[1], pyg.trees[1])
