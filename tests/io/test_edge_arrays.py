r"""Edge arrays of a dataset directory: one row per edge in CSC order,
marked ``"level": "edge"`` in ``meta.json``, checksummed like the others,
checked against ``num_edges`` when read."""
import hashlib
import os

import pytest
import torch

from pyg_fastload.graph.topology import CSCTopology
from pyg_fastload.io import (
    DatasetFormatError,
    open_dataset_dir,
    write_dataset_dir,
)

from ..helpers import edit_meta, small_dataset

#: Not sorted by destination: the CSC order differs from this one.
EDGES = torch.tensor([[1, 2, 0, 3, 5, 4, 0], [0, 0, 1, 2, 2, 3, 5]]).flip(1)


def write_timed(path, time=None, **arrays):
    r"""A 6-node graph with edge arrays (a
    ``time`` per edge, in CSC order, by default)."""
    topo = CSCTopology.from_edge_index(EDGES, num_nodes=6)
    if time is None:
        time = topo.csc_order(torch.arange(7) * 10)
    return write_dataset_dir(
        path, num_nodes=6, indptr=topo.indptr, indices=topo.indices,
        edge_id=topo.edge_id, node_arrays={'x': torch.ones(6, 2)},
        edge_arrays={'time': time, **arrays}, name='timed', source='test',
        progress=False)


def test_edge_arrays_round_trip(tmp_path):
    topo = CSCTopology.from_edge_index(EDGES, num_nodes=6)
    weight = torch.randn(7, 3)
    dataset = write_timed(tmp_path / 'ds', weight=topo.csc_order(weight))
    dataset = open_dataset_dir(dataset.path, verify='checksum')
    assert dataset.topology.edge_id is not None
    assert set(dataset.edge_arrays) == {'time', 'weight'}
    assert set(dataset.arrays) == {'x'}  # node arrays apart
    # row k: the edge at CSC position k, originally at edge_id[k]
    assert torch.equal(dataset.edge_arrays['time'],
                       dataset.topology.edge_id * 10)
    assert torch.equal(dataset.edge_arrays['weight'],
                       weight[dataset.topology.edge_id])
    specs = dataset.meta['arrays']
    assert specs['time']['level'] == specs['weight']['level'] == 'edge'
    assert specs['time']['shape'] == [7] and \
        specs['weight']['shape'] == [7, 3]
    assert 'level' not in specs['x']  # a node array, as before
    for key in ('time', 'weight'):
        digest = hashlib.sha256(
            dataset.array_path(key).read_bytes()).hexdigest()
        assert digest == specs[key]['sha256'], key
    # a directory without edge arrays (format_version 1) reads as before
    plain = open_dataset_dir(small_dataset(tmp_path / 'plain').path)
    assert plain.edge_arrays == {} and set(plain.arrays) == {'x', 'y'}


@pytest.mark.reliability(
    fault="an edge array of another length than the graph's edges, written "
          "or found in a dataset directory; an unknown array 'level'",
    behaviour='the writer refuses it naming the array, its file and both '
              'lengths (nothing written); the reader raises '
              '`DatasetFormatError` naming the file (or meta.json and the '
              'field)')
def test_a_wrong_length_edge_array_is_refused(tmp_path):
    with pytest.raises(ValueError, match=r"edge array 'time' \(time\.bin\) "
                       r"has 6 rows but the graph has 7 edges; pass one row "
                       r"per edge, in CSC order"):
        write_timed(tmp_path / 'short', time=torch.arange(6))
    assert os.listdir(tmp_path) == []
    path = write_timed(tmp_path / 'ds').path
    # a consistent meta.json/file pair whose row count is wrong
    with open(path / 'time.bin', 'r+b') as f:
        f.truncate(6 * 8)
    edit_meta(path, lambda meta: meta['arrays']['time'].update(shape=[6],
                                                                bytes=48))
    with pytest.raises(DatasetFormatError, match=r"time\.bin: edge array "
                       r"'time' has 6 rows .* but num_edges = 7"):
        open_dataset_dir(path, verify='none')
    # read as a node array (no level) it would fit 6 nodes: the level counts
    edit_meta(path, lambda meta: meta['arrays']['time'].update(level='row'))
    with pytest.raises(DatasetFormatError, match=r"meta\.json: array 'time'"
                       r": 'level' = 'row' is not one of 'node', 'edge'"):
        open_dataset_dir(path, verify='none')


@pytest.mark.reliability(
    fault="`write_dataset_dir(..., edge_arrays=[array])` (a list, not a "
          "dict by name)",
    behaviour="`TypeError` naming 'edge_arrays' and the dict it takes; "
              "nothing written (was: 'invalid edge array name tensor(0)')")
def test_an_edge_array_name_is_checked(tmp_path):
    topo = CSCTopology.from_edge_index(EDGES, num_nodes=6)
    common = dict(num_nodes=6, indptr=topo.indptr, indices=topo.indices,
                  name='a', source='t', progress=False)
    with pytest.raises(ValueError, match=r"'edge_arrays': edge array 'time' "
                       r"and node array 'time' would both be stored as "
                       r"'time'"):
        write_dataset_dir(tmp_path / 'a', node_arrays={'time': torch.ones(6)},
                          edge_arrays={'time': torch.ones(7)}, **common)
    with pytest.raises(ValueError, match=r"invalid edge array name 'edge_id'"
                       r" in 'edge_arrays'"):
        write_dataset_dir(tmp_path / 'a', node_arrays={},
                          edge_arrays={'edge_id': torch.ones(7)}, **common)
    for arrays in ([torch.arange(7)], (torch.arange(7), ), torch.arange(7)):
        with pytest.raises(TypeError, match=r"'edge_arrays' must be a dict "
                           r"of name -> array \(e\.g\. \{'time': times\}\), "
                           r"got (list|tuple|Tensor)"):
            write_dataset_dir(tmp_path / 'a', node_arrays={},
                              edge_arrays=arrays, **common)
    assert os.listdir(tmp_path) == []
