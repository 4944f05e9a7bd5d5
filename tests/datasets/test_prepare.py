import numpy as np
import pytest
import torch
from torch_geometric.data import Data
from torch_geometric.utils import to_undirected

from pyg_fastload.datasets import (
    prepare_ogb,
    prepare_pyg,
)
from pyg_fastload.datasets.prepare import run
from pyg_fastload.graph.topology import CSCTopology
from pyg_fastload.io import (
    DatasetFormatError,
    open_dataset_dir,
)

from ..helpers import random_graph
from .fakes import OGB_EDGES, OGB_N, fake_ogb_csv, parse, write_gz


# ------------------------------------------------------------------- OGB --
def expected_undirected():
    edge_index = to_undirected(torch.from_numpy(OGB_EDGES.T.copy()),
                               num_nodes=OGB_N)
    return CSCTopology.from_edge_index(edge_index, num_nodes=OGB_N)


def check_ogb(dataset, x, labels):
    topo, expected = dataset.topology, expected_undirected()
    assert dataset.num_edges == 13  # 16 directed, minus 2 duplicates, 1 loop
    assert torch.equal(topo.indptr, expected.indptr)
    # Neighbour lists come out sorted (to_undirected sorts them too).
    assert torch.equal(topo.indices.long(), expected.indices.long())
    assert torch.equal(dataset.arrays['x'], torch.from_numpy(x))
    assert torch.equal(dataset.arrays['y'], torch.tensor(labels))
    assert dataset.arrays['train_mask'].tolist() == [1, 1, 1, 0, 0, 0]
    assert dataset.arrays['val_mask'].tolist() == [0, 0, 0, 1, 0, 0]
    assert dataset.arrays['test_mask'].tolist() == [0, 0, 0, 0, 1, 1]
    assert 'reverse edges added' in dataset.meta['source']


@pytest.mark.parametrize('point_at_raw', [False, True])
def test_prepare_ogb_csv(tmp_path, small_chunks, point_at_raw):
    root = tmp_path / 'arxiv'
    x = fake_ogb_csv(root)
    raw_dir = root / 'raw' if point_at_raw else root
    dataset = prepare_ogb(raw_dir, 'ogbn-arxiv', tmp_path / 'ds',
                          progress=False)
    dataset = open_dataset_dir(dataset.path, verify='checksum')
    check_ogb(dataset, x, [3, 0, 1, 2, 0, 1])
    assert dataset.name == 'ogbn-arxiv' and dataset.num_classes == 4
    assert torch.equal(dataset.arrays['node_year'],
                       torch.arange(2000, 2000 + OGB_N))
    assert "split 'time'" in dataset.meta['source']


def test_prepare_ogb_directed(tmp_path, small_chunks):
    root = tmp_path / 'arxiv'
    fake_ogb_csv(root)
    dataset = prepare_ogb(root, 'arxiv', tmp_path / 'ds', progress=False,
                          symmetrize=False)
    expected = CSCTopology.from_edge_index(torch.from_numpy(
        OGB_EDGES.T.copy()), num_nodes=OGB_N)
    assert dataset.num_edges == len(OGB_EDGES)
    assert torch.equal(dataset.topology.indptr, expected.indptr)
    assert torch.equal(dataset.topology.indices, expected.indices)
    assert 'directed' in dataset.meta['source']


def test_prepare_ogb_papers100m_npz(tmp_path, small_chunks):
    root = tmp_path / 'papers100M-bin'
    raw = root / 'raw'
    raw.mkdir(parents=True)
    x = np.random.default_rng(0).standard_normal((OGB_N, 4)).astype(
        np.float32)
    np.savez_compressed(
        raw / 'data.npz', edge_index=OGB_EDGES.T.copy(), node_feat=x,
        num_nodes_list=np.array([OGB_N]),
        num_edges_list=np.array([len(OGB_EDGES)]),
        node_year=np.arange(OGB_N).reshape(-1, 1))
    labels = np.array([[1.0], [np.nan], [2.0], [0.0], [np.nan], [5.0]])
    np.savez_compressed(raw / 'node-label.npz', node_label=labels)
    split = root / 'split' / 'time'
    write_gz(split / 'train.csv.gz', [0, 1, 2])
    write_gz(split / 'valid.csv.gz', [3])
    write_gz(split / 'test.csv.gz', [4, 5])
    dataset = prepare_ogb(root, 'ogbn-papers100M', tmp_path / 'ds',
                          progress=False)
    check_ogb(dataset, x, [1, -1, 2, 0, -1, 5])
    assert dataset.num_classes == 6
    assert '2 missing labels (NaN) stored as -1' in dataset.meta['source']
    assert torch.equal(dataset.arrays['node_year'], torch.arange(OGB_N))


def test_prepare_ogb_errors(tmp_path):
    with pytest.raises(DatasetFormatError, match='neither an OGB dataset'):
        prepare_ogb(tmp_path, 'ogbn-arxiv', tmp_path / 'ds', progress=False)
    root = tmp_path / 'arxiv'
    fake_ogb_csv(root)
    write_gz(root / 'raw' / 'num-edge-list.csv.gz', [len(OGB_EDGES) + 1])
    with pytest.raises(DatasetFormatError, match=r'edge\.csv\.gz: holds 8 '
                       r'edges but num-edge-list says 9'):
        prepare_ogb(root, 'ogbn-arxiv', tmp_path / 'ds', progress=False)
    write_gz(root / 'raw' / 'num-edge-list.csv.gz', [len(OGB_EDGES)])
    write_gz(root / 'raw' / 'num-node-list.csv.gz', [4])
    with pytest.raises(DatasetFormatError, match=r'edge\.csv\.gz: .*node id '
                       r'5, outside \[0, num_nodes=4\)'):
        prepare_ogb(root, 'ogbn-arxiv', tmp_path / 'ds', progress=False)
    assert not (tmp_path / 'ds').exists()
    assert not list(tmp_path.glob('.ds.tmp-*'))


def test_pyg_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="'data_path' = .*missing.pt"):
        prepare_pyg(tmp_path / 'missing.pt', tmp_path / 'ds', progress=False)
    file = tmp_path / 'noedges.pt'
    torch.save(Data(x=torch.zeros(3, 2)), file)
    with pytest.raises(DatasetFormatError, match=r"noedges\.pt: .*no "
                       r"'edge_index'"):
        prepare_pyg(file, tmp_path / 'ds', progress=False)


# ------------------------------------------------------------------- CLI --
def test_cli(tmp_path, tiny_dir, capsys):
    _, cache = tiny_dir
    out = tmp_path / 'tiny'
    argv = ['--preset', 'tiny', '--cache-dir', str(cache), '--no-progress',
            str(out)]
    dataset = run(parse(argv))
    assert dataset.num_nodes == 2_000
    assert "wrote '" in capsys.readouterr().out
    assert open_dataset_dir(out).meta['command'].startswith(
        'pyg-fastload prepare --preset tiny --seed 0')
    with pytest.raises(SystemExit, match=r'already exists.*--overwrite'):
        run(parse(argv))
    run(parse(argv + ['--overwrite']))

    file = tmp_path / 'graph.pt'
    torch.save(random_graph(num_nodes=20, num_edges=60), file)
    dataset = run(parse(['--pyg-data', str(file), '--no-progress',
                         str(tmp_path / 'pyg')]))
    assert dataset.num_edges == 60
    assert list(dataset.edge_arrays) == ['edge_attr']  # kept, not warned

    root = tmp_path / 'arxiv'
    fake_ogb_csv(root)
    dataset = run(parse(['--ogb', 'ogbn-arxiv', '--raw-dir', str(root),
                         '--no-progress', str(tmp_path / 'ogb')]))
    assert dataset.num_edges == 13
    dataset = run(parse(['--ogb', 'ogbn-arxiv', '--raw-dir', str(root),
                         '--directed', '--no-progress',
                         str(tmp_path / 'ogb-directed')]))
    assert dataset.num_edges == len(OGB_EDGES)
    assert '--directed' in dataset.meta['command']

    with pytest.raises(SystemExit, match='--ogb needs --raw-dir'):
        run(parse(['--ogb', 'ogbn-arxiv', str(tmp_path / 'x')]))
    with pytest.raises(SystemExit, match='--raw-dir only applies to --ogb'):
        run(parse(['--preset', 'tiny', '--raw-dir', 'r',
                   str(tmp_path / 'x')]))
    with pytest.raises(SystemExit):  # argparse: no source given
        parse([str(tmp_path / 'x')])


@pytest.mark.parametrize('sorted_edges', [False, True])
def test_prepare_pyg_keeps_edge_level_tensors_in_csc_order(tmp_path,
                                                          sorted_edges):
    data = random_graph(num_nodes=40, num_edges=250)
    if sorted_edges:  # by destination: the CSC order is the given one
        order = torch.argsort(data.edge_index[1], stable=True)
        data.edge_index, data.edge_attr = data.edge_index[:, order], \
            data.edge_attr[order]
    gen = torch.Generator().manual_seed(1)
    data.time = torch.randint(0, 10**6, (250, ), generator=gen)
    data.edge_weight = torch.rand(250, generator=gen)
    data.graph_label = torch.tensor([3])  # neither level: warned, skipped
    file = tmp_path / 'graph.pt'
    torch.save(data, file)
    with pytest.warns(UserWarning, match=r"'graph_label' are neither "
                      r"node-level tensors nor edge-level") as caught:
        dataset = prepare_pyg(file, tmp_path / 'ds', progress=False)
    assert len(caught) == 1  # nothing said of the edge-level tensors
    dataset = open_dataset_dir(dataset.path, verify='checksum')
    edge_id = dataset.topology.edge_id
    assert (edge_id is None) == sorted_edges
    rows = torch.arange(250) if edge_id is None else edge_id
    assert set(dataset.edge_arrays) == {'time', 'edge_weight', 'edge_attr'}
    assert 'time' not in dataset.arrays
    assert torch.equal(dataset.edge_arrays['time'], data.time[rows])
    assert torch.equal(dataset.edge_arrays['edge_weight'],
                       data.edge_weight[rows])
    assert torch.equal(dataset.edge_arrays['edge_attr'], data.edge_attr[rows])
    # the time of every CSC edge is that of the same (source, destination)
    src, dst = dataset.topology.to_edge_index()
    assert torch.equal(src, data.edge_index[0, rows]) and \
        torch.equal(dst, data.edge_index[1, rows])
    assert dataset.meta['skipped_attributes'] == ['graph_label']


@pytest.mark.reliability(
    fault=('`prepare --pyg-data` of a `Data` whose `x` has fewer rows than '
           'nodes'),
    behaviour='`DatasetFormatError` naming both sizes; nothing written')
def test_prepare_refuses_features_that_do_not_match_the_nodes(tmp_path):
    data = random_graph(num_nodes=20, num_edges=60)
    data.x = data.x[:15]
    file = tmp_path / 'graph.pt'
    torch.save(data, file)
    with pytest.raises(DatasetFormatError, match=r"'x' has 15 rows but the "
                       r"graph has num_nodes = 20"):
        prepare_pyg(file, tmp_path / 'ds', progress=False)
    assert not (tmp_path / 'ds').exists()


@pytest.mark.reliability(
    fault='an OGB folder whose `num-node-list.csv.gz` says 10^12 nodes',
    behaviour=('error naming the file and the memory it would need, before '
               'allocating'))
def test_prepare_ogb_checks_the_node_count_before_allocating(tmp_path):
    root = tmp_path / 'arxiv'
    fake_ogb_csv(root)
    write_gz(root / 'raw' / 'num-node-list.csv.gz', [10**12])  # crafted
    with pytest.raises(DatasetFormatError,
                       match=r"num-node-list\.csv\.gz: num_nodes = "
                       r"1,000,000,000,000 needs .* GiB of memory"):
        prepare_ogb(root, 'ogbn-arxiv', tmp_path / 'ds', progress=False)
    assert not (tmp_path / 'ds').exists()
