r"""Reading OGB's raw files in bounded chunks: gzipped CSV blocks, scalars,
and members of ``data.npz`` streamed without loading them whole."""
from __future__ import annotations

import gzip
import io
import warnings
import zipfile
from pathlib import Path
from typing import Any, Dict, Iterator, Optional

import numpy as np

from ..io import format as fmt
from ..io.format import DatasetFormatError
from ..io.arrays import row_chunks
from ..io.writer import label_classes

__all__ = ['iter_csv', 'read_scalar', 'empty_split', 'choose_split',
           'split_mask', 'SPLITS', 'NpyMember', 'labels_chunk']

#: The files of a split folder and the masks they become.
SPLITS = (('train', 'train_mask'), ('valid', 'val_mask'),
          ('test', 'test_mask'))


def iter_csv(file: Path, dtype: Any, num_cols: Optional[int] = None
              ) -> Iterator[np.ndarray]:
    r"""Parses a (gzipped) comma-separated numeric file in blocks of about
    :obj:`fmt.CSV_BLOCK_BYTES`, yielding ``[rows, columns]`` arrays."""
    opener = gzip.open if file.suffix == '.gz' else open
    line = 0
    carry = b''
    try:
        with opener(file, 'rb') as f:
            while True:
                data = f.read(fmt.CSV_BLOCK_BYTES)
                if data:
                    data = carry + data
                    cut = data.rfind(b'\n')
                    if cut < 0:
                        carry = data
                        continue
                    text, carry = data[:cut + 1], data[cut + 1:]
                else:
                    text, carry = carry, b''
                if text.strip():
                    try:
                        array = np.loadtxt(io.StringIO(text.decode()),
                                           delimiter=',', dtype=dtype,
                                           ndmin=2, comments=None)
                    except ValueError as exc:
                        raise DatasetFormatError(
                            f'{file}: cannot parse the lines after line '
                            f'{line} ({exc}); the file is corrupt or not an '
                            f'OGB CSV: unzip the OGB archive again') from None
                    if num_cols is not None and array.shape[1] != num_cols:
                        raise DatasetFormatError(
                            f'{file}: lines after line {line} have '
                            f'{array.shape[1]} columns, expected {num_cols}'
                            f'; the file is corrupt: unzip the OGB archive '
                            f'again')
                    yield array
                    line += text.count(b'\n')
                if not data:
                    break
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise DatasetFormatError(
            f'{file}: unreadable ({exc}); the file is truncated or corrupt: '
            f'unzip the OGB archive again') from None


def read_scalar(file: Path) -> int:
    r"""The one count (of nodes or edges) :obj:`file` holds."""
    if not file.exists():
        raise DatasetFormatError(f'{file}: missing; it is part of every OGB '
                                 f'node-property dataset: unzip the archive '
                                 f'again')
    rows = [chunk.reshape(-1) for chunk in iter_csv(file, np.int64)]
    size = sum(chunk.size for chunk in rows)
    if size == 0:
        raise DatasetFormatError(f'{file}: empty, expected one count; unzip '
                                 f'the OGB archive again')
    if size != 1:
        raise DatasetFormatError(
            f'{file}: holds {size} values, expected 1 (one graph); '
            f'only node-property (ogbn-*) datasets are supported')
    value = int(np.concatenate(rows)[0])
    if value < 0:
        raise DatasetFormatError(f'{file}: holds {value}, expected a count '
                                 f'>= 0; unzip the OGB archive again')
    return value


def empty_split(split_root: Path) -> str:
    r"""The message for a ``split/`` folder :obj:`split_root` that holds
    no split."""
    return (f'{split_root}: holds no split folder (such as split/time/); '
            f'unzip the OGB archive again, or remove the empty folder to '
            f'prepare the dataset without train/val/test masks')


def choose_split(root: Path, raw: Path, split: Optional[str],
                 default: Optional[str]) -> Optional[Path]:
    r"""The split folder a dataset's masks are read from:
    ``split/<split>`` beside ``raw/`` (OGB's archives) or inside it (PyG's
    raw folders); without :obj:`split` the dataset's :obj:`default`, else
    the only one there; :obj:`None`, with a warning, where there is no
    ``split/`` folder.

    Args:
        root (Path): the dataset root (holding ``raw/``).
        raw (Path): its raw folder.
        split (str, optional): the folder asked for.
        default (str, optional): the dataset's standard split.
    """
    split_root = raw / 'split' if (raw / 'split').is_dir() else \
        root / 'split'
    if split is not None:
        chosen = split_root / split
        if not chosen.is_dir():
            raise DatasetFormatError(
                f"{chosen}: missing; invalid 'split' = {split!r}: pass one "
                f'of the folders in {split_root}')
        return chosen
    if not split_root.is_dir():
        warnings.warn(f'{root}: no split/ folder, so the dataset gets no '
                      f'train/val/test masks; pass the dataset root as '
                      f'--raw-dir', UserWarning, stacklevel=3)
        return None
    options = sorted(p.name for p in split_root.iterdir() if p.is_dir())
    if not options:
        raise DatasetFormatError(empty_split(split_root))
    if default in options:
        return split_root / default
    if len(options) == 1:
        return split_root / options[0]
    raise DatasetFormatError(
        f"{split_root}: holds several splits ({', '.join(options)}); pass "
        f"one as 'split'")


def split_mask(file: Path, num_nodes: int) -> np.ndarray:
    r"""The mask of the :obj:`num_nodes` nodes whose ids the split file
    :obj:`file` lists (read in chunks; an id out of range is refused)."""
    if not file.is_file():
        raise DatasetFormatError(f'{file}: missing; unzip the OGB archive '
                                 f'again')
    mask = np.zeros(num_nodes, dtype=bool)
    for ids in iter_csv(file, np.int64, num_cols=1):
        ids = ids[:, 0]
        if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= num_nodes):
            bad = int(ids.min()) if int(ids.min()) < 0 else int(ids.max())
            raise DatasetFormatError(
                f'{file}: node id {bad} outside [0, {num_nodes}); the split '
                f'does not belong to this dataset')
        mask[ids] = True
    return mask


class NpyMember:
    r"""Streams one ``.npy`` member of an ``.npz`` archive without loading
    it whole (works for stored and deflated members)."""

    def __init__(self, npz: Path, key: str):
        self.npz, self.key, self.member = npz, key, f'{key}.npy'
        with zipfile.ZipFile(npz) as zf:
            names = zf.namelist()
            if self.member not in names:
                have = ', '.join(n[:-4] for n in names if n.endswith('.npy'))
                raise DatasetFormatError(
                    f"{npz}: has no array '{key}' (it has {have}); the file "
                    f'is not the OGB one: unzip the archive again')
            with zf.open(self.member) as f:
                version = np.lib.format.read_magic(f)
                if version == (1, 0):
                    header = np.lib.format.read_array_header_1_0(f)
                else:
                    header = np.lib.format.read_array_header_2_0(f)
                self.offset = f.tell()
        self.shape, self.fortran, self.dtype = header
        if self.dtype.hasobject:
            raise DatasetFormatError(f"{npz}: array '{key}' holds Python "
                                     f'objects; expected numbers')

    def load(self) -> np.ndarray:
        with np.load(self.npz, allow_pickle=False) as z:
            return z[self.key]

    def stream(self, start: int, count: int, chunk: int
               ) -> Iterator[np.ndarray]:
        r"""Yields :obj:`count` items from item :obj:`start` on (flat,
        storage order), :obj:`chunk` items at a time."""
        itemsize = self.dtype.itemsize
        with zipfile.ZipFile(self.npz) as zf, zf.open(self.member) as f:
            f.seek(self.offset + start * itemsize)
            done = 0
            while done < count:
                n = min(chunk, count - done)
                buf = f.read(n * itemsize)
                if len(buf) != n * itemsize:
                    raise DatasetFormatError(
                        f"{self.npz}: array '{self.key}' is truncated; "
                        f'download and unzip the OGB archive again')
                yield np.frombuffer(buf, dtype=self.dtype)
                done += n

    def rows(self) -> Iterator[np.ndarray]:
        r"""Yields row chunks of a C-order array (falls back to loading a
        Fortran-order array whole)."""
        if self.fortran and len(self.shape) > 1:
            warnings.warn(f"{self.npz}: '{self.key}' is stored in Fortran "
                          f'order and is loaded whole', RuntimeWarning)
            array = self.load()
            for chunk, _ in row_chunks(array, f"'{self.key}' in {self.npz}"):
                yield chunk
            return
        row = int(np.prod(self.shape[1:], dtype=np.int64))
        rows_per = max(1, fmt.CHUNK_BYTES // max(1, row * self.dtype.itemsize))
        total = int(np.prod(self.shape, dtype=np.int64))
        for block in self.stream(0, total, rows_per * max(row, 1)):
            yield block.reshape(-1, *self.shape[1:])


def labels_chunk(values: np.ndarray, file: Path, state: Dict[str, int],
                 num_nodes: int) -> np.ndarray:
    r"""OGB labels as ``int64`` with ``-1`` for missing (NaN) ones, refused
    unless class indices of :obj:`num_nodes` nodes
    (:func:`~pyg_fastload.io.writer.label_classes`)."""
    values = np.asarray(values, dtype=np.float64)
    if values.ndim == 1:
        values = values[:, None]
    nan = np.isnan(values)
    given = values[~nan]
    if given.size and not bool(np.all(np.isfinite(given) &
                                      (given == np.round(given)))):
        raise DatasetFormatError(f'{file}: non-integer labels; only '
                                 f'classification datasets are supported')
    if given.size:
        label_classes(int(given.min()), int(given.max()), num_nodes,
                      str(file))
        state['max'] = max(state['max'], int(given.max()))
    out = np.where(nan, -1.0, values).astype(np.int64)
    state['missing'] += int(nan.sum())
    state['columns'] = values.shape[1]
    return out[:, 0] if values.shape[1] == 1 else out
