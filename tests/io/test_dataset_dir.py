r"""Dataset directories of both kinds: round trips, versions, corruption,
bad input to the writer."""
import hashlib
import json
import os
import re

import numpy as np
import pytest
import torch

import pyg_fastload.io
from pyg_fastload.datasets import (
    generate_hetero,
    load_synthetic,
    prepare_pyg,
    write_graph,
)
from pyg_fastload.graph.kind import GraphInput
from pyg_fastload.graph.topology import CSCTopology
from pyg_fastload.io import (
    FORMAT_VERSION,
    HETERO_FORMAT_VERSION,
    DatasetFormatError,
    OnDiskDataset,
    OnDiskHeteroDataset,
    open_dataset_dir,
    dataset_dir_kind,
    write_dataset_dir,
)

from ..helpers import edit_meta, random_graph, small_dataset


NODE_KEYS = ('x', 'y', 'train_mask', 'val_mask', 'test_mask')


# ----------------------------------------------------------- round trips --
def test_tiny_preset_round_trip(tiny_dir):
    path, cache = tiny_dir
    graph = load_synthetic('tiny', root=cache, progress=False)
    dataset = open_dataset_dir(path, verify='checksum')
    meta = dataset.meta
    assert meta['format'] == 'pyg-fastload-dataset'
    assert meta['format_version'] == FORMAT_VERSION == 1
    assert meta['name'] == 'tiny' and meta['num_classes'] == 4
    assert dataset.num_nodes == 2_000 and dataset.num_features == 16
    assert dataset.num_edges == graph.topology.num_edges == 20_000
    assert 'edge_id' not in meta['arrays']
    assert dataset.topology.edge_id is None
    assert torch.equal(dataset.topology.indptr, graph.topology.indptr)
    assert torch.equal(dataset.topology.indices, graph.topology.indices)
    assert dataset.topology.indices.dtype == torch.int32
    for key in NODE_KEYS:
        assert torch.equal(dataset.arrays[key], getattr(graph, key)), key
    assert dataset.arrays['train_mask'].dtype == torch.bool
    assert dataset.arrays['y'].dtype == torch.int64
    # Memory-mapped, copy-on-write: writes never reach the file.
    file = dataset.array_path('x')
    assert file == path / 'x.bin' and file.stat().st_size == 2_000 * 16 * 4
    spec = dataset.array_spec('x')
    assert spec['dtype'] == 'float32' and spec['shape'] == [2_000, 16]
    assert spec['offset'] == 0 and spec['row_bytes'] == 64
    assert spec['numpy_dtype'] == np.float32
    assert spec['torch_dtype'] == torch.float32
    mapped = np.memmap(file, dtype=spec['numpy_dtype'], mode='r',
                       offset=spec['offset'], shape=tuple(spec['shape']))
    assert np.array_equal(mapped, graph.x.numpy())
    dataset.arrays['x'][0, 0] += 1.0
    assert open_dataset_dir(path, verify='checksum').arrays['x'][0, 0] == \
        graph.x[0, 0]
    with pytest.raises(KeyError, match='no array'):
        dataset.array_path('nope')
    assert "OnDiskDataset('tiny'" in repr(dataset)


def test_pyg_round_trip_with_unsorted_edges(tmp_path):
    data = random_graph(num_nodes=50, num_edges=300)
    assert not bool((data.edge_index[1, 1:] >= data.edge_index[1, :-1]).all())
    data.y = data.y.view(-1, 1)  # OGB-style [N, 1] labels get squeezed
    data.val_mask = torch.rand(50) < 0.3
    data.h = torch.randn(50, 2).to(torch.bfloat16)
    data.node_year = torch.arange(50, dtype=torch.int16)
    data.note = 'neither node- nor edge-level'
    file = tmp_path / 'graph.pt'
    torch.save(data, file)
    with pytest.warns(UserWarning, match="'note'"):
        dataset = prepare_pyg(file, tmp_path / 'ds', progress=False)
    dataset = open_dataset_dir(dataset.path, verify='checksum')
    assert dataset.num_nodes == 50 and dataset.num_edges == 300
    assert dataset.num_classes == int(data.y.max()) + 1
    assert dataset.meta['skipped_attributes'] == ['note']
    assert set(dataset.arrays) == {'x', 'y', 'train_mask', 'val_mask', 'h',
                                   'node_year'}
    assert set(dataset.edge_arrays) == {'edge_attr'}  # in CSC order
    assert torch.equal(dataset.edge_arrays['edge_attr'],
                       data.edge_attr[dataset.topology.edge_id])
    assert torch.equal(dataset.arrays['x'], data.x)
    assert torch.equal(dataset.arrays['y'], data.y.view(-1))
    assert torch.equal(dataset.arrays['train_mask'], data.train_mask)
    assert torch.equal(dataset.arrays['val_mask'], data.val_mask)
    assert dataset.arrays['h'].dtype == torch.bfloat16
    assert torch.equal(dataset.arrays['h'], data.h)
    assert dataset.arrays['node_year'].dtype == torch.int16
    assert torch.equal(dataset.arrays['node_year'], data.node_year)

    topo = dataset.topology
    expected = CSCTopology.from_edge_index(data.edge_index, num_nodes=50)
    assert torch.equal(topo.indptr, expected.indptr)
    assert torch.equal(topo.indices, expected.indices)
    assert topo.edge_id.dtype == torch.int64
    # edge_id maps every CSC edge back to its original column.
    assert torch.equal(data.edge_index[:, topo.edge_id], topo.to_edge_index())
    assert torch.equal(torch.sort(topo.edge_id).values, torch.arange(300))


def test_write_dataset_dir_streams_chunks(tmp_path, small_chunks):
    rng = np.random.default_rng(0)
    n = 40
    edge_index = torch.from_numpy(rng.integers(0, n, (2, 150)))
    topo = CSCTopology.from_edge_index(edge_index, num_nodes=n)
    x = rng.standard_normal((n, 5)).astype(np.float32)
    x_file = tmp_path / 'x.npy'
    np.save(x_file, x)
    x_mmap = np.load(x_file, mmap_mode='r')

    def y_chunks():  # a chunk iterator
        for start in range(0, n, 9):
            yield torch.arange(start, min(start + 9, n), dtype=torch.int32)

    dataset = write_dataset_dir(
        tmp_path / 'ds', num_nodes=n, indptr=topo.indptr.numpy(),
        indices=topo.indices, edge_id=topo.edge_id,
        node_arrays={'x': x_mmap, 'y': y_chunks}, name='streamed',
        source='unit test', num_classes=3, progress=False)
    dataset = open_dataset_dir(dataset.path, verify='checksum')
    assert np.array_equal(dataset.arrays['x'].numpy(), x)
    assert dataset.arrays['y'].dtype == torch.int64  # integer y -> int64
    assert torch.equal(dataset.arrays['y'], torch.arange(n))
    assert torch.equal(dataset.topology.edge_id, topo.edge_id.long())
    for key, spec in dataset.meta['arrays'].items():
        digest = hashlib.sha256(
            (dataset.path / spec['file']).read_bytes()).hexdigest()
        assert digest == spec['sha256'], key
    # Nothing is left behind: no temp files, no temp sibling directories.
    assert sorted(os.listdir(tmp_path)) == ['ds', 'x.npy']
    assert not any(name.endswith('.tmp') for name in os.listdir(
        dataset.path))


def test_failed_write_leaves_nothing(tmp_path):
    def broken():
        yield np.zeros((3, 2), dtype=np.float32)
        raise RuntimeError('source failed')

    with pytest.raises(RuntimeError, match='source failed'):
        write_dataset_dir(tmp_path / 'ds', num_nodes=6,
                          indptr=torch.zeros(7, dtype=torch.long),
                          indices=torch.zeros(0, dtype=torch.long),
                          node_arrays={'x': broken}, name='b', source='t',
                          progress=False)
    assert os.listdir(tmp_path) == []


# ---------------------------------------------------------------- errors --
def test_truncated_feature_file(tmp_path):
    path = small_dataset(tmp_path / 'ds').path
    with open(path / 'x.bin', 'r+b') as f:
        f.truncate(50)
    with pytest.raises(DatasetFormatError,
                       match=r'x\.bin: 50 bytes on disk but meta\.json says '
                       r'72 bytes') as info:
        open_dataset_dir(path)
    assert 'pyg-fastload prepare' in str(info.value)
    with pytest.raises(DatasetFormatError,
                       match=r'x\.bin: cannot be memory-mapped'):
        open_dataset_dir(path, verify='none')


def test_missing_array_file(tmp_path):
    path = small_dataset(tmp_path / 'ds').path
    (path / 'y.bin').unlink()
    with pytest.raises(DatasetFormatError, match=r'y\.bin: missing'):
        open_dataset_dir(path)


@pytest.mark.reliability(
    fault='a dataset of another format version',
    behaviour='error saying which version, and to upgrade or re-prepare')
@pytest.mark.parametrize('version', [0, 3, '1', None])
def test_wrong_format_version(tmp_path, version):
    path = small_dataset(tmp_path / 'ds').path
    edit_meta(path, lambda meta: meta.update(format_version=version))
    with pytest.raises(DatasetFormatError,
                       match=rf'meta\.json: format_version {version!r}, but '
                       r'this pyg-fastload reads format_version 1') as info:
        open_dataset_dir(path)
    if version == 3:
        assert 'upgrade pyg-fastload' in str(info.value)


def test_wrong_format_name(tmp_path):
    path = small_dataset(tmp_path / 'ds').path
    edit_meta(path, lambda meta: meta.pop('format'))
    with pytest.raises(DatasetFormatError,
                       match=r"meta\.json: 'format' is None, expected "
                       r"'pyg-fastload-dataset'"):
        open_dataset_dir(path)


def test_missing_meta(tmp_path):
    path = small_dataset(tmp_path / 'ds').path
    (path / 'meta.json').unlink()
    with pytest.raises(DatasetFormatError,
                       match=r'meta\.json: missing.*pyg-fastload prepare'):
        open_dataset_dir(path)
    with pytest.raises(DatasetFormatError, match='no such dataset'):
        open_dataset_dir(tmp_path / 'nowhere')
    with pytest.raises(ValueError, match="invalid 'verify'"):
        open_dataset_dir(path, verify='full')


def test_corrupted_byte_checksum(tmp_path):
    path = small_dataset(tmp_path / 'ds').path
    with open(path / 'x.bin', 'r+b') as f:
        f.seek(10)
        byte = f.read(1)
        f.seek(10)
        f.write(bytes([byte[0] ^ 0xFF]))
    open_dataset_dir(path, verify='size')  # same size: not detected
    with pytest.raises(DatasetFormatError,
                       match=r'x\.bin: sha256 [0-9a-f]{64} does not match '
                       r".*corrupted.*pyg-fastload prepare"):
        open_dataset_dir(path, verify='checksum')


@pytest.mark.reliability(
    fault='CSC offsets that decrease or do not end at `num_edges`',
    behaviour='`DatasetFormatError` naming `indptr.bin`')
def test_inconsistent_indptr(tmp_path):
    path = small_dataset(tmp_path / 'ds').path
    indptr = np.fromfile(path / 'indptr.bin', dtype=np.int64)
    indptr[3] = 0  # decreasing, same size
    indptr.tofile(path / 'indptr.bin')
    with pytest.raises(DatasetFormatError, match=r'indptr\.bin: decreases '
                       r'at position 2'):
        open_dataset_dir(path)
    edit_meta(path, lambda meta: meta.update(num_edges=6))
    with pytest.raises(DatasetFormatError, match=r'indices\.bin: meta\.json '
                       r'gives int32 \[7\], expected int32 or int64 \[6\]'):
        open_dataset_dir(path)


@pytest.mark.reliability(
    fault='`prepare` into an existing directory (a dataset, or anything else)',
    behaviour=('refused without `--overwrite`; a non-dataset directory is '
               'never overwritten'))
def test_existing_out_dir(tmp_path):
    small_dataset(tmp_path / 'ds')
    with pytest.raises(FileExistsError,
                       match=r"'.*ds' already exists; pass overwrite=True "
                       r'to replace it'):
        small_dataset(tmp_path / 'ds')
    dataset = small_dataset(tmp_path / 'ds', overwrite=True)
    assert dataset.num_nodes == 6
    assert sorted(os.listdir(tmp_path)) == ['ds']
    other = tmp_path / 'precious'
    other.mkdir()
    (other / 'notes.txt').write_text('keep me')
    with pytest.raises(FileExistsError, match='refusing to overwrite'):
        small_dataset(other, overwrite=True)
    assert (other / 'notes.txt').read_text() == 'keep me'


def test_num_rows_mismatch(tmp_path):
    with pytest.raises(ValueError, match=r"node array 'x' \(x\.bin\) has 5 "
                       r'rows but 6 are needed'):
        small_dataset(tmp_path / 'ds', num_nodes=5)
    assert not (tmp_path / 'ds').exists()
    path = small_dataset(tmp_path / 'ds').path
    # A consistent meta.json/file pair whose row count is wrong.
    with open(path / 'y.bin', 'r+b') as f:
        f.truncate(5 * 8)
    edit_meta(path, lambda meta: meta['arrays']['y'].update(shape=[5],
                                                             bytes=40))
    with pytest.raises(DatasetFormatError, match=r"y\.bin: node array 'y' "
                       r'has 5 rows .* but num_nodes = 6'):
        open_dataset_dir(path, verify='none')


def test_write_argument_errors(tmp_path):
    with pytest.raises(ValueError, match="'indices' holds 9, outside"):
        write_dataset_dir(tmp_path / 'a', num_nodes=2,
                          indptr=torch.tensor([0, 1, 1]),
                          indices=torch.tensor([9]), node_arrays={},
                          name='a', source='t', progress=False)
    with pytest.raises(ValueError, match=r"'indices' holds 4294967297, "):
        write_dataset_dir(tmp_path / 'a', num_nodes=2,  # would wrap to 1
                          indptr=torch.tensor([0, 1, 1]),
                          indices=torch.tensor([2**32 + 1]), node_arrays={},
                          name='a', source='t', progress=False)
    with pytest.raises(ValueError, match="'indptr' decreases at position 2"):
        write_dataset_dir(tmp_path / 'a', num_nodes=2,
                          indptr=torch.tensor([0, 1, 0]),
                          indices=torch.tensor([0]), node_arrays={},
                          name='a', source='t', progress=False)
    with pytest.raises(ValueError, match="invalid node array name '../x'"):
        write_dataset_dir(tmp_path / 'a', num_nodes=1,
                          indptr=torch.tensor([0, 0]),
                          indices=torch.tensor([], dtype=torch.long),
                          node_arrays={'../x': torch.zeros(1)},
                          name='a', source='t', progress=False)
    # a count the readers refuse is refused before anything is written
    with pytest.raises(ValueError, match=r"invalid 'num_classes' = 0: pass "
                       r"the number of classes \(>= 1\), or None"):
        write_dataset_dir(tmp_path / 'a', num_nodes=1,
                          indptr=torch.tensor([0, 0]),
                          indices=torch.tensor([], dtype=torch.long),
                          node_arrays={}, num_classes=0, name='a',
                          source='t', progress=False)
    assert os.listdir(tmp_path) == []


def test_arrays_larger_than_a_quarter_of_memory_map_read_only(
        tiny_dir, monkeypatch):
    # a private (copy-on-write) mapping larger than memory is refused by
    # the kernel's overcommit check: big arrays are mapped shared, read-only
    from pyg_fastload.io import reader
    modes = []
    real = np.memmap

    def memmap(file, dtype, mode, shape):
        modes.append((os.path.basename(file), mode))
        return real(file, dtype=dtype, mode=mode, shape=shape)

    monkeypatch.setattr(reader.np, 'memmap', memmap)
    small = open_dataset_dir(tiny_dir[0]).arrays['x']
    monkeypatch.setattr(reader, '_PHYSICAL_BYTES', 4 * 1024)
    big = open_dataset_dir(tiny_dir[0]).arrays['x']
    assert torch.equal(small, big)
    x_modes = [mode for name, mode in modes if name == 'x.bin']
    assert x_modes == ['c', 'r']  # x: 128 KB, over a quarter of 4 KiB


def _edited_meta(tiny_dir, tmp_path, edit):
    import shutil
    path = tmp_path / 'ds'
    shutil.copytree(tiny_dir[0], path)
    meta = json.loads((path / 'meta.json').read_text())
    edit(meta)
    (path / 'meta.json').write_text(json.dumps(meta) if isinstance(
        meta, dict) else meta)
    return path


@pytest.mark.reliability(
    fault="a `meta.json` nested 100,000 levels deep, a NUL byte in an array's "
          "file name, a shape of 2^70",
    behaviour="`DatasetFormatError` naming `meta.json` and the field (was: "
              "raw RecursionError / ValueError, or an overflowed size)")
@pytest.mark.parametrize('edit, match', [
    (lambda meta: meta['arrays']['x'].update(file='x\x00.bin'),
     r"array 'x': 'file' = 'x\\x00.bin' is not a plain file name"),
    (lambda meta: meta['arrays']['x'].update(shape=[2**70, 1]),
     r"array 'x': 'shape' = \[1180591620717411303424, 1\] would be"),
])
def test_hostile_meta_json_fields(tiny_dir, tmp_path, edit, match):
    path = _edited_meta(tiny_dir, tmp_path, edit)
    with pytest.raises(DatasetFormatError, match=match):
        open_dataset_dir(path)


def test_a_deeply_nested_meta_json(tiny_dir, tmp_path):
    path = tmp_path / 'ds'
    import shutil
    shutil.copytree(tiny_dir[0], path)
    (path / 'meta.json').write_text('[' * 100_000 + ']' * 100_000)
    with pytest.raises(DatasetFormatError, match=r"meta\.json: unreadable "
                       r"\(RecursionError"):
        open_dataset_dir(path)


def test_the_writer_names_the_arguments_of_the_other_kind(tmp_path):
    common = dict(node_arrays={}, name='t', source='t', progress=False)
    csc = CSCTopology.from_edge_index(torch.tensor([[0], [1]]), 2)
    with pytest.raises(ValueError, match=r"'num_nodes' is a count, so the "
                       r"graph is homogeneous: pass its CSC as 'indptr' and "
                       r"'indices', not 'relations'"):
        write_dataset_dir(tmp_path / 'a', num_nodes=2, indptr=csc.indptr,
                          indices=csc.indices,
                          relations={('a', 'to', 'a'): csc}, **common)
    with pytest.raises(ValueError, match=r"'num_nodes' is a dict of node "
                       r"type -> count, so the graph is heterogeneous: pass "
                       r"its edges as 'relations' .*, not 'indptr'"):
        write_dataset_dir(tmp_path / 'b', num_nodes={'a': 2},
                          indptr=csc.indptr, **common)
    assert not list(tmp_path.iterdir())


# ------------------------------------------- a heterogeneous directory --
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


def test_a_directory_s_kind_is_the_graph_kind_its_stores_have(tmp_path):
    _, ds = tiny(tmp_path / 'ds')
    homo = small_dataset(tmp_path / 'homo').path
    assert dataset_dir_kind(ds.path) == GraphInput(hetero=True, stores=True)
    assert dataset_dir_kind(homo) == GraphInput(hetero=False, stores=True)
    assert dataset_dir_kind(tmp_path / 'none').hetero is False
    edit_meta(ds.path, lambda meta: meta.update(format='other'))
    assert dataset_dir_kind(ds.path).hetero is False  # the reader refuses it


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
                       r"'author' has 299 rows \(meta.json shape "
                       r"\[299, 3\]\) but the type has 300 nodes"):
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
