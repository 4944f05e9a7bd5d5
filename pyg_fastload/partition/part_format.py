r"""The partition directory's format, shared by both kinds of dataset:
``partition.json`` (written by :func:`~pyg_fastload.partition.
partition_dataset`) and its checks, the book's files, the part
directories, and the chunk sources a part's writer streams."""
from __future__ import annotations

import itertools
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import (Any, Callable, Dict, Iterator, List, Optional, Tuple,
                    Union)

import numpy as np
import numpy.lib.format as npy
import torch

from ..graph.topology import CSCTopology
from ..graph.kind import is_topology
from ..io import DatasetFormatError, open_dataset_dir
from ..io.format import is_sha256, sha256_file
from ..io.reader import MAX_META_BYTES
from ..io.staging import DirectoryFormat
from .book import BOOK_FILES, HeteroPartitionBook, PartitionBook
from .methods import METHODS

__all__ = ['PARTITION_FORMAT', 'PARTITION_VERSION', 'PARTITION_DIR',
           'FEATURES', 'SOURCE_ID', 'is_hetero_partition', 'part_dir',
           'save_book', 'write_npy', 'edge_chunks', 'edge_row_chunks',
           'row_chunks', 'fail', 'read_partition_meta', 'checked_part',
           'concat_csc', 'Assignment', 'load_book', 'open_part']

#: The value of ``partition.json``'s ``"format"`` key, and its version.
PARTITION_FORMAT = 'pyg-fastload-partition'
PARTITION_VERSION = 1

PathLike = Union[str, 'os.PathLike[str]']


def is_hetero_partition(meta: Dict[str, Any]) -> bool:
    r"""Whether ``partition.json`` :obj:`meta` (or the partition's
    report, which carries the same ``'kind'``) is of a heterogeneous
    dataset's partition (typed new ids, typed parts); the one reader of
    that key."""
    return meta.get('kind') == 'hetero'


def part_dir(parts_dir: Path, part: int) -> Path:
    r"""The directory of part :obj:`part` of :obj:`parts_dir`."""
    return parts_dir / f'part-{part}'


def open_part(meta: Dict[str, Any], path: Path, verify: str = 'none') -> Any:
    r"""The part at :obj:`path` of the partition of ``partition.json``
    :obj:`meta`, opened as the dataset directory of its kind (a
    heterogeneous partition's parts are heterogeneous directories; a part
    of the other kind is refused)."""
    dataset = open_dataset_dir(path, verify=verify)
    hetero = is_hetero_partition(meta)
    if not is_topology(dataset.topology, hetero=hetero):
        kind = 'heterogeneous' if hetero else 'homogeneous'
        raise DatasetFormatError(
            f"{path}: the partition is {kind} but this part is not; "
            f"re-create the partition with `pyg-fastload partition "
            f"DATASET_DIR --num-parts K --out {path.parent} --overwrite`")
    return dataset


def _partition_files(meta: Dict[str, Any]) -> List[Any]:
    r"""What a ``partition.json`` owns: the files it lists (the book, every
    part's directory) and the ``report.json`` of ``partition --report``."""
    files = meta.get('files')
    return [*(files if isinstance(files, dict) else ()), 'report.json']


#: A partition directory (``pyg-fastload partition``).
PARTITION_DIR = DirectoryFormat('partition.json', PARTITION_FORMAT,
                                'pyg-fastload partition', _partition_files)
#: The most parts a partition may claim (checked before anything is read).
MAX_PARTS = 2**16
#: The most edges, and bytes of a node array's rows, of a part gathered at
#: once while writing it.
WRITE_CHUNK_EDGES = 2**22
WRITE_CHUNK_BYTES = 2**26
#: Where a partition's feature rows are: copied into every part
#: (``'copy'``), or left in the partitioned dataset (``'source'``).
FEATURES = ('copy', 'source')
#: A ``features='source'`` part's file of the dataset's row of each row.
SOURCE_ID = 'source_id.npy'


def save_book(folder: Path, arrays: Tuple[np.ndarray, ...]) -> None:
    r"""Writes the book's :obj:`arrays` into :obj:`folder` as the ``.npy``
    files :data:`BOOK_FILES` (in that order), the data through the file's
    own ``write``, so a full disk raises ``OSError`` (ENOSPC): ``np.save``
    writes it by ``ndarray.tofile``, which gives a large write's error
    without ``errno`` and loses a small one's (a short file then put in
    place with its checksum)."""
    for name, array in zip(BOOK_FILES, arrays):
        write_npy(folder / name, array)


def write_npy(file: Path, array: np.ndarray) -> None:
    r"""Writes :obj:`array` as the ``.npy`` :obj:`file` through the
    file's own ``write`` (see :func:`save_book`)."""
    array = np.ascontiguousarray(array)
    with open(file, 'wb') as f:
        npy.write_array_header_1_0(f, npy.header_data_from_array_1_0(array))
        f.write(array.reshape(-1).view(np.uint8))


def edge_chunks(indptr: torch.Tensor) -> Iterator[Tuple[int, int]]:
    r"""``(first, end)`` ranges of the rows of CSC offsets :obj:`indptr`
    holding about :data:`WRITE_CHUNK_EDGES` edges each (a row with more
    alone): how a part's edges are streamed to its writer."""
    rows = indptr.numel() - 1
    at = 0
    while at < rows:
        end = min(rows, max(at + 1, int(torch.searchsorted(
            indptr, int(indptr[at]) + WRITE_CHUNK_EDGES, right=True)) - 1))
        yield at, end
        at = end


def edge_row_chunks(value: torch.Tensor,
                    positions: Callable[[], Iterator[torch.Tensor]]
                    ) -> Callable[[], Iterator[torch.Tensor]]:
    r"""The chunks of edge array :obj:`value`'s rows at each of
    :obj:`positions`' chunks of edge positions (an empty chunk first: a
    part without edges still has the array's type), for the writer."""
    return lambda: itertools.chain([value[:0]],
                                   (value[at] for at in positions()))


def row_chunks(value: Any, rows: torch.Tensor
               ) -> Callable[[], Iterator[torch.Tensor]]:
    r"""The rows :obj:`rows` of the node array :obj:`value` as a chunk
    source of about :data:`WRITE_CHUNK_BYTES` each (what the dataset
    writers take): a part's features never whole in memory."""
    step = max(1, WRITE_CHUNK_BYTES // max(1, value[:1].nbytes))
    return lambda: (value[rows[at:at + step]] for at in
                    range(0, max(rows.numel(), 1), step))


def fail(parts_dir: Path, file: Path, what: str) -> DatasetFormatError:
    return DatasetFormatError(
        f'{file}: {what}; re-create the partition with `pyg-fastload '
        f'partition DATASET_DIR --num-parts K --out {parts_dir} '
        f'--overwrite`')


def _check_schema(parts_dir: Path, file: Path, meta: Any) -> None:
    r"""``partition.json``'s fields and their types."""
    if not isinstance(meta, dict) or meta.get('format') != PARTITION_FORMAT:
        raise fail(parts_dir, file, f"'format' is not '{PARTITION_FORMAT}'")
    if meta.get('format_version') != PARTITION_VERSION:
        raise fail(parts_dir, file, f"format_version "
                    f"{meta.get('format_version')!r}, this pyg-fastload "
                    f"reads {PARTITION_VERSION}")
    for key, kind in (('method', str), ('num_parts', int), ('run', str),
                      ('files', dict), ('dataset', dict)):
        value = meta.get(key)
        if not isinstance(value, kind) or isinstance(value, bool):
            found = type(value).__name__ if key in meta else 'missing'
            raise fail(parts_dir, file, f"'{key}' is {found}, expected "
                        f"{kind.__name__}")
    if meta['method'] not in METHODS:
        raise fail(parts_dir, file, f"'method' {meta['method']!r} is not one "
                    f"of {', '.join(METHODS)}")
    if meta.get('features', 'copy') not in FEATURES:
        raise fail(parts_dir, file, f"'features' {meta['features']!r} is "
                    f"not one of {', '.join(FEATURES)}")
    if not 1 <= meta['num_parts'] <= MAX_PARTS:
        raise fail(parts_dir, file, f"'num_parts' {meta['num_parts']} is "
                    f"outside [1, {MAX_PARTS}]")
    for name, digest in meta['files'].items():
        if not is_sha256(digest):
            raise fail(parts_dir, file, f"'files' maps {name!r} to "
                        f"{digest!r}, not a SHA-256")
    num_nodes = meta['dataset'].get('num_nodes')
    if not isinstance(num_nodes, int) or isinstance(num_nodes, bool) or \
            num_nodes < 0:
        raise fail(parts_dir, file, f"'dataset.num_nodes' is {num_nodes!r}, "
                    f"expected an int >= 0")


def read_partition_meta(parts_dir: PathLike) -> Dict[str, Any]:
    r"""``partition.json`` of :obj:`parts_dir`, checked, and the book's
    files checked against their checksums."""
    parts_dir = Path(parts_dir).expanduser()
    file = parts_dir / 'partition.json'
    if not file.is_file():
        raise fail(parts_dir, file, 'missing, so this is not a partition '
                    'directory')
    if file.stat().st_size > MAX_META_BYTES:
        raise fail(parts_dir, file, f'{file.stat().st_size} bytes, more '
                    f'than a partition.json holds ({MAX_META_BYTES})')
    try:
        meta = json.loads(file.read_text())
    except (OSError, ValueError, RecursionError) as exc:
        raise fail(parts_dir, file, f'unreadable ({exc})') from None
    _check_schema(parts_dir, file, meta)
    for name in BOOK_FILES:
        path = parts_dir / name
        if not path.is_file():
            raise fail(parts_dir, path, 'missing')
        if sha256_file(path) != meta['files'].get(name):
            raise fail(parts_dir, path, 'does not match its checksum in '
                        'partition.json (corrupted, or from another run)')
    return meta


def _node_types(parts_dir: Path, meta: Dict[str, Any]) -> List[Any]:
    r"""``[{name, num_nodes}]`` of the node types the book's rows are of:
    a homogeneous partition's one (named :obj:`None`), of the dataset's
    node count."""
    if not is_hetero_partition(meta):
        return [{'name': None, 'num_nodes': meta['dataset']['num_nodes']}]
    types = meta.get('node_types')
    if not isinstance(types, list) or not types or not all(
            isinstance(e, dict) and isinstance(e.get('name'), str) and
            isinstance(e.get('num_nodes'), int) for e in types):
        raise fail(parts_dir, parts_dir / 'partition.json',
                   "'node_types' is not a list of {name, num_nodes} (not "
                   "a heterogeneous partition?)")
    return types


def load_book(parts_dir: PathLike, meta: Optional[Dict[str, Any]] = None
              ) -> Union[PartitionBook, HeteroPartitionBook]:
    r"""The book of the partition in :obj:`parts_dir` (``partition.json``
    :obj:`meta`, read and checked when not given), checked: integer part
    boundaries per node type (a homogeneous graph is one), from 0, never
    decreasing, ending at the type's node count; never unpickling.

    Args:
        parts_dir (str or os.PathLike): the partition directory.
        meta (Dict[str, Any], optional): its ``partition.json``, if read.

    Example:
        >>> from pyg_fastload.partition import load_book
        >>> load_book('data/tiny-parts')  # doctest: +SKIP
        PartitionBook(num_parts=2, num_nodes=2,000)
    """
    parts_dir = Path(parts_dir).expanduser()
    if meta is None:
        meta = read_partition_meta(parts_dir)
    types = _node_types(parts_dir, meta)
    typed = is_hetero_partition(meta)
    file = parts_dir / 'offsets.npy'
    try:
        offsets = np.load(file, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise fail(parts_dir, file, f'unreadable ({exc})') from None
    shape = [meta['num_parts'] + 1]  # one more boundary than parts
    what = 'part boundaries'
    if typed:
        shape, what = [len(types), *shape], 'node types x part boundaries'
    if offsets.dtype.kind not in 'iu' or list(offsets.shape) != shape:
        raise fail(parts_dir, file, f'holds {offsets.dtype} of shape '
                   f'{list(offsets.shape)}, expected integers of shape '
                   f"{shape} ({what} of {meta['num_parts']} parts)")
    rows = offsets.astype(np.int64).reshape(len(types), -1)
    for row, entry in zip(rows, types):
        of = '' if entry['name'] is None else \
            f" of node type {entry['name']!r}"
        if row[0] != 0 or bool((np.diff(row) < 0).any()):
            raise fail(parts_dir, file, f'boundaries {row.tolist()[:8]}{of} '
                       f'do not start at 0 and never decrease')
        if row[-1] != entry['num_nodes']:
            raise fail(parts_dir, file, f"ends at {int(row[-1])}{of}, but "
                       f"partition.json counts {entry['num_nodes']} nodes")
    if not typed:
        return PartitionBook(torch.from_numpy(rows[0].copy()))
    return HeteroPartitionBook({e['name']: torch.from_numpy(row.copy())
                                for row, e in zip(rows, types)})


def checked_part(parts_dir: Path, meta: Dict[str, Any],
                 part: Any) -> Path:
    r"""The directory of part :obj:`part` of :obj:`parts_dir`, checked: an
    int in range, present, its ``meta.json`` the one ``partition.json``
    lists (not a part of another run)."""
    num_parts = meta['num_parts']
    if isinstance(part, bool) or not isinstance(part, int) or \
            not 0 <= part < num_parts:
        raise ValueError(f"'part' = {part!r} must be an int in [0, "
                         f"{num_parts}) for '{parts_dir}'")
    path = part_dir(parts_dir, part)
    meta_file = path / 'meta.json'
    if not meta_file.is_file():
        raise fail(parts_dir, meta_file, f'missing: part {part} is not in '
                    f'this directory')
    if sha256_file(meta_file) != meta['files'].get(
            f'{path.name}/meta.json'):
        raise fail(parts_dir, meta_file, 'does not match its checksum in '
                    'partition.json (a part of another run or dataset?)')
    return path


def concat_csc(parts: List[CSCTopology]) -> CSCTopology:
    r"""The CSCs of consecutive column ranges (parts' rows), end to end;
    edge ids are positions in the result."""
    indptrs, edges = [torch.zeros(1, dtype=torch.long)], 0
    for topo in parts:  # (a part may hold no rows)
        indptrs.append(topo.indptr[1:] + edges)
        edges += topo.num_edges
    return CSCTopology(torch.cat(indptrs),
                       torch.cat([topo.indices for topo in parts]),
                       sum(topo.num_nodes for topo in parts))


@dataclass
class Assignment:
    r"""Where a partitioning run put every node (over global original ids,
    every node type in one id space), for the part writers.

    Attributes:
        owner (np.ndarray): the part of every original id.
        new_of (torch.Tensor): the global new id of every original id.
        order (torch.Tensor): the original id of every global new id.
        offsets (np.ndarray): the book's part boundaries (``[K + 1]``; per
            node type ``[T, K + 1]``, over type-local new ids).
        num_parts (int): the number of parts.
        run (str): this run's id (in ``partition.json`` and every part).
        member (torch.Tensor, optional): PaGraph: ``[K, N]``, which nodes
            each part holds, its own and its replicas.
        expand (List[torch.Tensor], optional): PaGraph: which nodes keep
            their in-edges in each part (its message-flow rows).
    """
    owner: np.ndarray
    new_of: torch.Tensor
    order: torch.Tensor
    offsets: np.ndarray
    num_parts: int
    run: str
    member: Optional[torch.Tensor] = None
    expand: Optional[List[torch.Tensor]] = None

    def replicas(self, part: int) -> Optional[torch.Tensor]:
        r"""PaGraph: which nodes part :obj:`part` holds but does not own
        (a mask); :obj:`None` for disjoint parts."""
        if self.member is None:
            return None
        return self.member[part] & (torch.from_numpy(self.owner) != part)
