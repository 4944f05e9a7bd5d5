r"""``pyg-fastload prepare`` of heterogeneous data: presets, a saved
HeteroData, and OGB's ogbn-mag layout."""
import numpy as np
import pytest
import torch
from torch_geometric.data import HeteroData
from torch_geometric.transforms import ToUndirected

from pyg_fastload.datasets import generate_hetero, prepare_ogb, prepare_pyg
from pyg_fastload.datasets.prepare import run
from pyg_fastload.io import DatasetFormatError, open_dataset_dir

from .fakes import COUNTS, EDGES, fake_mag, parse, write_gz

def expected_mag(x):
    r"""What PyG's ``OGB_MAG`` builds from the same files."""
    data = HeteroData()
    data['paper'].x = torch.from_numpy(x)
    data['paper'].year = torch.arange(2010, 2016)
    data['paper'].y = torch.tensor([3, 0, 1, 2, 0, 1])
    for t in ('author', 'institution', 'field_of_study'):
        data[t].num_nodes = COUNTS[t]
    for edge_type, edges in EDGES.items():
        data[edge_type].edge_index = torch.tensor(edges).t().contiguous()
    for name, ids in (('train', [0, 1, 2]), ('val', [3]), ('test', [4, 5])):
        mask = torch.zeros(6, dtype=torch.bool)
        mask[ids] = True
        data['paper'][f'{name}_mask'] = mask
    return data


def same_graph(got, expected, sort_edges=False):
    assert set(got.node_types) == set(expected.node_types)
    assert set(got.edge_types) == set(expected.edge_types)
    for t in expected.node_types:
        assert got[t].num_nodes == expected[t].num_nodes, t
        for key, value in expected[t].items():
            if key != 'num_nodes':
                assert torch.equal(got[t][key], value), (t, key)
    for e in expected.edge_types:
        a, b = got[e].edge_index, expected[e].edge_index
        if sort_edges:  # the same edge set
            def order(ei):
                return ei[:, torch.argsort(ei[1] * 100 + ei[0])]
            a, b = order(a), order(b)
        assert torch.equal(a, b), e


@pytest.mark.parametrize('pyg_layout', [False, True])
def test_ogbn_mag_as_pyg_reads_it(tmp_path, pyg_layout):
    x = fake_mag(tmp_path / 'mag', pyg_layout)
    ds = prepare_ogb(tmp_path / 'mag', 'ogbn-mag', tmp_path / 'ds',
                     progress=False, symmetrize=False)
    assert ds.target == 'paper' and ds.num_classes == 4
    same_graph(open_dataset_dir(ds.path).to_hetero_data(),
               expected_mag(x))


@pytest.mark.reliability(
    fault='ogbn-mag converted without the reverse relations PyG users add',
    behaviour="the graph of PyG's ToUndirected (rev_ types, cites both "
              "ways, duplicates removed)")
def test_ogbn_mag_is_made_undirected_like_pyg(tmp_path):
    x = fake_mag(tmp_path / 'mag')
    ds = prepare_ogb(tmp_path / 'mag', 'mag', tmp_path / 'ds',
                     progress=False)
    expected = ToUndirected()(expected_mag(x))
    assert ('paper', 'rev_writes', 'author') in ds.edge_types
    same_graph(ds.to_hetero_data(), expected, sort_edges=True)
    assert ds.meta['command'].startswith('pyg-fastload prepare --ogb '
                                         'ogbn-mag')


def test_ogbn_mag_errors_name_the_file(tmp_path):
    fake_mag(tmp_path / 'mag')
    bad = tmp_path / 'mag' / 'raw' / 'relations' / \
        'author___writes___paper' / 'edge.csv.gz'
    write_gz(bad, np.array([[0, 0], [7, 1]]))
    write_gz(bad.with_name('num-edge-list.csv.gz'), [2])
    with pytest.raises(DatasetFormatError, match=r"author___writes___paper/"
                       r"edge\.csv\.gz: edge type .*'author' id 7, outside "
                       r"\[0, 5\)"):
        prepare_ogb(tmp_path / 'mag', 'ogbn-mag', tmp_path / 'ds',
                    progress=False)
    write_gz(bad.with_name('num-edge-list.csv.gz'), [3])
    with pytest.raises(DatasetFormatError, match='holds 2 edges but '
                       'num-edge-list.csv.gz says 3'):
        prepare_ogb(tmp_path / 'mag', 'ogbn-mag', tmp_path / 'ds',
                    progress=False)
    assert not (tmp_path / 'ds').exists()


def test_cli_prepares_hetero_presets_and_files(tmp_path, capsys):
    out = tmp_path / 'tiny'
    ds = run(parse(['--preset', 'hetero-tiny', '--seed', '2',
                    '--no-progress', str(out)]))
    printed = capsys.readouterr().out
    assert '4 node types, 8 edge types' in printed
    data = generate_hetero('hetero-tiny', seed=2)
    same_graph(ds.to_hetero_data(), data)
    file = tmp_path / 'h.pt'
    torch.save(data, file)
    again = prepare_pyg(file, tmp_path / 'fromfile', progress=False)
    same_graph(again.to_hetero_data(), data)
    scaled = run(parse(['--preset', 'mag-like', '--scale', '0.001',
                        '--no-progress', str(tmp_path / 'mag')]))
    assert scaled.num_classes == 349  # 736 papers hold every class
    assert scaled.num_nodes['paper'] == round(736389 * 0.001)
    with pytest.raises(SystemExit, match='--scale only applies to'):
        run(parse(['--preset', 'tiny', '--scale', '0.5', str(tmp_path / 'x')]))
    for scale in ('2', '-0.5'):  # careless scales: named, nothing written
        with pytest.raises(SystemExit, match=rf"'scale' = {scale}.* in "
                           r"\(0, 1\]"):
            run(parse(['--preset', 'mag-like', '--scale', scale,
                       '--no-progress', str(tmp_path / 'bad')]))
    assert not (tmp_path / 'bad').exists()
