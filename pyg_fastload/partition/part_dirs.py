r"""Writing a partitioned dataset and opening one of its parts.

``PARTS_DIR`` holds the partition book (``owner.npy``, ``new_id.npy``,
``offsets.npy``), ``partition.json`` (format version, method, number of
parts and hops, the source dataset's identity, this run's id and a SHA-256
per file) and one directory per part, ``part-K``, in the dataset directory
format: the in-neighbour lists of the part's nodes (CSC, in new global ids,
so a sampler sees which neighbours are remote) and the part's rows of every
node array (features, labels, masks). A machine needs only its part and
the book.

With ``features='source'`` (``--features source``) the parts keep no copy
of the feature matrices (the node arrays of two or more dimensions): each
part has a ``source_id.npy`` instead (the dataset's row of each of its
rows, ``int64``, checksummed in ``partition.json``), and a rank reads its rows from the partitioned dataset's files,
which must then stay where ``partition.json`` says (one machine, or a file
system every machine sees). The parts of a graph whose features fill the
disk take only its topology, labels and masks.
"""
from __future__ import annotations

import itertools
import json
import os
import resource
import time
import uuid
from pathlib import Path
from typing import (TYPE_CHECKING, Any, Callable, Dict, Iterator, List,
                    Optional, Tuple, Union)

import numpy as np
import numpy.lib.format as npy
import torch
from tqdm.auto import tqdm

from ..caching import Scores, open_dataset
from ..config import FeatureCache
from ..graph.local import local_topology
from ..graph.hetero_topology import HeteroTopology
from ..graph.topology import CSCTopology, index_dtype_for
from ..graph.ranges import expand_ranges
from ..io import (DatasetFormatError, is_hetero_dataset_dir,
                  open_dataset_dir, write_dataset_dir)
from ..io.format import is_sha256, sha256_file
from ..io.reader import MAX_META_BYTES, verify_files
from ..io.staging import DirectoryFormat, StagedDirectory, check_target
from ..storage import CSCGraphStore, TieredFeatureStore
from .book import BOOK_FILES, PartitionBook, renumber
from .bounded import check_max_memory
from .methods import METHODS, assign_parts, check_num_parts as _check_parts
from .pagraph_link import TASK_HOPS, check_task, task_assign

if TYPE_CHECKING:  # pragma: no cover
    from .hetero import HeteroPartitionBook

__all__ = ['partition_dataset', 'open_partition', 'full_topology', 'concat_csc',
           'part_dir', 'PARTITION_FORMAT', 'is_hetero_partition', 'save_book',
           'edge_chunks', 'row_chunks', 'FEATURES', 'feature_source',
           'source_rows']

#: The value of ``partition.json``'s ``"format"`` key, and its version.
PARTITION_FORMAT = 'pyg-fastload-partition'
PARTITION_VERSION = 1

PathLike = Union[str, 'os.PathLike[str]']


def is_hetero_partition(meta: Dict[str, Any]) -> bool:
    r"""Whether ``partition.json`` :obj:`meta` is of a heterogeneous
    dataset's partition (typed new ids, typed parts)."""
    return meta.get('kind') == 'hetero'


def part_dir(parts_dir: Path, part: int) -> Path:
    r"""The directory of part :obj:`part` of :obj:`parts_dir`."""
    return parts_dir / f'part-{part}'


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


def _check_features(features: Any, dataset_dir: PathLike) -> str:
    if features not in FEATURES:
        raise ValueError(f"'features' = {features!r} is not one of "
                         f"{', '.join(FEATURES)}")
    if features == 'source' and is_hetero_dataset_dir(
            Path(dataset_dir).expanduser()):
        raise ValueError(f"features='source' (--features source) is for "
                         f"homogeneous datasets; the parts of the "
                         f"heterogeneous '{dataset_dir}' copy their rows: "
                         f"leave it out")
    return features


def partition_dataset(
    dataset_dir: PathLike,
    out_dir: PathLike,
    num_parts: int,
    method: str = 'metis',
    num_hops: int = 2,
    seed: int = 0,
    overwrite: bool = False,
    progress: bool = True,
    max_memory: Union[None, int, str] = None,
    features: str = 'copy',
    task: str = 'node',
) -> Union[PartitionBook, 'HeteroPartitionBook']:
    r"""Partitions a dataset directory (``pyg-fastload prepare``) into
    :obj:`num_parts` parts written under :obj:`out_dir`. A heterogeneous
    one is partitioned by
    :func:`~pyg_fastload.partition.hetero.partition_hetero_dataset` (typed
    new ids, parts that are heterogeneous dataset directories) and gives a
    :class:`~pyg_fastload.partition.HeteroPartitionBook`.

    The whole directory is written beside :obj:`out_dir` and put in place
    atomically once complete (as datasets are), so a killed run leaves
    nothing that opens, and the next run cleans up after it.

    Args:
        dataset_dir: the dataset directory.
        out_dir: the partition directory to create.
        num_parts (int): number of parts, in ``[1, num_nodes]``.
        method (str): ``'metis'``, ``'pagraph'``, ``'bytegnn'``, ``'hash'``
            or ``'random'``.
        num_hops (int): the sampling depth the parts are meant for.
        seed (int): seed of the method.
        overwrite (bool): replace an existing partition directory (what
            its ``partition.json`` lists; other files there are kept).
        progress (bool): show progress bars.
        max_memory (int or str, optional): ``'metis'``'s budget in bytes
            (or ``'2GiB'``, ``'500MB'``; see
            :func:`~pyg_fastload.partition.assign_parts`), recorded in
            ``partition.json``; :obj:`None`: no bound.
        features (str): ``'copy'`` the feature matrices' rows into the
            parts, or leave them in the dataset (``'source'``: a
            ``source_id`` array per part; the dataset must stay where it
            is).
        task (str): what PaGraph's self-reliant parts serve: ``'node'``
            (the L-hop in-neighbourhoods of the training nodes) or
            ``'link'`` (every node is a label edge's possible destination,
            its part holding its (L+1)-hop in-neighbourhood: a label
            edge's source is one hop further and its L-hop tree must be in
            the part too). Disjoint parts serve either task as they are.
    """
    _check_features(features, dataset_dir)
    hetero = is_hetero_dataset_dir(Path(dataset_dir).expanduser())
    check_task(task, method)
    if hetero:
        from .hetero import partition_hetero_dataset
        return partition_hetero_dataset(dataset_dir, out_dir, num_parts,
                                        method, num_hops, seed, overwrite,
                                        progress, max_memory, task)
    started = time.perf_counter()
    budget = check_max_memory(max_memory, method)
    if isinstance(num_hops, bool) or not isinstance(num_hops, int) or \
            num_hops < 1:
        raise ValueError(f"'num_hops' = {num_hops!r} must be an int >= 1")
    dataset = open_dataset_dir(dataset_dir, verify='size')
    out = Path(out_dir).expanduser()
    check_target(out, overwrite, PARTITION_DIR)  # before the work
    topo = dataset.topology
    train = dataset.arrays.get('train_mask')
    member: Optional[torch.Tensor] = None
    reach = num_hops + TASK_HOPS[task]  # the hops the parts replicate
    if method == 'pagraph':
        if train is None and task == 'node':
            raise ValueError(f"method 'pagraph' assigns training nodes, but "
                             f"'{dataset.path}' has no 'train_mask' (for "
                             f"link prediction: --task link)")
        _check_parts(num_parts, topo.num_nodes)
        owner, member, level = task_assign(
            topo, None if train is None else train.bool().nonzero().view(-1),
            num_parts, num_hops, task, seed, progress)
    else:
        masks = [dataset.arrays.get(f'{s}_mask') for s in
                 ('train', 'val', 'test')]
        owner = assign_parts(topo, num_parts, method,
                             [None if m is None else m.bool() for m in masks],
                             num_hops, seed, progress, budget)
    assigned_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    new_id, offsets = renumber(owner, num_parts)
    order = np.argsort(new_id)  # original id of every new id
    run = uuid.uuid4().hex
    with StagedDirectory(out, overwrite, PARTITION_DIR) as staged:
        tmp = staged.dir
        save_book(tmp, (owner, new_id, offsets))
        new_of = torch.from_numpy(new_id)
        parts = tqdm(range(num_parts), desc='writing parts', unit='part',
                     disable=not progress)
        for part in parts:
            nodes = torch.from_numpy(order[offsets[part]:offsets[part + 1]])
            halo = None
            if member is not None:  # PaGraph: replicas and pruned edges
                owned = torch.from_numpy(owner) == part
                halo = (member[part] & ~owned).nonzero().view(-1)
                halo = halo[torch.argsort(new_of[halo])]
                halo = (halo, level[part] < reach)
            _write_part(part_dir(tmp, part), dataset, topo, nodes, new_of,
                        part, num_parts, int(offsets[part]), run, halo,
                        features)
        files = {name: sha256_file(tmp / name) for name in BOOK_FILES}
        for part in range(num_parts):
            for file in ('meta.json', SOURCE_ID)[:1 + (features == 'source')]:
                name = f'{part_dir(tmp, part).name}/{file}'
                files[name] = sha256_file(tmp / name)
        meta = {
            'format': PARTITION_FORMAT, 'format_version': PARTITION_VERSION,
            'method': method, 'num_parts': num_parts, 'num_hops': num_hops,
            'task': task, 'seed': seed, 'max_memory': budget, 'run': run,
            'features': features,
            'dataset': {'name': dataset.name, 'num_nodes': topo.num_nodes,
                        'path': str(Path(dataset.path).resolve()),
                        'num_edges': topo.num_edges,
                        'meta_sha256': sha256_file(dataset.path /
                                                   'meta.json')},
            'files': files,
            'seconds': round(time.perf_counter() - started, 1),
            # nodes each part holds, its own and (PaGraph) its replicas
            'held_nodes': [int(member[k].sum()) if member is not None
                           else int(offsets[k + 1] - offsets[k])
                           for k in range(num_parts)],
            # the process's peak resident memory so far (Linux: KiB)
            'peak_rss_bytes': resource.getrusage(
                resource.RUSAGE_SELF).ru_maxrss * 1024,
            # ... and before the parts were written: the assignment's
            'assign_peak_rss_bytes': assigned_rss * 1024,
        }
        with open(tmp / 'partition.json', 'w') as f:
            json.dump(meta, f, indent=2)
            f.write('\n')
        staged.put_in_place()
    return PartitionBook(torch.from_numpy(offsets))


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


def _write_part(path: Path, dataset: Any, topo: Any, nodes: torch.Tensor,
                new_of: torch.Tensor, part: int, num_parts: int, start: int,
                run: str, halo: Optional[Tuple[torch.Tensor, torch.Tensor]],
                features: str = 'copy') -> None:
    r"""Part :obj:`part`: the in-neighbour lists of :obj:`nodes` (original
    ids, in new-id order) in new ids, their rows of every node array, and
    the rows of every edge array of the edges the part keeps.

    With :obj:`halo` = ``(replicas, expand)`` (PaGraph), the replicas'
    rows follow the part's own, a ``global_id`` array gives every row's new
    id, replicas are never training (nor validation/test) nodes here, and
    only rows with ``expand`` keep their in-edges (the message-flow edges:
    every node less than L hops from the part's training nodes).

    With :obj:`features` ``'source'``, the feature matrices stay in the
    dataset and ``source_id.npy`` gives the dataset's row of each row."""
    rows, extra = nodes, {}
    if halo is not None:
        replicas, expand = halo
        rows = torch.cat([nodes, replicas])
        extra['global_id'] = new_of[rows]
    begin = topo.indptr[rows]
    degree = topo.indptr[rows + 1] - begin
    if halo is not None:
        degree = torch.where(expand[rows], degree, 0)
    indptr = torch.zeros(rows.numel() + 1, dtype=torch.long)
    torch.cumsum(degree, 0, out=indptr[1:])
    # streamed to the writer in chunks, the in-neighbours in the dtype it
    # stores (int32 where it fits): no copy of the part's edges or rows
    ids = new_of.to(index_dtype_for(topo.num_nodes))

    def positions() -> Iterator[torch.Tensor]:
        # where the part's edges are in the dataset's CSC order, by chunk
        for at, end in edge_chunks(indptr):
            yield expand_ranges(begin[at:end], degree[at:end],
                                int(indptr[end]) - int(indptr[at]))

    def edges() -> Iterator[torch.Tensor]:
        yield ids[:0]
        for at in positions():
            yield ids[topo.indices[at]]

    copies = features == 'copy'  # else the feature matrices stay
    arrays: Dict[str, Any] = {key: row_chunks(value, rows) for key, value in
                              dataset.arrays.items()
                              if copies or value.dim() < 2}
    if halo is not None:
        for key in ('train_mask', 'val_mask', 'test_mask'):
            if key in arrays:
                arrays[key] = dataset.arrays[key][rows]
                arrays[key][nodes.numel():] = False
    arrays.update(extra)
    write_dataset_dir(
        path, num_nodes=rows.numel(), indptr=indptr, indices=edges,
        node_arrays=arrays, name=f'{dataset.name}-part{part}',
        edge_arrays={key: edge_row_chunks(value, positions)
                     for key, value in dataset.edge_arrays.items()},
        source=f"part {part} of {num_parts} of '{dataset.path}'",
        num_classes=dataset.num_classes, progress=False, verify='size',
        index_space=topo.num_nodes,
        extra_meta={'partition': {'run': run, 'part': part,
                                  'num_parts': num_parts, 'start': start,
                                  'owned': nodes.numel(),
                                  'replicas': rows.numel() - nodes.numel()}})
    if not copies:
        write_npy(path / SOURCE_ID, rows.numpy())


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


def _fail(parts_dir: Path, file: Path, what: str) -> DatasetFormatError:
    return DatasetFormatError(
        f'{file}: {what}; re-create the partition with `pyg-fastload '
        f'partition DATASET_DIR --num-parts K --out {parts_dir} '
        f'--overwrite`')


def _check_schema(parts_dir: Path, file: Path, meta: Any) -> None:
    r"""``partition.json``'s fields and their types."""
    if not isinstance(meta, dict) or meta.get('format') != PARTITION_FORMAT:
        raise _fail(parts_dir, file, f"'format' is not '{PARTITION_FORMAT}'")
    if meta.get('format_version') != PARTITION_VERSION:
        raise _fail(parts_dir, file, f"format_version "
                    f"{meta.get('format_version')!r}, this pyg-fastload "
                    f"reads {PARTITION_VERSION}")
    for key, kind in (('method', str), ('num_parts', int), ('run', str),
                      ('files', dict), ('dataset', dict)):
        value = meta.get(key)
        if not isinstance(value, kind) or isinstance(value, bool):
            found = type(value).__name__ if key in meta else 'missing'
            raise _fail(parts_dir, file, f"'{key}' is {found}, expected "
                        f"{kind.__name__}")
    if meta['method'] not in METHODS:
        raise _fail(parts_dir, file, f"'method' {meta['method']!r} is not one "
                    f"of {', '.join(METHODS)}")
    if meta.get('features', 'copy') not in FEATURES:
        raise _fail(parts_dir, file, f"'features' {meta['features']!r} is "
                    f"not one of {', '.join(FEATURES)}")
    if not 1 <= meta['num_parts'] <= MAX_PARTS:
        raise _fail(parts_dir, file, f"'num_parts' {meta['num_parts']} is "
                    f"outside [1, {MAX_PARTS}]")
    for name, digest in meta['files'].items():
        if not is_sha256(digest):
            raise _fail(parts_dir, file, f"'files' maps {name!r} to "
                        f"{digest!r}, not a SHA-256")
    num_nodes = meta['dataset'].get('num_nodes')
    if not isinstance(num_nodes, int) or isinstance(num_nodes, bool) or \
            num_nodes < 0:
        raise _fail(parts_dir, file, f"'dataset.num_nodes' is {num_nodes!r}, "
                    f"expected an int >= 0")


def read_partition_meta(parts_dir: PathLike) -> Dict[str, Any]:
    r"""``partition.json`` of :obj:`parts_dir`, checked, and the book's
    files checked against their checksums."""
    parts_dir = Path(parts_dir).expanduser()
    file = parts_dir / 'partition.json'
    if not file.is_file():
        raise _fail(parts_dir, file, 'missing, so this is not a partition '
                    'directory')
    if file.stat().st_size > MAX_META_BYTES:
        raise _fail(parts_dir, file, f'{file.stat().st_size} bytes, more '
                    f'than a partition.json holds ({MAX_META_BYTES})')
    try:
        meta = json.loads(file.read_text())
    except (OSError, ValueError, RecursionError) as exc:
        raise _fail(parts_dir, file, f'unreadable ({exc})') from None
    _check_schema(parts_dir, file, meta)
    for name in BOOK_FILES:
        path = parts_dir / name
        if not path.is_file():
            raise _fail(parts_dir, path, 'missing')
        if sha256_file(path) != meta['files'].get(name):
            raise _fail(parts_dir, path, 'does not match its checksum in '
                        'partition.json (corrupted, or from another run)')
    return meta


def load_book(parts_dir: Path, meta: Dict[str, Any]) -> PartitionBook:
    r"""The partition book, checked against ``partition.json``: integer
    boundaries, one more than the parts, from 0, never decreasing, ending
    at the dataset's node count."""
    if is_hetero_partition(meta):
        raise ValueError(f"'{parts_dir}' partitions a heterogeneous dataset: "
                         f"open it with pyg_fastload.partition."
                         f"open_hetero_partition (its book is typed)")
    file = parts_dir / 'offsets.npy'
    try:
        offsets = np.load(file, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise _fail(parts_dir, file, f'unreadable ({exc})') from None
    num_parts = meta['num_parts']
    if offsets.dtype.kind not in 'iu' or offsets.ndim != 1:
        raise _fail(parts_dir, file, f'holds {offsets.dtype} of shape '
                    f'{list(offsets.shape)}, expected {num_parts + 1} '
                    f'integers')
    if offsets.size != num_parts + 1:
        raise _fail(parts_dir, file, f'holds {offsets.size} boundaries, but '
                    f"'num_parts' is {num_parts} (expected {num_parts + 1})")
    offsets = offsets.astype(np.int64)
    if offsets[0] != 0 or bool((np.diff(offsets) < 0).any()):
        raise _fail(parts_dir, file, f'boundaries {offsets.tolist()[:8]} do '
                    f'not start at 0 and never decrease')
    if offsets[-1] != meta['dataset']['num_nodes']:
        raise _fail(parts_dir, file, f"ends at {int(offsets[-1])}, but "
                    f"'dataset.num_nodes' is {meta['dataset']['num_nodes']}")
    return PartitionBook(torch.from_numpy(offsets))


def _check_part(parts_dir: Path, file: Path, own: Any, meta: Dict[str, Any],
                part: int, start: int, end: int, num_rows: int) -> None:
    r"""A part's own record agrees with the book: its run, its first new id
    and its row count."""
    if not isinstance(own, dict):
        raise _fail(parts_dir, file, "has no 'partition' record")
    expected = {'run': meta['run'], 'part': part, 'start': start,
                'owned': end - start}
    for key, value in expected.items():
        if own.get(key) != value:
            raise _fail(parts_dir, file, f"'partition.{key}' is "
                        f"{own.get(key)!r}, the book says {value!r}")
    replicas = own.get('replicas', 0)
    if own['owned'] + replicas != num_rows:
        raise _fail(parts_dir, file, f"holds {num_rows} rows, not its "
                    f"{own['owned']} own and {replicas} replicas")


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
        raise _fail(parts_dir, meta_file, f'missing: part {part} is not in '
                    f'this directory')
    if sha256_file(meta_file) != meta['files'].get(
            f'{path.name}/meta.json'):
        raise _fail(parts_dir, meta_file, 'does not match its checksum in '
                    'partition.json (a part of another run or dataset?)')
    return path


def feature_source(meta: Dict[str, Any]) -> Optional[Path]:
    r"""The dataset directory whose files the parts of a partition
    (``partition.json`` :obj:`meta`) read their feature rows from: the
    partitioned one with ``features='source'``; :obj:`None` where the
    parts hold their rows."""
    if meta.get('features', 'copy') != 'source':
        return None
    return Path(str(meta['dataset'].get('path')))


def source_rows(parts_dir: Path, meta: Dict[str, Any], part: int,
                verify: str = 'size') -> Optional[Tuple[Any, torch.Tensor]]:
    r"""Where part :obj:`part` of a ``features='source'`` partition reads
    its feature rows: the partitioned dataset (opened, and checked to be
    the one partitioned) and the part's rows of it (its ``source_id.npy``,
    checked against ``partition.json``); :obj:`None` for a partition whose
    parts hold their rows. The dataset's topology is not read; its feature
    files are checked by size when mapped and, with :obj:`verify`
    ``'checksum'``, by their SHA-256 first."""
    where = feature_source(meta)
    if where is None:
        return None
    fix = (f"the parts of '{parts_dir}' read their feature rows from the "
           f"dataset they were partitioned from: put it back at '{where}', "
           f"or partition again (pyg-fastload partition DATASET_DIR --out "
           f"{parts_dir} --overwrite)")
    meta_file = where / 'meta.json'
    if not meta_file.is_file():
        raise DatasetFormatError(f"'{where}': no dataset there; {fix}")
    if sha256_file(meta_file) != meta['dataset'].get('meta_sha256'):
        raise DatasetFormatError(f"'{where}' is not the dataset that was "
                                 f"partitioned (prepared again?); {fix}")
    dataset = open_dataset_dir(where, verify='none')
    if verify == 'checksum':  # the feature matrices the parts read
        specs = dataset.meta['arrays']
        verify_files(where, {key: specs[key] for key, array in
                             dataset.arrays.items() if array.dim() >= 2},
                     verify, False, fix)
    name = f'{part_dir(parts_dir, part).name}/{SOURCE_ID}'
    file = parts_dir / name
    if not file.is_file() or sha256_file(file) != meta['files'].get(name):
        raise _fail(parts_dir, file, 'missing, or not the one partition.json '
                    'lists')
    try:
        rows = np.load(file, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise _fail(parts_dir, file, f'unreadable ({exc})') from None
    if rows.dtype != np.int64 or rows.ndim != 1 or (rows.size and (
            rows.min() < 0 or rows.max() >= dataset.num_nodes)):
        raise _fail(parts_dir, file, f"holds {rows.dtype} {list(rows.shape)}"
                    f", not int64 rows of '{where}' (of its "
                    f"{dataset.num_nodes} nodes)")
    return dataset, torch.from_numpy(rows)


def open_partition(
    parts_dir: PathLike,
    part: int,
    cache: Optional[FeatureCache] = None,
    *,
    device: Optional[Union[str, torch.device]] = None,
    verify: str = 'size',
    local: bool = False,
    scores: Optional[Scores] = None,
) -> Tuple[TieredFeatureStore, CSCGraphStore,
           Union[PartitionBook, 'HeteroPartitionBook']]:
    r"""Opens part :obj:`part` of :obj:`parts_dir` alone: its feature store
    (rows of the part's nodes, in new-id order from the part's first new
    id, then a PaGraph part's replicas), its graph store (the part's
    in-neighbour lists, in new ids) and the partition book (of a
    heterogeneous partition: :func:`~pyg_fastload.partition.hetero.
    open_hetero_partition`'s typed stores and book).

    With :obj:`local`, the graph store is in the part's own row ids
    instead (neighbours the part does not store are dropped: none for the
    message-flow rows of a PaGraph part, so sampling from its training
    nodes is exact), and the feature store has a ``global_id`` attribute
    (every row's new id), so batches carry it. The dataset's edge arrays
    (one row per edge of the part) are in the graph store of the part's
    own edges (not :obj:`local`: a local one may have dropped some).

    Args:
        parts_dir: a directory written by :func:`partition_dataset`.
        part (int): which part, in ``[0, num_parts)``.
        cache (FeatureCache, optional): caches in front of the part's
            features (see :func:`~pyg_fastload.open_dataset`).
        device: where the device cache lives.
        verify (str): how the part's files are checked.
        local (bool): relabel the topology to the part's rows.
        scores (Scores, optional): what ranks the part's rows for the
            caches (see :func:`~pyg_fastload.open_dataset`), on its own
            edges.
    """
    parts_dir = Path(parts_dir).expanduser()
    meta = read_partition_meta(parts_dir)
    if is_hetero_partition(meta):
        from .hetero import open_hetero_partition
        return open_hetero_partition(parts_dir, part, cache, device=device,
                                     verify=verify, scores=scores,
                                     local=local)
    path = checked_part(parts_dir, meta, part)
    meta_file = path / 'meta.json'
    book = load_book(parts_dir, meta)
    dataset = open_dataset_dir(path, verify='none')
    start, end = book.part_range(part)
    _check_part(parts_dir, meta_file, dataset.meta.get('partition'), meta,
                part, start, end, dataset.num_nodes)
    rows = dataset.arrays['global_id'].clone() if 'global_id' in \
        dataset.arrays else torch.arange(start, end)
    topology = None
    if local or (cache is not None and cache.enabled):
        # The caches rank the part's rows on its own edges.
        topology, _ = local_topology(dataset.topology, rows, book.num_nodes)
    feature_store, graph_store = open_dataset(
        path, cache, device=device, verify=verify, scores=scores,
        topology=dataset.topology if topology is None else topology,
        rows_from=source_rows(parts_dir, meta, part, verify))
    if not local:  # the part's edges, with their edge arrays
        graph_store = CSCGraphStore(dataset.topology, dataset.edge_arrays)
    elif 'global_id' not in {
            a.attr_name for a in feature_store.get_all_tensor_attrs()}:
        feature_store.put_tensor(rows, group_name=None, attr_name='global_id',
                                 index=None)
    return feature_store, graph_store, book


def full_topology(parts_dir: PathLike) -> Union[CSCTopology,
                                                HeteroTopology]:
    r"""The whole graph in new ids, from the parts of a disjoint partition
    (their rows are consecutive new ids): every part's in-neighbour lists,
    end to end (relation by relation, in typed new ids, on a heterogeneous
    partition). Checks the book like :func:`open_partition`."""
    parts_dir = Path(parts_dir).expanduser()
    meta = read_partition_meta(parts_dir)
    if meta['method'] == 'pagraph':
        raise ValueError(f"'{parts_dir}': PaGraph's parts overlap and keep "
                         f"only message-flow edges; the whole graph is not "
                         f"in them")
    if is_hetero_partition(meta):
        from .hetero import full_hetero_topology
        return full_hetero_topology(parts_dir, meta)
    load_book(parts_dir, meta)  # checked
    return concat_csc([open_dataset_dir(part_dir(parts_dir, part),
                                        verify='none').topology
                       for part in range(meta['num_parts'])])


def concat_csc(parts: List[CSCTopology]) -> CSCTopology:
    r"""The CSCs of consecutive column ranges (parts' rows), end to end;
    edge ids are positions in the result."""
    indptrs = [torch.zeros(1, dtype=torch.long)]
    for topo in parts:
        indptrs.append(topo.indptr[1:] + indptrs[-1][-1])
    return CSCTopology(torch.cat(indptrs),
                       torch.cat([topo.indices for topo in parts]),
                       sum(topo.num_nodes for topo in parts))
