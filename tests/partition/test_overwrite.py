r"""``pyg-fastload partition --overwrite`` replaces only a partition (by its
``partition.json``'s format) and only what that ``partition.json`` lists."""
import json
import os

import pytest

from pyg_fastload.lightning.command import main
from pyg_fastload.partition import open_partition

from ..helpers import usage_exit


def partition(dataset_dir, out, num_parts, *extra):
    main(['partition', str(dataset_dir), '--num-parts', str(num_parts),
          '--method', 'hash', '--out', str(out), '--no-progress', *extra])


@pytest.mark.reliability(
    fault='`partition --overwrite` into a folder holding a `partition.json` '
          "that is not a pyg-fastload partition's (`{}`, another format) "
          "beside the user's source files",
    behaviour=("refused with one line naming the folder and the fix (an "
               "empty or new directory); the folder untouched (was: "
               "replaced whole)"))
@pytest.mark.parametrize('manifest', ['{}', '{"format": "other-tool"}'])
def test_a_folder_with_a_foreign_partition_json_is_refused(tiny_dir, tmp_path,
                                                           manifest, capsys):
    dataset_dir, _ = tiny_dir
    project = tmp_path / 'project'
    project.mkdir()
    (project / 'partition.json').write_text(manifest)
    (project / 'model.py').write_text('import torch\n')
    with usage_exit(capsys, (
            r"refusing to overwrite '.*project': it holds files but no "
            r"partition.json with format 'pyg-fastload-partition'.*choose an "
            r'empty or new directory')):
        partition(dataset_dir, project, 2, '--overwrite')
    assert sorted(os.listdir(project)) == ['model.py', 'partition.json']
    assert (project / 'model.py').read_text() == 'import torch\n'
    assert os.listdir(tmp_path) == ['project']


@pytest.mark.reliability(
    fault="`partition --overwrite` on a partition that also holds the user's "
          'files (notes.txt)',
    behaviour=('the parts, book and report are replaced; the files '
               'partition.json does not list are kept and named (was: '
               'deleted)'))
def test_overwrite_keeps_the_users_files_and_replaces_the_parts(
        tiny_dir, tmp_path, capsys):
    dataset_dir, _ = tiny_dir
    out = tmp_path / 'parts'
    partition(dataset_dir, out, 4)
    (out / 'notes.txt').write_text('hash, 4 parts')
    (out / 'report.json').write_text('{"parts": 4}')  # partition --report's
    capsys.readouterr()
    partition(dataset_dir, out, 2, '--overwrite')
    assert (out / 'notes.txt').read_text() == 'hash, 4 parts'
    assert sorted(os.listdir(out)) == ['new_id.npy', 'notes.txt',
                                       'offsets.npy', 'owner.npy', 'part-0',
                                       'part-1', 'partition.json']
    meta = json.loads((out / 'partition.json').read_text())
    assert meta['num_parts'] == 2
    for part in range(2):  # every part is of the new run
        open_partition(out, part)
    assert ("pyg-fastload: kept what the replaced pyg-fastload partition "
            f"did not own in '{out}': notes.txt"
            in capsys.readouterr().out)
