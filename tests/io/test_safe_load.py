import os
import shlex

import pytest
import torch
from torch_geometric.data import Data

from pyg_fastload.datasets import prepare_pyg
from pyg_fastload.datasets.pyg_file import load_data_file
from pyg_fastload.io import UnsafeFileError, safe_torch_load
from pyg_fastload.io.format import DatasetFormatError
from ..helpers import random_graph, usage_exit


class _Payload:
    r"""Unpickling this object runs a shell command creating a marker."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f'touch {shlex.quote(self.marker)}', ))


@pytest.fixture
def hostile_file(tmp_path):
    r"""A file holding a valid Data next to a payload that would run."""
    marker = tmp_path / 'ran'
    file = tmp_path / 'graph.pt'
    torch.save((random_graph(num_nodes=20, num_edges=60), _Payload(marker)),
               file)
    return file, marker


@pytest.mark.reliability(
    fault=('a `.pt` file whose pickle runs a shell command (beside a valid '
           '`Data`)'),
    behaviour=('refused with `UnsafeFileError` naming the object '
               '(`posix.system`) and how to convert the file; nothing runs'))
def test_hostile_file_runs_nothing(hostile_file, tmp_path):
    file, marker = hostile_file
    with pytest.raises(UnsafeFileError, match=r"refused: it refers to "
                       r"'(posix|os|nt)\.system'.*weights_only=True"):
        safe_torch_load(file)
    with pytest.raises(UnsafeFileError, match='convert it once'):
        load_data_file(file)
    with pytest.raises(UnsafeFileError):
        prepare_pyg(file, tmp_path / 'ds', progress=False)
    assert not marker.exists()
    assert not (tmp_path / 'ds').exists()
    # The file really is hostile: unsafe unpickling runs the payload.
    torch.load(file, weights_only=False)
    assert marker.exists()


@pytest.mark.reliability(
    fault=("the same file as `FastLoadDataModule('FILE.pt')` / "
           '`--data.dataset`'),
    behaviour='`ConfigError` on `dataset` naming the object; nothing runs')
def test_hostile_file_in_the_data_module(hostile_file):
    from pyg_fastload.lightning import ConfigError, FastLoadDataModule

    file, marker = hostile_file
    with pytest.raises(ConfigError,
                       match=r"'dataset'.*refused.*posix\.system"):
        FastLoadDataModule(str(file), num_neighbors=[3], batch_size=8)
    assert not marker.exists()


@pytest.mark.reliability(
    fault='the same file as `pyg-fastload prepare --pyg-data`',
    behaviour=('exit with a one-line error saying it was refused; nothing '
               'runs, nothing written'))
def test_hostile_file_in_prepare_command(hostile_file, tmp_path, capsys):
    from pyg_fastload.lightning.command import main

    file, marker = hostile_file
    with usage_exit(capsys, 'refused'):
        main(['prepare', '--pyg-data', str(file), '--no-progress',
              str(tmp_path / 'ds')])
    assert not marker.exists()


def test_safe_files_load(tmp_path):
    data = random_graph(num_nodes=20, num_edges=60)
    file = tmp_path / 'data.pt'
    torch.save(data, file)
    loaded = load_data_file(file)
    assert torch.equal(loaded.edge_index, data.edge_index)
    assert torch.equal(loaded.x, data.x)
    # an InMemoryDataset's processed file: (dict, slices, class)
    torch.save((data.to_dict(), None, Data), file)
    assert torch.equal(load_data_file(file).x, data.x)


@pytest.mark.reliability(
    fault='a `.pt` that is not a `torch.save` file, or no file',
    behaviour='`DatasetFormatError` / `FileNotFoundError` naming the file')
def test_not_a_torch_file(tmp_path):
    file = tmp_path / 'junk.pt'
    file.write_bytes(b'not a pickle at all')
    with pytest.raises(DatasetFormatError, match=r"junk\.pt' .*torch\.save"):
        safe_torch_load(file)
    with pytest.raises(FileNotFoundError, match='missing.pt'):
        load_data_file(tmp_path / 'missing.pt')
