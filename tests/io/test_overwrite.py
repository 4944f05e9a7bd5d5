r"""``overwrite`` of a dataset directory replaces only what its ``meta.json``
lists: the user's other files there are kept, and a directory that is not
a dataset is never replaced."""
import os

import pytest
import torch

from pyg_fastload.io import open_dataset_dir, write_dataset_dir
from pyg_fastload.io import staging

from ..helpers import usage_exit


def write(path, arrays, **kwargs):
    return write_dataset_dir(path, num_nodes=2, indptr=torch.tensor([0, 1, 2]),
                             indices=torch.tensor([1, 0]), node_arrays=arrays,
                             name='g', source='t', progress=False, **kwargs)


def add_user_files(path):
    (path / 'notes.txt').write_text('my notes')
    (path / 'checkpoints').mkdir()
    (path / 'checkpoints' / 'epoch=1.ckpt').write_bytes(b'weights')


def assert_user_files(path):
    assert (path / 'notes.txt').read_text() == 'my notes'
    assert (path / 'checkpoints' / 'epoch=1.ckpt').read_bytes() == b'weights'


@pytest.mark.reliability(
    fault='`prepare --overwrite` on a dataset directory that also holds the '
          "user's files (notes, checkpoints)",
    behaviour=('the dataset is replaced; the files its meta.json does not '
               'list are kept and named (was: deleted), also when an '
               'earlier overwrite failed'))
def test_prepare_overwrite_keeps_the_users_files(tiny_dir, tmp_path, capsys,
                                                 monkeypatch):
    from pyg_fastload.lightning.command import main
    _, cache = tiny_dir
    out = tmp_path / 'ds'
    argv = ['prepare', '--preset', 'tiny', '--cache-dir', str(cache),
            '--no-progress', str(out)]
    main(argv)
    add_user_files(out)

    def disk_full(*args):
        raise OSError('disk full')

    with monkeypatch.context() as patch:  # fails after the staging is done
        patch.setattr(staging, 'replace_directory', disk_full)
        with usage_exit(capsys, 'disk full'):
            main(argv + ['--overwrite', '--seed', '1'])
    assert_user_files(out)
    assert sorted(os.listdir(tmp_path)) == ['ds']  # nothing staged left
    capsys.readouterr()

    main(argv + ['--overwrite', '--seed', '1'])
    assert_user_files(out)
    dataset = open_dataset_dir(out, verify='checksum')
    assert dataset.meta['synthetic']['seed'] == 1
    assert ("pyg-fastload: kept what the replaced pyg-fastload dataset did "
            f"not own in '{out}': checkpoints, notes.txt"
            in capsys.readouterr().out)


@pytest.mark.parametrize('can_link', [True, False])
def test_overwrite_replaces_what_the_old_meta_lists(tmp_path, monkeypatch,
                                                    can_link):
    path = tmp_path / 'ds'
    write(path, {'x': torch.ones(2, 3), 'old': torch.ones(2)})
    add_user_files(path)
    (path / 'stale.bin').write_bytes(b'not listed')
    if not can_link:  # a file system without hard links: copied
        def no_link(*args, **kwargs):
            raise OSError('hard links are not supported')
        monkeypatch.setattr(staging.os, 'link', no_link)
    dataset = write(path, {'x': torch.zeros(2, 3)}, overwrite=True)
    assert bool((dataset.arrays['x'] == 0).all())
    assert_user_files(path)
    assert not (path / 'old.bin').exists()  # listed by the old meta.json
    assert (path / 'stale.bin').read_bytes() == b'not listed'
    assert sorted(os.listdir(path)) == ['checkpoints', 'indices.bin',
                                        'indptr.bin', 'meta.json',
                                        'notes.txt', 'stale.bin', 'x.bin']


@pytest.mark.reliability(
    fault='`prepare --overwrite` into a directory whose meta.json is not a '
          "pyg-fastload dataset's (another format, `{}`, not JSON)",
    behaviour=('refused with one line naming the directory and the fix '
               '(an empty or new directory); its files untouched'))
@pytest.mark.parametrize('meta', ['{"format": "other-tool-dataset"}', '{}',
                                  'not json'])
def test_a_foreign_meta_json_is_refused(tmp_path, meta):
    path = tmp_path / 'project'
    path.mkdir()
    (path / 'meta.json').write_text(meta)
    (path / 'train.py').write_text('print(1)')
    with pytest.raises(FileExistsError, match=(
            r"refusing to overwrite '.*project': it holds files but no "
            r"meta.json with format 'pyg-fastload-dataset'.*choose an empty "
            r'or new directory')):
        write(path, {'x': torch.ones(2)}, overwrite=True)
    assert (path / 'train.py').read_text() == 'print(1)'
    assert (path / 'meta.json').read_text() == meta
    assert os.listdir(tmp_path) == ['project']


@pytest.mark.reliability(
    fault='an output directory that exists, written again without '
          'overwriting: by `prepare`, `partition`, the library',
    behaviour=("each names its own switch: `--overwrite` for the commands, "
               "`overwrite=True` for the library (was: one message for all, "
               "naming both)"))
def test_each_caller_names_its_own_overwrite_switch(tiny_dir, tmp_path,
                                                    capsys):
    from pyg_fastload.lightning.command import main
    dataset_dir, cache = tiny_dir
    with pytest.raises(FileExistsError) as info:
        write(dataset_dir, {'x': torch.ones(2, 3)})
    assert 'pass overwrite=True to replace it' in str(info.value)
    assert '--overwrite' not in str(info.value)
    prepare = ['prepare', '--preset', 'tiny', '--cache-dir', str(cache),
               '--no-progress', str(dataset_dir)]
    partition = ['partition', str(dataset_dir), '--num-parts', '2',
                 '--method', 'hash', '--out', str(tmp_path / 'parts'),
                 '--no-progress']
    main(partition)
    capsys.readouterr()
    for argv in (prepare, partition):
        with usage_exit(capsys, r"already exists; pass --overwrite to "
                                r"replace it, or choose another directory"):
            main(argv)
