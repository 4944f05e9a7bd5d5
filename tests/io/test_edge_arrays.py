r"""Edge arrays of a dataset directory: one row per edge in CSC order (of a
heterogeneous one: per relation, in the relation's CSC order), marked
``"level": "edge"`` in ``meta.json``, checksummed like the others, checked
against the edge count when written and read, and held per relation by the
graph store it opens into."""
import hashlib
import os
import re

import pytest
import torch

from pyg_fastload import open_dataset
from pyg_fastload.datasets import prepare_pyg
from pyg_fastload.graph.topology import CSCTopology
from pyg_fastload.io import (
    DatasetFormatError,
    open_dataset_dir,
    write_dataset_dir,
)
from pyg_fastload.storage import CSCGraphStore

from ..helpers import edit_meta, random_hetero_graph, small_dataset


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


# ------------------------------------------------ per relation --
CITES = ('paper', 'cites', 'paper')
WRITES = ('author', 'writes', 'paper')
#: type-local ids stay below this: ``code = src * M + dst`` names an edge
M = 1000


def codes(edge_index):
    r"""Each edge's name, from its type-local ends."""
    return edge_index[0] * M + edge_index[1]


def relations_of(data):
    r"""Every relation of :obj:`data` as its CSC, ``cites`` as an edge list
    in chunks (sorted by destination, so its list order is its CSC
    order)."""
    num_nodes = {t: data[t].num_nodes for t in data.node_types}
    relations = {}
    for e in data.edge_types:
        relations[e] = CSCTopology.from_edge_index(
            data[e].edge_index, num_nodes[e[2]],
            num_sources=num_nodes[e[0]])
    edge_index = data[CITES].edge_index
    edge_index = edge_index[:, torch.argsort(edge_index[1], stable=True)]
    relations[CITES] = lambda: ((edge_index[0][at:at + 100],
                                 edge_index[1][at:at + 100])
                                for at in range(0, edge_index.size(1), 100))
    return num_nodes, relations, edge_index


def write_coded(path, **kwargs):
    r"""The graph of :func:`random_hetero_graph` with edge arrays naming
    every edge of ``writes`` (``code``, and a 2-column ``pair``) and of
    ``cites`` (``code``), each in its relation's CSC order."""
    data = random_hetero_graph()
    num_nodes, relations, cites = relations_of(data)
    writes = relations[WRITES]
    code = writes.csc_order(codes(data[WRITES].edge_index))
    edge_arrays = {WRITES: {'code': code,
                            'pair': torch.stack([code, -code], 1)},
                   CITES: {'code': codes(cites)}}
    edge_arrays.update(kwargs.pop('edge_arrays', {}))
    return data, write_dataset_dir(
        path, num_nodes=num_nodes, relations=relations,
        node_arrays={'paper': {'x': data['paper'].x}},
        edge_arrays=edge_arrays, name='coded', source='test',
        progress=False, **kwargs)


def csc_codes(topology, edge_type):
    r"""The code of every edge of :obj:`edge_type` in its stored CSC
    order, from the stored topology alone."""
    rel = topology.relation_topology(edge_type)
    return rel.indices.long() * M + rel.destinations()


def test_edge_arrays_round_trip_per_relation(tmp_path):
    data, written = write_coded(tmp_path / 'ds')
    dataset = open_dataset_dir(written.path, verify='checksum')
    topo = dataset.topology
    assert set(dataset.edge_arrays) == set(dataset.edge_types)
    assert set(dataset.edge_arrays[WRITES]) == {'code', 'pair'}
    assert set(dataset.edge_arrays[CITES]) == {'code'}
    for e in dataset.edge_types:
        if e not in (WRITES, CITES):
            assert dataset.edge_arrays[e] == {}, e
    assert set(dataset.arrays['paper']) == {'x'}  # node arrays apart
    # row k: the relation's k-th CSC edge (writes' CSC is not its order)
    rel = topo.relation_topology(WRITES)
    assert not torch.equal(rel.edge_id, torch.arange(rel.num_edges))
    for e in (WRITES, CITES):
        assert torch.equal(dataset.edge_arrays[e]['code'],
                           csc_codes(topo, e)), e
    code = dataset.edge_arrays[WRITES]['code']
    assert torch.equal(dataset.edge_arrays[WRITES]['pair'],
                       torch.stack([code, -code], 1))
    meta = dataset.meta
    specs = meta['arrays']
    for key, shape in (('author__writes__paper.code', [300]),
                       ('author__writes__paper.pair', [300, 2]),
                       ('paper__cites__paper.code', [600])):
        assert specs[key]['level'] == 'edge' and specs[key]['shape'] == \
            shape, key
        assert specs[key]['file'] == f'{key}.bin'
        digest = hashlib.sha256(
            (dataset.path / specs[key]['file']).read_bytes()).hexdigest()
        assert digest == specs[key]['sha256'], key
    assert 'level' not in specs['paper.x']  # a node array, as before
    declared = {tuple(e['type']): e['arrays'] for e in meta['edge_types']}
    assert declared[WRITES] == ['code', 'pair'] and \
        declared[CITES] == ['code']
    # back in every relation's original edge order
    back = dataset.to_hetero_data()
    assert torch.equal(back[WRITES].code, codes(data[WRITES].edge_index))
    assert torch.equal(back[CITES].code, codes(back[CITES].edge_index))


def test_the_graph_store_holds_them_per_relation(tmp_path):
    _, written = write_coded(tmp_path / 'ds')
    _, graph_store = open_dataset(written.path)
    topo = graph_store.topology
    assert graph_store.edge_array_names_of(WRITES) == ['code', 'pair']
    assert graph_store.edge_array_names_of(CITES) == ['code']
    assert graph_store.edge_array_names == []  # no homogeneous graph's
    for e in (WRITES, CITES):
        assert torch.equal(graph_store.edge_array('code', e),
                           csc_codes(topo, e)), e
    assert graph_store.edge_array('code') is None
    assert graph_store.edge_array('time', WRITES) is None
    # another relation's array, put by hand
    rev = ('paper', 'rev_writes', 'author')
    graph_store.put_edge_array('code', csc_codes(topo, rev), rev)
    assert graph_store.edge_array_names_of(rev) == ['code']
    with pytest.raises(ValueError, match=re.escape(
            "edge array 'time' is [299]; give one row per edge of "
            "('author', 'writes', 'paper') (300), in CSC order")):
        graph_store.put_edge_array('time', torch.zeros(299), WRITES)
    with pytest.raises(ValueError, match=re.escape(
            "edge array 'time' of edge type ('paper', 'x', 'paper'): the "
            "store holds no such relation")):
        graph_store.put_edge_array('time', torch.zeros(3),
                                   ('paper', 'x', 'paper'))
    with pytest.raises(ValueError, match='a heterogeneous one: name the '
                       'edge_type'):
        graph_store.put_edge_array('time', torch.zeros(300))
    # a heterogeneous topology and its arrays given at once
    store = CSCGraphStore(topo, {WRITES: {'code': csc_codes(topo, WRITES)}})
    assert store.edge_array_names_of(WRITES) == ['code']


def test_prepare_keeps_every_relations_edge_level_tensors(tmp_path):
    data = random_hetero_graph()
    for e in data.edge_types:
        data[e].time = codes(data[e].edge_index)
    data[WRITES].edge_attr = torch.randn(300, 3)
    data[CITES].note = torch.zeros(7)  # neither level: not stored
    file = tmp_path / 'hetero.pt'
    torch.save(data, file)
    with pytest.warns(UserWarning, match=r"'paper__cites__paper\.note' are "
                      r"neither node-level tensors nor edge-level"):
        dataset = prepare_pyg(file, tmp_path / 'ds', progress=False)
    assert dataset.meta['skipped_attributes'] == ['paper__cites__paper.note']
    dataset = open_dataset_dir(dataset.path, verify='checksum')
    topo = dataset.topology
    for e in data.edge_types:
        # the rows follow the relation's CSC order, each naming its edge
        assert torch.equal(dataset.edge_arrays[e]['time'],
                           csc_codes(topo, e)), e
    rel = topo.relation_topology(WRITES)
    assert set(dataset.edge_arrays[WRITES]) == {'time', 'edge_attr'}
    assert torch.equal(dataset.edge_arrays[WRITES]['edge_attr'],
                       data[WRITES].edge_attr[rel.edge_id])
    assert set(dataset.edge_arrays[CITES]) == {'time'}


@pytest.mark.reliability(
    fault="a heterogeneous relation's edge array with a row count other "
          "than the relation's edges, given to the writer or found on disk",
    behaviour='the writer refuses it before writing anything; the reader '
              'raises DatasetFormatError naming the file, the rows and the '
              'edges')
def test_a_wrong_length_edge_array_of_a_relation_is_refused(tmp_path):
    with pytest.raises(ValueError, match=re.escape(
            "edge array 'time' of edge type ('author', 'writes', 'paper') "
            "(author__writes__paper.time.bin) has 299 rows but the edge type "
            "has 300 edges; pass one row per edge, in CSC order")):
        write_coded(tmp_path / 'short',
                    edge_arrays={WRITES: {'time': torch.zeros(299)}})
    assert os.listdir(tmp_path) == []  # nothing written
    path = write_coded(tmp_path / 'ds')[1].path
    file = path / 'author__writes__paper.code.bin'
    # a consistent meta.json/file pair whose row count is wrong
    with open(file, 'r+b') as f:
        f.truncate(299 * 8)
    edit_meta(path, lambda meta: meta['arrays'][
        'author__writes__paper.code'].update(shape=[299], bytes=299 * 8))
    with pytest.raises(DatasetFormatError, match=re.escape(
            f"{file}: edge array 'code' of edge type ('author', 'writes', "
            f"'paper') has 299 rows (meta.json shape [299]) but the edge "
            f"type has 300 edges")):
        open_dataset_dir(path, verify='none')


@pytest.mark.reliability(
    fault="a heterogeneous directory's meta.json declaring its edge arrays "
          "inconsistently (no level, undeclared, missing, not a list)",
    behaviour='DatasetFormatError naming the file or meta.json, the edge '
              'type and what is wrong')
@pytest.mark.parametrize('edit,match', [
    # read as a node array it would not be one of a relation
    (lambda m: m['arrays']['author__writes__paper.pair'].pop('level'),
     r"author__writes__paper\.pair\.bin: edge array 'pair' of edge type "
     r"\('author', 'writes', 'paper'\) has \"level\": 'node' in meta\.json, "
     r"expected 'edge'"),
    (lambda m: m['edge_types'][1]['arrays'].remove('pair'),
     r"author__writes__paper\.pair\.bin: array "
     r"'author__writes__paper\.pair' belongs to no declared node type's or "
     r"edge type's 'arrays'"),
    (lambda m: m['edge_types'][1]['arrays'].append('time'),
     r"meta\.json: edge type \('author', 'writes', 'paper'\) declares array "
     r"'time', which 'arrays' lacks"),
    (lambda m: m['edge_types'][1].update(arrays='code'),
     r"meta\.json: edge type \('author', 'writes', 'paper'\): 'arrays' is "
     r"not a list of names"),
])
def test_inconsistent_edge_array_declarations_are_named(tmp_path, edit,
                                                        match):
    path = write_coded(tmp_path / 'ds')[1].path
    assert open_dataset_dir(path).meta['edge_types'][1]['type'] == \
        list(WRITES)
    edit_meta(path, edit)
    with pytest.raises(DatasetFormatError, match=match):
        open_dataset_dir(path, verify='none')


@pytest.mark.reliability(
    fault='edge arrays given to the heterogeneous writer for an unknown '
          'relation, under a bad name, or not as a dict',
    behaviour="refused naming 'edge_arrays[...]', the relation or the name")
def test_edge_arrays_of_unknown_relations_or_bad_names_are_refused(tmp_path):
    for arrays, match in (
            ({('paper', 'x', 'paper'): {'code': torch.zeros(1)}},
             r"'edge_arrays\[\('paper', 'x', 'paper'\)\]': \('paper', 'x', "
             r"'paper'\) is not an edge type of 'relations'"),
            ({WRITES: {'a b': torch.zeros(300)}},
             r"invalid edge array name 'a b'"),
            ({WRITES: torch.zeros(300)},
             r"'edge_arrays\[\('author', 'writes', 'paper'\)\]' must be a "
             r"dict of name -> array")):
        with pytest.raises((TypeError, ValueError), match=match):
            write_coded(tmp_path / 'ds', edge_arrays=arrays)
    # the relation's names become the file's name too
    data = random_hetero_graph()
    spaced = ('author', 'is author of', 'paper')
    with pytest.raises(ValueError, match=r"invalid edge array file name "
                       r"'author__is author of__paper\.code'"):
        write_dataset_dir(
            tmp_path / 'ds', num_nodes={'author': 80, 'paper': 120},
            relations={spaced: CSCTopology.from_edge_index(
                data[WRITES].edge_index, 120, num_sources=80)},
            node_arrays={}, edge_arrays={spaced: {'code': torch.zeros(300)}},
            name='t', source='t', progress=False)
    assert os.listdir(tmp_path) == []
    # a node type named as the relation: the files' names would clash
    clash = 'author__writes__paper'
    with pytest.raises(ValueError, match=r"edge array 'code' of \('author', "
                       r"'writes', 'paper'\) and node array 'code' of "
                       r"'author__writes__paper' would both be stored as "
                       r"'author__writes__paper\.code'"):
        write_dataset_dir(
            tmp_path / 'ds', num_nodes={'author': 80, 'paper': 120,
                                        clash: 1},
            relations={WRITES: CSCTopology.from_edge_index(
                data[WRITES].edge_index, 120, num_sources=80)},
            node_arrays={clash: {'code': torch.zeros(1)}},
            edge_arrays={WRITES: {'code': torch.zeros(300)}},
            name='t', source='t', progress=False)
    assert os.listdir(tmp_path) == []
