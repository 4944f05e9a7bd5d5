r"""A dataset's edge arrays (one row per CSC edge) follow the edges into the
parts, and the parts' graph stores hold them."""
import numpy as np
import pytest
import torch

from pyg_fastload.io import open_dataset_dir, write_dataset_dir
from pyg_fastload.partition import open_partition, partition_dataset


@pytest.fixture(scope='module')
def timed_dir(tmp_path_factory, tiny_dir):
    r"""The tiny dataset with an edge array naming each edge: ``code`` =
    source * N + destination (original ids), and a 2-column one."""
    dataset = open_dataset_dir(tiny_dir[0])
    topo = dataset.topology
    n = topo.num_nodes
    code = topo.indices.long() * n + topo.destinations()
    path = tmp_path_factory.mktemp('timed') / 'ds'
    write_dataset_dir(path, num_nodes=n, indptr=topo.indptr,
                      indices=topo.indices, node_arrays=dict(dataset.arrays),
                      edge_arrays={'code': code,
                                   'pair': torch.stack([code, -code], 1)},
                      name='timed', source='tiny with edge codes',
                      num_classes=dataset.num_classes, progress=False)
    return path


@pytest.mark.parametrize('method', ['metis', 'pagraph'])
@pytest.mark.parametrize('local', [False, True])
def test_parts_carry_the_edge_arrays_of_their_edges(timed_dir, tmp_path,
                                                    method, local):
    parts = tmp_path / 'parts'
    partition_dataset(timed_dir, parts, 3, method, progress=False)
    n = open_dataset_dir(timed_dir).num_nodes
    new_id = torch.from_numpy(np.load(parts / 'new_id.npy'))
    order = torch.argsort(new_id)  # original id of every new id
    edges = 0
    for part in range(3):
        features, graph, book = open_partition(parts, part, local=local)
        if local:  # its edges may be fewer: no edge arrays
            assert graph.edge_array_names == []
            graph = open_partition(parts, part)[1]
        topo = graph.topology
        assert graph.edge_array_names == ['code', 'pair']
        code, pair = graph.edge_array('code'), graph.edge_array('pair')
        assert code.numel() == topo.num_edges  # one row per edge
        rows = features.get_tensor(attr_name='global_id', index=None,
                                   group_name=None) if local or \
            method == 'pagraph' else torch.arange(*book.part_range(part))
        dst = rows[topo.destinations()]  # new ids
        src = topo.indices.long()
        # each part edge's row names that very edge
        assert torch.equal(code, order[src] * n + order[dst])
        assert torch.equal(pair, torch.stack([code, -code], 1))
        edges += topo.num_edges
    if method == 'metis':  # disjoint: every edge once
        assert edges == open_dataset_dir(timed_dir).num_edges
