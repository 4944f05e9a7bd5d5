r"""Writing a dataset directory crash-safely: a staging directory beside
the final path, put in place atomically, with a lock file per run so that a
later run can tell a dead run's leftovers from a live one's and clean them.

Siblings of ``DIR`` (all hidden): ``.DIR.lock-TOKEN`` (held with ``flock``
by the run while it writes), ``.DIR.tmp-TOKEN`` (what it writes) and,
where the file system cannot exchange two directories atomically,
``.DIR.old-TOKEN`` (the replaced dataset, for a moment).

A directory is recognised as pyg-fastload's only by its manifest
(``meta.json`` of a dataset, ``partition.json`` of a partition) and that
manifest's ``"format"`` key (:class:`DirectoryFormat`); replacing it
replaces only the entries the manifest lists and keeps the rest.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import errno
import fcntl
import json
import os
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import (Any, Callable, Dict, Iterable, List, Optional, Tuple,
                    TypeVar, Union)

import numpy as np
from tqdm.auto import tqdm

from ..config import format_bytes
from .arrays import ArrayWriter, Source, row_chunks
from .format import (
    FORMAT_NAME,
    TOPOLOGY_ARRAYS,
    numpy_dtype,
    sha256_file,
)
from .reader import MAX_META_BYTES

__all__ = ['DATASET_DIR', 'DirectoryFormat', 'DiskFullError',
           'ScratchDirectory', 'StagedDirectory', 'Staging',
           'TargetExistsError', 'check_target', 'file_in_the_way',
           'recover', 'replace_directory']

PathLike = Union[str, 'os.PathLike[str]']
_Self = TypeVar('_Self', bound='ScratchDirectory')

#: Whether :func:`_exchange` may use ``renameat2``; tests turn it off to
#: exercise the two-rename fallback.
USE_EXCHANGE = True
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _sibling(path: Path, kind: str, token: str) -> Path:
    return path.parent / f'.{path.name}.{kind}-{token}'


def _exchange(a: Path, b: Path) -> bool:
    r"""Atomically swaps two paths (Linux ``renameat2``); :obj:`False`
    where the system or file system cannot."""
    if not USE_EXCHANGE:
        return False
    libc_name = ctypes.util.find_library('c')
    if libc_name is None:
        return False
    libc = ctypes.CDLL(libc_name, use_errno=True)
    renameat2 = getattr(libc, 'renameat2', None)
    if renameat2 is None:
        return False
    result = renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b),
                       _RENAME_EXCHANGE)
    return result == 0


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def replace_directory(new: Path, path: Path, token: str) -> None:
    r"""Puts directory :obj:`new` at :obj:`path`, removing what was there:
    one atomic rename, or one atomic exchange over an existing directory;
    where the system cannot exchange, the old directory is renamed to
    ``.NAME.old-TOKEN`` first (see :func:`recover`)."""
    if not os.path.lexists(path):
        os.replace(new, path)
    elif _exchange(new, path):
        shutil.rmtree(new, ignore_errors=True)  # now holds the old one
    else:
        old = _sibling(path, 'old', token)
        os.rename(path, old)
        try:
            os.replace(new, path)
        except OSError:
            os.rename(old, path)
            raise
        shutil.rmtree(old, ignore_errors=True)
    _fsync_dir(path.parent)


def _tree_bytes(path: Path) -> int:
    r"""Bytes of the regular files under :obj:`path`, never following a
    link."""
    total = 0
    for root, _, files in os.walk(path, followlinks=False):
        for name in files:
            stat = os.lstat(os.path.join(root, name))
            if not os.path.islink(os.path.join(root, name)):
                total += stat.st_size
    return total


def _remove_leftover(leftover: Path) -> str:
    r"""Removes a dead run's staging directory and says what was removed;
    a link planted in its place is removed as a link (its target is never
    sized nor touched)."""
    if leftover.is_symlink():
        leftover.unlink()
        return f"removed the link '{leftover.name}' (its target untouched)"
    size = _tree_bytes(leftover)
    shutil.rmtree(leftover, ignore_errors=True)
    if os.path.lexists(leftover):
        return f"could not remove '{leftover}': remove it by hand"
    return (f"removed '{leftover.name}' ({size:,} bytes) left by a run that "
            f"died")


def recover(path: PathLike, verbose: bool = True) -> List[str]:
    r"""Repairs and cleans what runs that died while writing :obj:`path`
    left beside it; returns what was done. A run is known dead when its
    lock file can be locked; the leftovers of live runs are untouched.

    If the dataset went missing between the two renames of the fallback
    replacement, the previous dataset is put back; staging directories and
    replaced datasets of dead runs are removed. Staging directories without
    a lock file (written before pyg-fastload kept one) are reported, never
    removed by guessing."""
    path = Path(path).expanduser()
    done: List[str] = []
    prefix = f'.{path.name}.'
    siblings = list(path.parent.iterdir()) if path.parent.is_dir() else []
    for lock_file in siblings:
        if not lock_file.name.startswith(prefix + 'lock-'):
            continue
        token = lock_file.name[len(prefix + 'lock-'):]
        with open(lock_file, 'a') as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # its run is alive
            old, tmp = _sibling(path, 'old', token), _sibling(path, 'tmp',
                                                                token)
            if old.is_dir() and not os.path.lexists(path):
                os.rename(old, path)
                done.append(f"restored '{path}' from '{old.name}' (a run "
                            f"died while replacing it)")
            for leftover in (old, tmp):
                if os.path.lexists(leftover):
                    done.append(_remove_leftover(leftover))
            lock_file.unlink(missing_ok=True)
    locked = {p.name[len(prefix + 'lock-'):] for p in siblings
              if p.name.startswith(prefix + 'lock-')}
    for leftover in siblings:
        name = leftover.name
        for kind in ('tmp-', 'old-'):
            if name.startswith(prefix + kind) and \
                    name[len(prefix + kind):] not in locked:
                done.append(f"'{leftover}' has no lock file, so it is not "
                            f"known to be abandoned: remove it yourself if "
                            f"no pyg-fastload prepare is writing it")
    if verbose:
        for line in done:
            print(f'pyg-fastload: {line}')
    return done


@dataclass(frozen=True)
class DirectoryFormat:
    r"""A kind of directory pyg-fastload writes, recognised by its manifest.

    Args:
        manifest (str): the manifest's file name (``'meta.json'``).
        name (str): the value of the manifest's ``"format"`` key.
        what (str): the kind in words, for messages.
        owned (callable): the paths (relative, ``/``-separated) that a
            manifest of this format lists; their top-level entries, and
            the manifest, are what replacing the directory replaces.
    """
    manifest: str
    name: str
    what: str
    owned: Callable[[Dict[str, Any]], Iterable[Any]]

    def owned_entries(self, path: Path) -> Optional[List[str]]:
        r"""The top-level entries of :obj:`path` that its manifest owns, or
        :obj:`None` where :obj:`path` holds no manifest of this format."""
        file = path / self.manifest
        try:
            if file.stat().st_size > MAX_META_BYTES:
                return None
            manifest = json.loads(file.read_text())
        except (OSError, ValueError, RecursionError):
            return None
        if not isinstance(manifest, dict) or \
                manifest.get('format') != self.name:
            return None
        owned = {self.manifest}
        for listed in self.owned(manifest):
            parts = PurePosixPath(listed).parts if isinstance(listed, str) \
                else ()
            if parts and parts[0] not in ('/', '..'):
                owned.add(parts[0])
        return sorted(owned)


def _dataset_files(meta: Dict[str, Any]) -> List[Any]:
    r"""The array files a dataset's ``meta.json`` lists."""
    arrays = meta.get('arrays')
    if not isinstance(arrays, dict):
        return []
    return [spec.get('file') for spec in arrays.values()
            if isinstance(spec, dict)]


#: A dataset directory (``pyg-fastload prepare``).
DATASET_DIR = DirectoryFormat('meta.json', FORMAT_NAME,
                              'pyg-fastload dataset', _dataset_files)


class TargetExistsError(FileExistsError):
    r"""An output directory that exists, written without ``overwrite``.
    The message names the library's argument (``overwrite=True``); a
    caller that takes the switch under another name (a command's
    ``--overwrite``, a callback's config key) names its own with
    :meth:`naming`."""

    def __init__(self, path: Path, switch: str = 'overwrite=True'):
        self.path = path
        self.switch = switch
        super().__init__(
            f"output directory '{path}' already exists; pass {switch} to "
            f"replace it, or choose another directory")

    def naming(self, switch: str) -> 'TargetExistsError':
        r"""The same error, its message naming :obj:`switch` (how the
        caller's user asks to replace the directory)."""
        return TargetExistsError(self.path, switch)


def file_in_the_way(path: Path) -> Optional[Path]:
    r"""The file (anything but a directory) at :obj:`path` or at the
    nearest of its parents that exists, which keeps a directory from being
    made at :obj:`path`; :obj:`None` where a directory can be made."""
    for place in (path, *path.parents):
        if os.path.lexists(place):
            return None if place.is_dir() else place
    return None


def check_target(path: Path, overwrite: bool,
                 kind: DirectoryFormat = DATASET_DIR) -> List[str]:
    r"""Fails early when :obj:`path` exists and may not be replaced: only
    with :obj:`overwrite`, and only an empty directory or one holding a
    manifest of :obj:`kind`. Returns the entries there that the manifest
    does not own, which replacing the directory keeps."""
    if not os.path.lexists(path):
        blocker = file_in_the_way(path.parent)
        if blocker is not None:
            raise NotADirectoryError(
                f"output path '{path}' lies under '{blocker}', which is a "
                f"file, not a directory; choose another output directory")
        return []
    if not path.is_dir():
        raise FileExistsError(
            f"output path '{path}' exists and is not a directory; remove it "
            f"or choose another output directory")
    if not overwrite:
        raise TargetExistsError(path)
    entries = sorted(os.listdir(path))
    if not entries:
        return []
    owned = kind.owned_entries(path)
    if owned is None:
        raise FileExistsError(
            f"refusing to overwrite '{path}': it holds files but no "
            f"{kind.manifest} with format '{kind.name}', so it is not a "
            f"{kind.what} and nothing in it is known to be ours; choose an "
            f"empty or new directory")
    return [name for name in entries if name not in owned]


def _link_or_copy(src: str, dst: str) -> None:
    r"""A hard link of file :obj:`src` at :obj:`dst`, or a copy where the
    file system cannot link."""
    try:
        os.link(src, dst, follow_symlinks=False)
    except OSError:
        shutil.copy2(src, dst, follow_symlinks=False)


def _carry_over(old: Path, new: Path, names: List[str]) -> List[str]:
    r"""Links (never moves) the entries :obj:`names` of :obj:`old` into
    :obj:`new`, except those :obj:`new` holds already; returns the names
    carried. Links, so a crash before :obj:`new` is in place loses
    nothing."""
    carried = []
    for name in names:
        src, dst = old / name, new / name
        if os.path.lexists(dst):  # written by this run: ours
            continue
        if src.is_symlink():
            os.symlink(os.readlink(src), dst)
        elif src.is_dir():
            shutil.copytree(src, dst, symlinks=True,
                            copy_function=_link_or_copy)
        else:
            _link_or_copy(str(src), str(dst))
        carried.append(name)
    return carried


#: The ``errno`` of a write that found no space: a full disk, or a quota
#: used up.
DISK_FULL = (errno.ENOSPC, errno.EDQUOT)


class DiskFullError(OSError):
    r"""A write into a staging or scratch directory found the disk full;
    the message says what was being written, where, how much had been
    written and how much is free."""

    def __str__(self) -> str:
        return str(self.strerror)


class ScratchDirectory:
    r"""A hidden directory beside :obj:`path` (``.NAME.tmp-TOKEN``), held
    by a lock file (``.NAME.lock-TOKEN``) while in use and removed on exit;
    what runs that were killed left there is removed by the next one
    (:func:`recover`, run first). A write that fails for want of space
    ends in a :class:`DiskFullError`.

    Args:
        path: the path the directory is named after.
        what (str): what is written in it, for messages.
        elsewhere (str): how to write it to another disk, for messages.
    """

    def __init__(self, path: PathLike, what: str, elsewhere: str):
        self.path = Path(path).expanduser()
        self.what = what
        self.elsewhere = elsewhere
        self.path.parent.mkdir(parents=True, exist_ok=True)
        recover(self.path)  # reports what it repaired or removed
        self._check()
        self.token = uuid.uuid4().hex[:12]
        # Held for the whole write: a later run that can take it knows that
        # this one died, and cleans up after it (see recover()).
        self._lock_file = _sibling(self.path, 'lock', self.token)
        self._lock = open(self._lock_file, 'w')
        fcntl.flock(self._lock, fcntl.LOCK_EX)
        self.dir = _sibling(self.path, 'tmp', self.token)
        self.dir.mkdir()

    def _check(self) -> None:
        r"""Refuses the run before anything is written (after
        :func:`recover`); here nothing to check."""

    def __enter__(self: _Self) -> _Self:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        written = None
        if self.dir.exists():  # not put in place: failed, or scratch
            if isinstance(exc, OSError) and exc.errno in DISK_FULL:
                written = _tree_bytes(self.dir)
            shutil.rmtree(self.dir, ignore_errors=True)
        self._release()
        if written is not None:
            raise DiskFullError(exc.errno, self._disk_full(written)) from exc

    def _disk_full(self, written: int) -> str:
        where = self.path.parent
        left = ('was left for the next run to remove'
                if os.path.lexists(self.dir) else 'was removed')
        return (f"no space left on the disk holding '{where}' while writing "
                f"{self.what}: it needs more than the "
                f"{format_bytes(written)} written when the disk filled, and "
                f"{format_bytes(shutil.disk_usage(where).free)} is free "
                f"there (its staging directory '{self.dir.name}' {left}); "
                f"free space on that disk, or {self.elsewhere}")

    def _release(self) -> None:
        if not self._lock.closed:
            self._lock_file.unlink(missing_ok=True)
            self._lock.close()


class StagedDirectory(ScratchDirectory):
    r"""A directory written beside :obj:`path` and put in place atomically
    by :meth:`put_in_place`, with a lock file held meanwhile, so that
    :func:`recover` (run first) can clean up after runs that died.

    Args:
        path: the final path.
        overwrite (bool): replace an existing directory of :obj:`kind`
            there, keeping the entries its manifest does not own.
        kind (DirectoryFormat): what this directory is (see
            :func:`check_target`).
    """

    def __init__(self, path: PathLike, overwrite: bool,
                 kind: DirectoryFormat = DATASET_DIR):
        self.overwrite = overwrite
        self.kind = kind
        #: The entries of the replaced directory that were kept.
        self.kept: List[str] = []
        path = Path(path).expanduser()
        super().__init__(path, f"the {kind.what} '{path}'",
                         'choose an output directory on another disk')

    def _check(self) -> None:
        check_target(self.path, self.overwrite, self.kind)

    def put_in_place(self) -> Path:
        r"""One atomic rename, or, over an existing directory, one atomic
        exchange (``renameat2(RENAME_EXCHANGE)``) so the final path always
        holds a complete directory. Where the exchange is unavailable the
        old one is renamed aside first; a crash between the two renames is
        repaired by the next run (:func:`recover`). The entries of the old
        directory that its manifest does not own are linked into the new
        one first, and reported."""
        os.chmod(self.dir, 0o755)
        if os.path.lexists(self.path):
            foreign = check_target(self.path, self.overwrite, self.kind)
            self.kept = _carry_over(self.path, self.dir, foreign)
        replace_directory(self.dir, self.path, self.token)
        self._release()
        if self.kept:
            print(f"pyg-fastload: kept what the replaced {self.kind.what} "
                  f"did not own in '{self.path}': {', '.join(self.kept)}")
        return self.path


class Staging(StagedDirectory):
    r"""A staged dataset directory: arrays written into it, then
    :meth:`commit` writes ``meta.json`` and puts it in place."""

    def __init__(self, path: PathLike, overwrite: bool, progress: bool):
        super().__init__(path, overwrite)
        self.progress = progress
        self.specs: Dict[str, Dict[str, Any]] = {}

    def write_array(
        self,
        name: str,
        source: Source,
        *,
        expect_rows: Optional[int] = None,
        what: Optional[str] = None,
        cast: Optional[Callable[[np.ndarray, str],
                                Tuple[np.ndarray, str]]] = None,
        check: Optional[Callable[[np.ndarray, int], None]] = None,
        default_dtype: str = 'float32',
    ) -> Dict[str, Any]:
        what = what or f"array '{name}'"
        writer = ArrayWriter(self.dir, name)
        bar = tqdm(total=expect_rows, unit='row', unit_scale=True,
                   desc=f'writing {name}', disable=not self.progress,
                   leave=False)
        try:
            for chunk, dtype_name in row_chunks(source, what):
                if check is not None:  # before casting, which may wrap
                    check(chunk, writer.rows)
                if cast is not None:
                    chunk, dtype_name = cast(chunk, dtype_name)
                writer.write(chunk, dtype_name)
                bar.update(chunk.shape[0])
            if expect_rows is not None and writer.rows != expect_rows:
                raise ValueError(
                    f'{what} ({writer.file.name}) has {writer.rows} rows but '
                    f'{expect_rows} are needed (one per '
                    f"{'CSC entry' if name in TOPOLOGY_ARRAYS else 'node'}"
                    f'); pass an array with {expect_rows} rows')
            spec = writer.close(default_dtype)
        except BaseException:
            writer.abort()
            raise
        finally:
            bar.close()
        self.specs[name] = spec
        return spec

    def adopt(self, name: str, dtype_name: str,
              shape: List[int]) -> Dict[str, Any]:
        r"""Registers ``<name>.bin``, already written into the staging
        directory (by :func:`csc_from_edge_chunks`), hashing it."""
        file = self.dir / f'{name}.bin'
        expected = int(np.prod(shape, dtype=np.int64)) * \
            numpy_dtype(dtype_name).itemsize
        actual = file.stat().st_size
        if actual != expected:  # pragma: no cover - internal consistency
            raise RuntimeError(f'{file}: {actual} bytes, expected {expected}')
        with tqdm(total=actual, unit='B', unit_scale=True,
                  desc=f'hashing {name}', disable=not self.progress,
                  leave=False) as bar:
            digest = sha256_file(file, bar)
        spec = {'file': file.name, 'dtype': dtype_name, 'shape': list(shape),
                'bytes': actual, 'sha256': digest}
        self.specs[name] = spec
        return spec

    def commit(self, meta: Dict[str, Any]) -> Path:
        r"""Writes ``meta.json`` and puts the dataset in place
        (:meth:`put_in_place`)."""
        meta = dict(meta)
        meta['arrays'] = self.specs
        meta_file = self.dir / 'meta.json'
        with open(meta_file, 'w') as f:
            json.dump(meta, f, indent=2)
            f.write('\n')
            f.flush()
            os.fsync(f.fileno())
        return self.put_in_place()
