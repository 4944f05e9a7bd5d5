r"""Faults while writing dataset directories: a disk that fills in the middle
of a write, a process killed in the middle of one. The command ends with one
line naming the directory and that the disk is full; the target keeps the
previous complete dataset (or stays absent); nothing staged is left, or what
a killed run left is removed by the next run.

A full disk is made two ways: in this process, the files a module opens for
writing become ``/dev/full`` after the first few (every write to it fails
with the kernel's ENOSPC); and, where user namespaces allow it, a real
file system of a few hundred KiB (tmpfs) the commands write to."""
import builtins
import errno
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time

import pytest

from pyg_fastload.datasets import prepare_hetero_preset
from pyg_fastload.io import arrays, open_dataset_dir
from pyg_fastload.io.staging import DiskFullError

from ..distributed.ranks import Forked
from ..helpers import usage_exit
from .test_staging import siblings, write

pytestmark = pytest.mark.skipif(not os.path.exists('/dev/full'),
                                reason='needs /dev/full (Linux)')


def disk_full_after(monkeypatch, module, opens, suffix=''):
    r"""The first :obj:`opens` files (named ``*SUFFIX``) that :obj:`module`
    opens for writing are written; every later one is ``/dev/full``, as if
    the disk had filled."""
    opened = []

    def open_(file, mode='r', *args, **kwargs):
        if set(mode) & set('wa+') and str(file).endswith(suffix):
            opened.append(file)
            if len(opened) > opens:
                file = '/dev/full'
        return builtins.open(file, mode, *args, **kwargs)

    monkeypatch.setattr(module, 'open', open_, raising=False)
    return opened


def disk_full_line(command, target, parent):
    r"""The pattern of the one line a command ends with on a full disk."""
    return (rf"\Apyg-fastload {command}: error: no space left on the disk "
            rf"holding '{re.escape(str(parent))}' while writing the "
            rf"pyg-fastload \w+ '{re.escape(str(target))}': it needs more "
            rf"than the [\d.]+ \w+ written when the disk filled, and "
            rf"[\d.]+ \w+ is free there \(its staging directory "
            rf"'\.{re.escape(target.name)}\.tmp-\w+' was removed\); free "
            rf"space on that disk, or choose an output directory on another "
            rf"disk\n\Z")


@pytest.mark.reliability(
    fault='the disk fills while `write_dataset_dir` replaces a dataset',
    behaviour=('DiskFullError (an OSError, ENOSPC) naming the directory; the '
               'previous dataset intact, the staging directory removed'))
def test_disk_full_keeps_the_previous_dataset(tmp_path, monkeypatch):
    path = tmp_path / 'ds'
    write(path, 1.0)
    opened = disk_full_after(monkeypatch, arrays, 1)  # indptr, not indices
    with pytest.raises(DiskFullError) as info:
        write(path, 2.0, overwrite=True)
    assert len(opened) == 2
    assert info.value.errno == errno.ENOSPC
    assert f"while writing the pyg-fastload dataset '{path}'" in \
        str(info.value)
    dataset = open_dataset_dir(path, verify='checksum')
    assert bool((dataset.arrays['x'] == 1.0).all())
    assert siblings(path) == []


@pytest.mark.reliability(
    fault='the disk fills during `pyg-fastload prepare`',
    behaviour=('exit status 2 and one line: the directory, that the disk is '
               'full, the bytes written and free, the fix; no dataset and '
               'no staging directory left (was: "[Errno 28] No space left '
               'on device", naming nothing)'))
def test_prepare_on_a_full_disk_says_where(tiny_dir, tmp_path, capsys,
                                           monkeypatch):
    from pyg_fastload.lightning.command import main
    _, cache = tiny_dir
    out = tmp_path / 'ds'
    disk_full_after(monkeypatch, arrays, 2)
    with usage_exit(capsys, disk_full_line('prepare', out, tmp_path)):
        main(['prepare', '--preset', 'tiny', '--cache-dir', str(cache),
              '--no-progress', str(out)])
    assert not os.path.lexists(out) and siblings(out) == []


@pytest.mark.reliability(
    fault='the disk fills while writing a heterogeneous dataset directory',
    behaviour='DiskFullError naming the directory; nothing left in place')
def test_hetero_writer_on_a_full_disk(tmp_path, monkeypatch):
    out = tmp_path / 'hds'
    disk_full_after(monkeypatch, arrays, 3)  # fails in the node arrays
    with pytest.raises(DiskFullError, match=(
            f"while writing the pyg-fastload dataset '{out}'")):
        prepare_hetero_preset('hetero-tiny', out, progress=False)
    assert sorted(os.listdir(tmp_path)) == []


#: A child process that runs ``pyg-fastload ARGS...`` after wrapping
#: ``MODULE.NAME`` (``NAME`` may be ``Class.method``): the first call runs,
#: creates the file MARK and waits to be killed.
_STOP_AFTER_FIRST_CALL = textwrap.dedent('''
    import importlib, signal, sys
    module_name, name = sys.argv[1].split(':')
    mark = sys.argv[2]
    owner = importlib.import_module(module_name)
    *path, attr = name.split('.')
    for part in path:
        owner = getattr(owner, part)
    real = getattr(owner, attr)
    def stop(*args, **kwargs):
        real(*args, **kwargs)
        open(mark, 'x').close()
        signal.pause()
    setattr(owner, attr, stop)
    from pyg_fastload.lightning.command import main
    main(sys.argv[3:])
''')


def killed_mid_write(where, args, env=None, timeout=120):
    r"""Runs ``pyg-fastload`` :obj:`args` in a child process (forked from
    the warm server) and SIGKILLs it once its first call of :obj:`where`
    (``'module:function'``) has run."""
    with tempfile.TemporaryDirectory() as scratch:
        script = os.path.join(scratch, 'stop_after_first_call.py')
        with open(script, 'w') as file:
            file.write(_STOP_AFTER_FIRST_CALL)
        mark = os.path.join(scratch, 'stopped')
        proc = Forked([where, mark, *map(str, args)],
                      env={**os.environ, **(env or {})}, script=script)
        try:
            deadline = time.monotonic() + timeout
            while not os.path.exists(mark):
                assert proc.poll() is None, proc.communicate()[1]
                assert time.monotonic() < deadline, \
                    f'{where} was not reached in {timeout}s'
                time.sleep(0.01)
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
        finally:
            proc.kill()
    assert proc.returncode == -9


@pytest.mark.reliability(
    fault='`prepare` of a heterogeneous dataset killed (SIGKILL) mid-write',
    behaviour=('no dataset in place; the next run removes the staging '
               'directory, says so, and succeeds'))
def test_killed_hetero_prepare_is_cleaned_by_the_next_run(tmp_path, capsys):
    out = tmp_path / 'hds'
    killed_mid_write('pyg_fastload.io.arrays:ArrayWriter.write',
                     ['prepare', '--preset', 'hetero-tiny', '--no-progress',
                      out])
    assert not os.path.lexists(out)
    left = siblings(out)
    assert [name[:9] for name in left] == ['.hds.lock', '.hds.tmp-'], left
    prepare_hetero_preset('hetero-tiny', out, progress=False)
    assert f"pyg-fastload: removed '{left[1]}'" in capsys.readouterr().out
    assert siblings(out) == []


def can_mount_a_small_disk():
    unshare = shutil.which('unshare')
    return unshare is not None and subprocess.run(
        [unshare, '-rm', 'true'], capture_output=True,
        timeout=30).returncode == 0


#: Runs a script on a tmpfs of SIZE mounted at DISK (in a user and mount
#: namespace: nothing outside this process tree sees it).
_ON_A_SMALL_DISK = ('mount -t tmpfs -o size="$1" tmpfs "$2" && '
                    'exec "$3" -c "$4"')


#: The start of every script of :func:`on_a_small_disk`: ``run(*args)``
#: runs a command and gives its exit status and stderr.
_RUN = '''
    import contextlib, io, json, os
    from pyg_fastload.lightning.command import main
    def run(*args):
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            try:
                code = main([*map(str, args), '--no-progress'])
            except SystemExit as end:
                code = end.code
        return {'code': code, 'err': err.getvalue()}
'''


def on_a_small_disk(tmp_path, size, script, timeout=120):
    r"""Runs Python :obj:`script` after :data:`_RUN` with a file system of
    :obj:`size` bytes at ``tmp_path / 'disk'``, which vanishes with it;
    returns the JSON it prints last."""
    disk = tmp_path / 'disk'
    disk.mkdir()
    proc = subprocess.run(
        ['unshare', '-rm', 'sh', '-c', _ON_A_SMALL_DISK, 'sh', str(size),
         str(disk), sys.executable,
         textwrap.dedent(_RUN) + textwrap.dedent(script)],
        capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-3000:])
    return json.loads(proc.stdout.splitlines()[-1])


needs_a_small_disk = pytest.mark.skipif(
    not can_mount_a_small_disk(),
    reason='mounting a small tmpfs needs user namespaces (unshare -rm)')


@needs_a_small_disk
@pytest.mark.reliability(
    fault='a real disk (tmpfs) that fills during `prepare --overwrite` and '
          '`partition`',
    behaviour=('exit status 2, one line naming the directory and the full '
               'disk; the previous dataset intact, no partition, nothing '
               'staged left'))
def test_prepare_and_partition_on_a_small_disk(tiny_dir, tmp_path):
    _, cache = tiny_dir
    disk = tmp_path / 'disk'
    out, parts = disk / 'ds', disk / 'parts'
    facts = on_a_small_disk(tmp_path, 400 * 1024, f'''
        from pyg_fastload.io import open_dataset_dir
        prepare = ['prepare', '--preset', 'tiny',
                   '--cache-dir', {str(cache)!r}, {str(out)!r}]
        first = run(*prepare)
        again = run(*prepare, '--overwrite', '--seed', '1')
        partition = run('partition', {str(out)!r}, '--num-parts', 2,
                        '--out', {str(parts)!r})
        seed = open_dataset_dir({str(out)!r}, verify='checksum'
                                ).meta['synthetic']['seed']
        print(json.dumps({{'first': first, 'again': again,
                          'partition': partition, 'seed': seed,
                          'left': sorted(os.listdir({str(disk)!r}))}}))
    ''')
    assert facts['first']['code'] in (0, None), facts['first']['err']
    assert facts['again']['code'] == 2
    assert re.search(disk_full_line('prepare', out, disk),
                     facts['again']['err']), facts['again']['err']
    assert facts['partition']['code'] == 2
    assert re.search(disk_full_line('partition', parts, disk),
                     facts['partition']['err']), facts['partition']['err']
    assert facts['seed'] == 0  # the previous dataset, checksums and all
    assert facts['left'] == ['ds']


@needs_a_small_disk
@pytest.mark.reliability(
    fault='a real disk (tmpfs) that fills while `prepare` writes a '
          "heterogeneous dataset's relations (memory-mapped)",
    behaviour='exit status 2 and one line naming the directory and that the '
              'disk is full (was: SIGBUS, no message): the blocks of a '
              'mapped region are allocated before it is mapped')
def test_hetero_prepare_on_a_small_disk(tmp_path):
    out = tmp_path / 'disk' / 'hds'
    facts = on_a_small_disk(tmp_path, 64 * 1024, f'''
        result = run('prepare', '--preset', 'hetero-tiny', {str(out)!r})
        print(json.dumps(result))
    ''')
    assert facts['code'] == 2
    assert re.search(disk_full_line('prepare', out, out.parent),
                     facts['err']), facts['err']
