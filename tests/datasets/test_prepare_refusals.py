r"""``pyg-fastload prepare`` refuses what it cannot convert faithfully: a file
of several graphs, labels that are not class indices, a node count nothing
backs, and edge attributes that do not match their edges; each error names
the file and the value, and nothing is written."""
import gzip

import numpy as np
import pytest
import torch
from torch_geometric.data import Data, HeteroData, InMemoryDataset

from pyg_fastload.datasets import prepare_ogb, prepare_pyg
from pyg_fastload.graph.topology import CSCTopology
from pyg_fastload.io import DatasetFormatError, csc_sort

from ..helpers import random_graph
from .fakes import fake_mag, fake_ogb_csv, write_gz


def small_hetero() -> HeteroData:
    data = HeteroData()
    data['paper'].x = torch.randn(6, 2)
    data['paper'].y = torch.arange(6) % 2
    data['author'].num_nodes = 3
    data['author', 'writes', 'paper'].edge_index = torch.tensor(
        [[0, 1, 2, 2], [0, 1, 3, 5]])
    return data


@pytest.mark.reliability(
    fault=('`prepare --pyg-data` of a `.pt` holding several graphs (a list '
           'or tuple of them, or an InMemoryDataset file of several '
           'HeteroData)'),
    behaviour=('`DatasetFormatError` naming the file, how many graphs it '
               'holds and to save one; nothing written'))
@pytest.mark.parametrize('kind, match', [
    ('list', 'holds a list of 2 graphs'),
    ('tuple', 'holds a tuple of 3 graphs'),
    ('hetero dataset', 'holds an InMemoryDataset of 2 graphs'),
])
def test_a_file_of_several_graphs_is_refused(tmp_path, kind, match):
    graphs = [random_graph(num_nodes=10, num_edges=20, seed=s)
              for s in range(3)]
    if kind == 'list':
        obj = graphs[:2]
    elif kind == 'tuple':
        obj = tuple(graphs)
    else:
        data, slices = InMemoryDataset.collate([small_hetero(),
                                                small_hetero()])
        obj = (data.to_dict(), slices, HeteroData)
    file = tmp_path / 'graphs.pt'
    torch.save(obj, file)
    with pytest.raises(DatasetFormatError, match=rf"graphs\.pt: {match}; "
                       r"pyg-fastload prepares a single graph: save one"):
        prepare_pyg(file, tmp_path / 'ds', progress=False)
    assert not (tmp_path / 'ds').exists()


def _write_labels(tmp_path, source, label):
    r"""A 6-node source of :obj:`source` kind whose node 3 has
    :obj:`label`; returns the call preparing it."""
    labels = np.array([3, 0, 1, label, 0, 1])
    if source in ('data', 'hetero'):
        if source == 'data':
            data = random_graph(num_nodes=6, num_edges=10)
            data.y = torch.from_numpy(labels)
        else:
            data = small_hetero()
            data['paper'].y = torch.from_numpy(labels)
        file = tmp_path / 'graph.pt'
        torch.save(data, file)
        return lambda: prepare_pyg(file, tmp_path / 'ds', progress=False)
    root = tmp_path / 'ogb'
    if source == 'ogb':
        fake_ogb_csv(root)
        write_gz(root / 'raw' / 'node-label.csv.gz', labels)
        return lambda: prepare_ogb(root, 'ogbn-arxiv', tmp_path / 'ds',
                                   progress=False)
    fake_mag(root)
    write_gz(root / 'raw' / 'node-label' / 'paper' / 'node-label.csv.gz',
             labels)
    return lambda: prepare_ogb(root, 'ogbn-mag', tmp_path / 'ds',
                               progress=False)


@pytest.mark.reliability(
    fault=('`prepare` of labels that are not class indices: a label of '
           '10^12 (10^12 + 1 classes for 6 nodes) or one below -1, in a '
           '`.pt` (Data or HeteroData) or an OGB folder (arxiv or mag '
           'layout)'),
    behaviour=('`DatasetFormatError` naming the file and the label (-1, '
               'unlabelled, is accepted); nothing written'))
@pytest.mark.parametrize('source, where', [
    ('data', r"graph\.pt: 'y'"),
    ('hetero', r"graph\.pt: data\['paper'\]\.y"),
    ('ogb', r'raw/node-label\.csv\.gz'),
    ('mag', r'node-label/paper/node-label\.csv\.gz'),
])
@pytest.mark.parametrize('label, what', [
    (10**12, r'label 1,000,000,000,000 means 1,000,000,000,001 classes for '
             r'6 nodes'),
    (-2, r'label -2 is negative'),
])
def test_labels_that_are_not_class_indices_are_refused(
        tmp_path, source, where, label, what):
    prepare = _write_labels(tmp_path, source, label)
    with pytest.raises(DatasetFormatError, match=rf'{where}: {what}'):
        prepare()
    assert not (tmp_path / 'ds').exists()


@pytest.fixture
def nothing_sized_by_the_nodes(monkeypatch):
    r"""A machine with 8 GiB available, where building a CSC (the first
    thing sized by the node count) fails the test."""
    monkeypatch.setattr(csc_sort, 'available_memory', lambda: 8 * 2**30)

    def allocate(*args, **kwargs):
        raise AssertionError('a CSC was built before the node count was '
                             'checked')
    monkeypatch.setattr(CSCTopology, 'from_edge_index', allocate)


@pytest.mark.reliability(
    fault=('a 1 KB `.pt` (Data, or one node type of a HeteroData) or an '
           'ogbn-mag `num-node-dict.csv.gz` claiming 10^15 nodes (or 2*10^9 '
           'on a machine with 8 GiB available)'),
    behaviour=('`DatasetFormatError` naming the file, the count and the '
               'memory it needs, before anything is allocated'))
@pytest.mark.parametrize('count', [10**15, 2 * 10**9])
@pytest.mark.parametrize('source', ['data', 'hetero', 'mag'])
def test_a_claimed_node_count_is_checked_before_allocating(
        tmp_path, nothing_sized_by_the_nodes, source, count):
    if source == 'data':
        file = tmp_path / 'graph.pt'
        torch.save(Data(edge_index=torch.tensor([[0, 1], [1, 0]]),
                        num_nodes=count), file)
        match = rf'graph\.pt: num_nodes = {count:,} needs '
    elif source == 'hetero':
        data = small_hetero()
        data['author'].num_nodes = count
        file = tmp_path / 'graph.pt'
        torch.save(data, file)
        match = rf"graph\.pt: node counts .*'author': {count}\b.* needs "
    else:
        fake_mag(tmp_path / 'mag')
        counts = {'author': count, 'field_of_study': 3, 'institution': 2,
                  'paper': 6}
        with gzip.open(tmp_path / 'mag' / 'raw' / 'num-node-dict.csv.gz',
                       'wt') as f:
            f.write(','.join(counts) + '\n')
            f.write(','.join(str(v) for v in counts.values()) + '\n')
        match = (rf"num-node-dict\.csv\.gz: node counts .*'author': "
                 rf"{count}\b.* needs ")
    with pytest.raises(DatasetFormatError, match=match + r'.* of memory'):
        if source == 'mag':
            prepare_ogb(tmp_path / 'mag', 'ogbn-mag', tmp_path / 'ds',
                        progress=False)
        else:
            prepare_pyg(file, tmp_path / 'ds', progress=False)
    assert not (tmp_path / 'ds').exists()


@pytest.mark.reliability(
    fault=('`prepare --pyg-data` of a HeteroData whose `edge_attr` has more '
           'or fewer rows than its edge type has edges'),
    behaviour=('`DatasetFormatError` naming the file, the edge type and '
               'both counts; nothing written'))
@pytest.mark.parametrize('rows', [3, 5])
def test_a_hetero_edge_attr_of_another_length_is_refused(tmp_path, rows):
    data = small_hetero()
    data['author', 'writes', 'paper'].edge_attr = torch.randn(rows, 2)
    file = tmp_path / 'graph.pt'
    torch.save(data, file)
    with pytest.raises(DatasetFormatError, match=(
            rf"graph\.pt: data\[\('author', 'writes', 'paper'\)\]\.edge_attr "
            rf"has {rows} rows but edge type \('author', 'writes', 'paper'\) "
            rf"has 4 edges")):
        prepare_pyg(file, tmp_path / 'ds', progress=False)
    assert not (tmp_path / 'ds').exists()
