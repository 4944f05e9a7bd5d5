r"""Crash safety of dataset writes: the final path always holds a complete
dataset, and what killed runs leave behind is repaired or cleaned, by lock,
never by guessing."""
import textwrap

import pytest
import torch

from pyg_fastload.io import open_dataset_dir, write_dataset_dir
from pyg_fastload.io.staging import Staging, recover

from ..distributed.ranks import run_code


def write(path, value, **kwargs):
    indptr = torch.tensor([0, 1, 2])
    return write_dataset_dir(path, num_nodes=2, indptr=indptr,
                             indices=torch.tensor([1, 0]),
                             node_arrays={'x': torch.full((2, 3), value)},
                             name='g', source='t', progress=False, **kwargs)


def siblings(path):
    return sorted(p.name for p in path.parent.iterdir()
                  if p.name.startswith(f'.{path.name}.'))


def killed_during(tmp_path, where):
    r"""Runs a write in a child process that dies (os._exit) at
    :obj:`where`: 'replace' (between the two renames of the fallback
    replacement) or 'write' (while writing arrays)."""
    code = textwrap.dedent(f'''
        import os, torch
        from pyg_fastload.io import staging, arrays
        from tests.io.test_staging import write
        staging.USE_EXCHANGE = False
        rename = os.rename
        def rename_then_die(src, dst):
            rename(src, dst)
            if '.old-' in str(dst):  # the old dataset was moved aside
                os._exit(9)
        if {where!r} == 'replace':
            os.rename = rename_then_die
        else:
            arrays.ArrayWriter.write = lambda *a: os._exit(9)
        write({str(tmp_path / 'ds')!r}, 2.0, overwrite=True)
    ''')
    proc = run_code(code)
    assert proc.returncode == 9, proc.stderr


def test_overwrite_leaves_a_complete_dataset_and_no_leftovers(tmp_path):
    path = tmp_path / 'ds'
    write(path, 1.0)
    dataset = write(path, 2.0, overwrite=True)
    assert bool((dataset.arrays['x'] == 2.0).all())
    assert siblings(path) == []


@pytest.mark.reliability(
    fault='a process killed between the two renames of a dataset replacement',
    behaviour='the next run restores the previous dataset and says so')
def test_a_crash_between_the_renames_is_repaired(tmp_path, capsys):
    path = tmp_path / 'ds'
    write(path, 1.0)
    killed_during(tmp_path, 'replace')
    assert not path.exists()  # the window the exchange closes
    assert any(name.startswith('.ds.old-') for name in siblings(path))
    done = recover(path)
    assert any('restored' in line for line in done)
    assert bool((open_dataset_dir(path).arrays['x'] == 1.0).all())
    assert siblings(path) == []
    assert 'pyg-fastload: restored' in capsys.readouterr().out


@pytest.mark.reliability(
    fault='staging directories of a killed `prepare`',
    behaviour=('removed by the next run (its lock file is free), which says '
               'how many bytes'))
def test_leftovers_of_a_killed_write_are_removed_by_the_next_one(tmp_path):
    path = tmp_path / 'ds'
    killed_during(tmp_path, 'write')
    assert any(name.startswith('.ds.tmp-') for name in siblings(path))
    dataset = write(path, 3.0)  # the next prepare cleans up first
    assert bool((dataset.arrays['x'] == 3.0).all())
    assert siblings(path) == []


@pytest.mark.reliability(
    fault='a run still writing, or a hidden directory without a lock file',
    behaviour='left alone (reported, never removed by guessing)')
def test_a_live_run_and_unlocked_directories_are_left_alone(tmp_path):
    path = tmp_path / 'ds'
    with Staging(path, overwrite=False, progress=False) as live:
        assert recover(path, verbose=False) == []
        assert live.dir.exists()
    foreign = tmp_path / '.ds.tmp-by-hand'
    foreign.mkdir()
    done = recover(path, verbose=False)
    assert len(done) == 1 and 'no lock file' in done[0]
    assert foreign.exists()


@pytest.mark.parametrize('exchange', [True, False])
def test_both_replacement_paths_give_the_new_dataset(tmp_path, monkeypatch,
                                                     exchange):
    from pyg_fastload.io import staging
    monkeypatch.setattr(staging, 'USE_EXCHANGE', exchange)
    path = tmp_path / 'ds'
    write(path, 1.0)
    assert bool((write(path, 5.0, overwrite=True).arrays['x'] == 5.0).all())
    assert siblings(path) == []


@pytest.mark.reliability(
    fault="a link to another directory planted as a dead run's staging "
          "directory",
    behaviour="the link is removed as a link; its target is neither sized "
              "nor touched (was: reported removing the target's bytes)")
def test_a_planted_link_is_never_followed(tmp_path):
    import os
    target = tmp_path / 'elsewhere'
    target.mkdir()
    (target / 'big').write_bytes(b'x' * 100_000)
    (tmp_path / '.ds.lock-dead').touch()  # its run is dead: lockable
    (tmp_path / '.ds.tmp-dead').symlink_to(target)
    done = recover(tmp_path / 'ds', verbose=False)
    assert done == ["removed the link '.ds.tmp-dead' (its target untouched)"]
    assert (target / 'big').stat().st_size == 100_000
    assert not os.path.lexists(tmp_path / '.ds.tmp-dead')
