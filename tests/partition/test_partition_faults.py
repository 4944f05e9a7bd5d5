r"""Faults while writing partitions: a disk that fills in the middle of a
write (the parts, the book, ``--max-memory``'s coarse graphs), a process
killed in the middle of one. The command ends with one line naming the
directory and that the disk is full; the target keeps the previous complete
partition (or stays absent); nothing staged is left, or what a killed run
left is removed by the next run (the coarse graphs too)."""
import json
import os
import tempfile

import pytest

from pyg_fastload.datasets import prepare_hetero_preset
from pyg_fastload.io import arrays
from pyg_fastload.io.staging import DiskFullError
from pyg_fastload.partition import bounded, open_partition, part_format, \
    partition_dataset

from ..helpers import usage_exit
from ..io.test_staging import siblings
from ..io.test_write_faults import (disk_full_after, disk_full_line,
                                    killed_mid_write)


@pytest.fixture(scope='module')
def hetero_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp('hetero')
    return prepare_hetero_preset('hetero-tiny', root / 'ds',
                                 progress=False).path


def method_of(parts):
    return json.loads((parts / 'partition.json').read_text())['method']


@pytest.fixture
def scratch(tmp_path, monkeypatch):
    r"""The temporary directory (``TMPDIR``) of this test."""
    folder = tmp_path / 'scratch'
    folder.mkdir()
    monkeypatch.setattr(tempfile, 'tempdir', str(folder))
    return folder


@pytest.mark.reliability(
    fault='the disk fills while `pyg-fastload partition --overwrite` writes '
          'the parts',
    behaviour=('exit status 2, one line naming PARTS_DIR and the full disk; '
               'the previous partition intact, nothing staged left'))
def test_partition_on_a_full_disk_keeps_the_previous_one(tiny_dir, tmp_path,
                                                        capsys, monkeypatch):
    from pyg_fastload.lightning.command import main
    dataset_dir, _ = tiny_dir
    parts = tmp_path / 'parts'
    partition_dataset(dataset_dir, parts, 2, 'metis', progress=False)
    disk_full_after(monkeypatch, arrays, 3)  # in part 0's arrays
    with usage_exit(capsys, disk_full_line('partition', parts, tmp_path)):
        main(['partition', str(dataset_dir), '--num-parts', '2', '--method',
              'hash', '--out', str(parts), '--overwrite', '--no-progress'])
    assert method_of(parts) == 'metis'
    assert open_partition(parts, 1, verify='checksum')[2].num_parts == 2
    assert siblings(parts) == []


@pytest.mark.reliability(
    fault="the disk fills while writing a partition's book (owner.npy, ...)",
    behaviour=('DiskFullError naming PARTS_DIR, raised by the write itself '
               "(was: np.save's ndarray.tofile, which loses a small write's "
               "error: a short owner.npy could be put in place with its "
               "checksum)"))
def test_a_full_disk_under_the_book_is_an_error(tiny_dir, tmp_path,
                                                monkeypatch):
    dataset_dir, _ = tiny_dir
    parts = tmp_path / 'parts'
    disk_full_after(monkeypatch, part_format, 0, suffix='.npy')
    with pytest.raises(DiskFullError, match=(
            f"while writing the pyg-fastload partition '{parts}'")):
        partition_dataset(dataset_dir, parts, 2, 'hash', progress=False)
    assert sorted(os.listdir(tmp_path)) == []


@pytest.mark.reliability(
    fault="the disk fills while writing a heterogeneous dataset's partition",
    behaviour='DiskFullError naming PARTS_DIR; nothing left in place')
def test_hetero_partition_on_a_full_disk(hetero_dir, tmp_path, monkeypatch):
    parts = tmp_path / 'parts'
    disk_full_after(monkeypatch, arrays, 2)
    with pytest.raises(DiskFullError, match=(
            f"while writing the pyg-fastload partition '{parts}'")):
        partition_dataset(hetero_dir, parts, 2, 'hash', progress=False)
    assert sorted(os.listdir(tmp_path)) == []


@pytest.mark.reliability(
    fault="the disk holding TMPDIR fills while `partition --max-memory` "
          "writes its coarse graphs",
    behaviour=("exit status 2, one line naming the coarse graphs, TMPDIR "
               "and the fix; the coarse graphs removed (was: numpy's "
               "'N requested and 0 written', or a small write lost "
               "silently)"))
def test_coarse_graphs_on_a_full_disk(tiny_dir, tmp_path, scratch, capsys,
                                      monkeypatch):
    from pyg_fastload.lightning.command import main
    dataset_dir, _ = tiny_dir
    parts = tmp_path / 'parts'
    disk_full_after(monkeypatch, bounded, 0)
    with usage_exit(capsys, (
            rf"\Apyg-fastload partition: error: no space left on the disk "
            rf"holding '{scratch}' while writing the coarse graphs of "
            rf"max_memory \(--max-memory\): .* \(its staging directory "
            rf"'\.pyg-fastload-coarse-{os.getuid()}\.tmp-\w+' was "
            rf"removed\); free space on that disk, or set TMPDIR to a "
            rf"directory on another disk\n\Z")):
        main(['partition', str(dataset_dir), '--num-parts', '2', '--out',
              str(parts), '--max-memory', '1MiB', '--no-progress'])
    assert os.listdir(scratch) == []
    assert sorted(os.listdir(tmp_path)) == ['scratch']


@pytest.mark.reliability(
    fault='`pyg-fastload partition --overwrite` killed (SIGKILL) while '
          'writing the parts',
    behaviour=('the previous partition intact; the next run removes the '
               'staging directory, says so, and succeeds'))
def test_killed_partition_is_cleaned_by_the_next_run(tiny_dir, tmp_path,
                                                      capsys):
    dataset_dir, _ = tiny_dir
    parts = tmp_path / 'parts'
    partition_dataset(dataset_dir, parts, 2, 'metis', progress=False)
    killed_mid_write('pyg_fastload.io.arrays:ArrayWriter.write',
                     ['partition', dataset_dir, '--num-parts', 3, '--method',
                      'hash', '--out', parts, '--overwrite', '--no-progress'])
    assert method_of(parts) == 'metis'
    left = siblings(parts)
    assert [name[:11] for name in left] == ['.parts.lock', '.parts.tmp-']
    partition_dataset(dataset_dir, parts, 3, 'hash', overwrite=True,
                      progress=False)
    assert f"pyg-fastload: removed '{left[1]}'" in capsys.readouterr().out
    assert method_of(parts) == 'hash' and siblings(parts) == []


@pytest.mark.reliability(
    fault="`pyg-fastload partition` of a heterogeneous dataset killed "
          "(SIGKILL) while writing the parts",
    behaviour=('no partition in place; the next run removes the staging '
               'directory and succeeds'))
def test_killed_hetero_partition_is_cleaned_by_the_next_run(hetero_dir,
                                                             tmp_path):
    parts = tmp_path / 'parts'
    killed_mid_write('pyg_fastload.io.arrays:ArrayWriter.write',
                     ['partition', hetero_dir, '--num-parts', 2, '--method',
                      'hash', '--out', parts, '--no-progress'])
    assert not os.path.lexists(parts) and len(siblings(parts)) == 2
    partition_dataset(hetero_dir, parts, 2, 'hash', progress=False)
    assert method_of(parts) == 'hash' and siblings(parts) == []


@pytest.mark.reliability(
    fault='`pyg-fastload partition --max-memory` killed (SIGKILL) with its '
          'coarse graphs on disk',
    behaviour=("the next `--max-memory` run removes them from TMPDIR and "
               "says so (was: a 'pyg-fastload-coarse-*' directory left in "
               "/tmp for good)"))
def test_coarse_graphs_of_a_killed_run_are_removed(tiny_dir, tmp_path,
                                                   scratch, capsys):
    dataset_dir, _ = tiny_dir
    parts = tmp_path / 'parts'
    killed_mid_write('pyg_fastload.partition.bounded:_merge',
                     ['partition', dataset_dir, '--num-parts', 2, '--out',
                      parts, '--max-memory', '1MiB', '--no-progress'],
                     env={'TMPDIR': str(scratch)})
    assert not os.path.lexists(parts) and siblings(parts) == []
    left = sorted(os.listdir(scratch))
    assert len(left) == 2 and left[1].startswith('.pyg-fastload-coarse-')
    assert os.listdir(scratch / left[1])  # the coarse graph being written
    partition_dataset(dataset_dir, parts, 2, 'metis', progress=False,
                      max_memory='1MiB')
    assert f"pyg-fastload: removed '{left[1]}'" in capsys.readouterr().out
    assert os.listdir(scratch) == [] and method_of(parts) == 'metis'
