r"""A part's topology relabelled to its own rows (``local_topology``),
chunk by chunk."""
import pytest
import torch

import pyg_fastload.graph.local as local
from pyg_fastload.graph import CSCTopology, local_topology


def _reference(topology, rows, index_space):
    r"""Every list relabelled at once, neighbours no row holds dropped."""
    lookup = torch.full((index_space, ), -1, dtype=torch.long)
    lookup[rows] = torch.arange(rows.numel())
    lists, indptr = [], [0]
    for v in range(topology.num_nodes):
        ids = lookup[topology.indices[topology.indptr[v]:
                                      topology.indptr[v + 1]].long()]
        lists.append(ids[ids >= 0])
        indptr.append(indptr[-1] + lists[-1].numel())
    return torch.tensor(indptr), torch.cat(lists)


@pytest.mark.parametrize('chunk', [3, 7, 2**24])
def test_relabelled_lists_equal_the_whole_relabel(monkeypatch, chunk):
    monkeypatch.setattr(local, 'RELABEL_CHUNK', chunk)
    gen = torch.Generator().manual_seed(0)
    index_space, num_rows = 60, 25
    degree = torch.randint(0, 5, (num_rows, ), generator=gen)
    degree[[0, 7, 24]] = 0  # empty lists, the last one included
    indptr = torch.zeros(num_rows + 1, dtype=torch.long)
    torch.cumsum(degree, 0, out=indptr[1:])
    indices = torch.randint(0, index_space, (int(indptr[-1]), ),
                            generator=gen).int()
    rows = torch.randperm(index_space, generator=gen)[:num_rows]
    topology = CSCTopology(indptr, indices, num_rows)
    got, dropped = local_topology(topology, rows, index_space)
    want_ptr, want_idx = _reference(topology, rows, index_space)
    assert torch.equal(got.indptr, want_ptr)
    assert torch.equal(got.indices.long(), want_idx)
    assert got.indices.dtype == torch.int32
    assert dropped == int(indptr[-1]) - want_idx.numel() > 0
