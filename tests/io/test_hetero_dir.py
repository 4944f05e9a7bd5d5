r"""Heterogeneous dataset directories: round trips, versions, corruption."""
import json
import re

import numpy as np
import pytest
import torch

import pyg_fastload.io
from pyg_fastload.datasets import generate_hetero
from pyg_fastload.datasets import write_graph
from pyg_fastload.io import (
    HETERO_FORMAT_VERSION,
    DatasetFormatError,
    OnDiskDataset,
    OnDiskHeteroDataset,
    open_dataset_dir,
    write_dataset_dir,
)

from ..helpers import edit_meta, small_dataset


def tiny(path, seed=0):
    data = generate_hetero('hetero-tiny', seed=seed)
    data['author'].x = torch.randn(data['author'].num_nodes, 3)
    return data, write_graph(data, path, name='tiny', source='test',
                                   progress=False)


def test_round_trip_keeps_every_type_row_and_edge(tmp_path):
    data, ds = tiny(tmp_path / 'ds')
    meta = json.loads((ds.path / 'meta.json').read_text())
    assert meta['format_version'] == HETERO_FORMAT_VERSION == 2
    assert meta['kind'] == 'hetero' and meta['target'] == 'paper'
    declared = {t['name']: t['arrays'] for t in meta['node_types']}
    assert declared['institution'] == []  # declared, not faked
    assert declared['author'] == ['x']
    assert ds.num_classes == int(data['paper'].y.max()) + 1
    back = open_dataset_dir(ds.path, verify='checksum') \
        .to_hetero_data()
    assert back.node_types == data.node_types
    assert back.edge_types == data.edge_types
    for t in data.node_types:
        assert back[t].num_nodes == data[t].num_nodes
        for key, value in data[t].items():
            if key != 'num_nodes':
                assert torch.equal(back[t][key], value), (t, key)
    for e in data.edge_types:
        assert torch.equal(back[e].edge_index, data[e].edge_index), e


@pytest.mark.reliability(
    fault='a directory of one kind opened as the other, or one of a newer '
          'format read as if known',
    behaviour='one reader opens each kind as its own dataset object; a '
              'newer version is an error naming it and the fix')
def test_one_reader_opens_both_kinds_and_names_a_newer_version(tmp_path):
    _, ds = tiny(tmp_path / 'ds')
    assert isinstance(open_dataset_dir(ds.path), OnDiskHeteroDataset)
    homo = small_dataset(tmp_path / 'homo').path
    assert isinstance(open_dataset_dir(homo), OnDiskDataset)
    edit_meta(ds.path, lambda meta: meta.update(format_version=3))
    with pytest.raises(DatasetFormatError, match='format_version 3.*'
                       'upgrade pyg-fastload'):
        open_dataset_dir(ds.path)


def test_the_folded_names_say_where_they_went():
    for old, new in (('open_hetero_dataset_dir', 'open_dataset_dir'),
                     ('write_hetero_dataset_dir', 'write_dataset_dir')):
        # an ImportError, so `from pyg_fastload.io import old` shows it too
        with pytest.raises(ImportError, match=f'{new} serves both'):
            getattr(pyg_fastload.io, old)


def _indices(path):
    spec = json.loads((path / 'meta.json').read_text())['arrays']['indices']
    return np.memmap(path / spec['file'], dtype=spec['dtype'], mode='r+')


@pytest.mark.reliability(
    fault="a relation's stored source ids point into another node type",
    behaviour='the edge type and its source type named at open')
def test_source_ids_of_another_type_are_refused(tmp_path):
    _, ds = tiny(tmp_path / 'ds')
    first = ds.edge_types[0]
    start = int(ds.topology.edge_offset[0])
    bad = int(ds.topology.node_offset[-1]) - 1  # a node of the last type
    assert ds.topology.node_type_of(torch.tensor([bad])).item() != \
        ds.node_types.index(first[0])
    indices = _indices(ds.path)
    indices[start] = bad
    indices.flush()
    with pytest.raises(DatasetFormatError, match=re.escape(
            f"edge type {first} has source ids outside its source type "
            f"'{first[0]}'")):
        open_dataset_dir(ds.path)
    with pytest.raises(DatasetFormatError, match='sha256'):
        open_dataset_dir(ds.path, verify='checksum')


@pytest.mark.parametrize('edit,match', [
    (lambda m: m['node_types'][0].update(num_nodes=5),
     "'num_nodes' = 742 .* not the sums"),
    (lambda m: m['edge_types'][0].update(type=['paper', 'x', 'venue']),
     "names node type 'venue', which is not declared"),
    (lambda m: m['node_types'].append(dict(m['node_types'][1])),
     "node type 'author' is declared twice"),
    (lambda m: m['node_types'][1]['arrays'].append('y'),
     "node type 'author' declares array 'y', which 'arrays' lacks"),
    (lambda m: m.update(target='venue'), "'target' = 'venue'"),
    (lambda m: m.pop('kind'), "'kind' is None, expected 'hetero'"),
])
def test_inconsistent_declarations_are_named(tmp_path, edit, match):
    _, ds = tiny(tmp_path / 'ds')
    edit_meta(ds.path, edit)
    with pytest.raises(DatasetFormatError, match=match):
        open_dataset_dir(ds.path)


def test_node_array_rows_must_match_their_type(tmp_path):
    _, ds = tiny(tmp_path / 'ds')

    def shrink(meta):
        spec = meta['arrays']['author.x']
        spec['shape'][0] -= 1
        spec['bytes'] -= 12
    edit_meta(ds.path, shrink)
    with pytest.raises(DatasetFormatError, match="node array 'x' of type "
                       r"'author' has 299 rows \(meta.json shape \[299, 3\]\) but the "
                       "type has 300 nodes"):
        open_dataset_dir(ds.path)


@pytest.mark.reliability(
    fault="a heterogeneous dataset written with arrays of the wrong length, "
          "edges out of range, num_classes 0, or two node arrays that would "
          "share one stored name (a '.' in a node type's name)",
    behaviour="refused before anything is written, naming the array, the "
              "edge type or the two arrays (was: written, then refused "
              "by the reader as a key declared twice)")
def test_bad_input_to_the_writer_is_named(tmp_path):
    data = generate_hetero('hetero-tiny')
    data['paper'].x = data['paper'].x[:-1]
    with pytest.raises(DatasetFormatError, match=r"data\['paper'\]\.x has "
                       "399 rows but node type 'paper' has 400 nodes"):
        write_graph(data, tmp_path / 'a', name='t', source='t',
                          progress=False)
    data = generate_hetero('hetero-tiny')
    data['paper', 'cites', 'paper'].edge_index[0, 0] = 10_000
    with pytest.raises(DatasetFormatError, match=r"edge type \('paper', "
                       r"'cites', 'paper'\).*10000"):
        write_graph(data, tmp_path / 'b', name='t', source='t',
                          progress=False)
    with pytest.raises(ValueError, match="invalid 'num_classes' = 0"):
        write_dataset_dir(
            tmp_path / 'c', num_nodes={'a': 2},
            relations={('a', 'to', 'a'): lambda: iter(
                [(torch.tensor([0]), torch.tensor([1]))])},
            node_arrays={}, name='t', source='t', num_classes=0,
            progress=False)
    # a '.' in a type's name: two arrays of one stored name (one file)
    with pytest.raises(ValueError, match="node array 'x' of 'a.b' and node "
                       "array 'b.x' of 'a' would both be stored as 'a.b.x'"):
        write_dataset_dir(
            tmp_path / 'd', num_nodes={'a': 2, 'a.b': 2},
            relations={('a', 'to', 'a.b'): lambda: iter(
                [(torch.tensor([0]), torch.tensor([1]))])},
            node_arrays={'a': {'b.x': torch.zeros(2)},
                         'a.b': {'x': torch.ones(2)}},
            name='t', source='t', progress=False)
    assert not any((tmp_path / d).exists() for d in 'abcd')
