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

import json
import os
import resource
import time
import uuid
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple, Union

import numpy as np
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
from ..io.format import sha256_file
from ..io.reader import verify_files
from ..io.staging import StagedDirectory, check_target
from ..storage import CSCGraphStore, TieredFeatureStore
from .book import BOOK_FILES, PartitionBook, renumber
from .bounded import check_max_memory
from .hetero import (HeteroPartitionBook, HeteroParts, full_hetero_topology,
                     open_hetero_partition)
from .methods import METHODS, assign_parts, check_num_parts
from .pagraph import pagraph_rows
from .pagraph_link import TASK_HOPS, check_task, task_assign
from .part_format import (FEATURES, PARTITION_DIR, PARTITION_FORMAT,
                          PARTITION_VERSION, SOURCE_ID, Assignment,
                          checked_part, concat_csc, edge_chunks,
                          edge_row_chunks, fail, is_hetero_partition,
                          part_dir, read_partition_meta, row_chunks,
                          save_book, write_npy)

__all__ = ['partition_dataset', 'open_partition', 'full_topology',
           'concat_csc', 'part_dir', 'PARTITION_FORMAT',
           'is_hetero_partition', 'read_partition_meta', 'FEATURES',
           'feature_source', 'source_rows']

PathLike = Union[str, 'os.PathLike[str]']


def _check_features(features: Any, hetero: bool,
                    dataset_dir: PathLike) -> str:
    if features not in FEATURES:
        raise ValueError(f"'features' = {features!r} is not one of "
                         f"{', '.join(FEATURES)}")
    if features == 'source' and hetero:
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
) -> Union[PartitionBook, HeteroPartitionBook]:
    r"""Partitions a dataset directory (``pyg-fastload prepare``) into
    :obj:`num_parts` parts written under :obj:`out_dir`, and gives its
    book. A homogeneous graph is one node type: a heterogeneous one is
    partitioned the same way on the homogeneous view of all its node types
    (as PyG's and DistDGL's partitioners do), with typed new ids, parts
    that are heterogeneous dataset directories and a
    :class:`~pyg_fastload.partition.HeteroPartitionBook`
    (:mod:`~pyg_fastload.partition.hetero`).

    The method runs on all nodes: ``'metis'`` balances all nodes and the
    training nodes (of the labelled type), ``'bytegnn'`` grows its blocks
    around the train/val/test nodes, ``'hash'`` and ``'random'`` spread
    every node, ``'pagraph'`` streams the training nodes to parts and
    replicates their L-hop in-neighbourhoods (over every relation); for
    :obj:`task` ``'link'`` every node is owned by its METIS part, which
    replicates its (L+1)-hop in-neighbourhood
    (:mod:`~pyg_fastload.partition.pagraph_link`).

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
            is; homogeneous datasets only).
        task (str): what PaGraph's self-reliant parts serve: ``'node'``
            (the L-hop in-neighbourhoods of the training nodes) or
            ``'link'`` (every node is a label edge's possible destination,
            its part holding its (L+1)-hop in-neighbourhood: a label
            edge's source is one hop further and its L-hop tree must be in
            the part too). Disjoint parts serve either task as they are.

    Example:
        >>> from pyg_fastload.partition import partition_dataset
        >>> book = partition_dataset('data/tiny', 'data/tiny-parts', 2,
        ...                          progress=False)  # doctest: +SKIP
    """
    started = time.perf_counter()
    hetero = is_hetero_dataset_dir(Path(dataset_dir).expanduser())
    _check_features(features, hetero, dataset_dir)
    if isinstance(num_hops, bool) or not isinstance(num_hops, int) or \
            num_hops < 1:
        raise ValueError(f"'num_hops' = {num_hops!r} must be an int >= 1")
    if method not in METHODS:
        raise ValueError(f"unknown partitioning --method {method!r}: pass "
                         f"one of {', '.join(METHODS)}")
    check_task(task, method)
    budget = check_max_memory(max_memory, method)
    kind = HeteroParts(dataset_dir) if hetero else \
        _HomoParts(dataset_dir, features)
    dataset = kind.dataset
    out = Path(out_dir).expanduser()
    check_target(out, overwrite, PARTITION_DIR)  # before the work
    check_num_parts(num_parts, dataset.topology.num_nodes)
    masks = kind.masks(num_parts, method, task)
    view = kind.view()
    member = expand = None
    if method == 'pagraph':
        owner, member, level = task_assign(
            view, None if masks[0] is None else masks[0].nonzero().view(-1),
            num_parts, num_hops, task, seed, progress)
        reach = num_hops + TASK_HOPS[task]  # the hops the parts replicate
        expand = [lv < reach for lv in level]  # nodes keeping in-edges
    else:
        owner = assign_parts(view, num_parts, method, masks, num_hops, seed,
                             progress, budget)
    del view
    assigned_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    new_id, offsets = kind.renumber(owner, num_parts)
    parts = Assignment(owner, torch.from_numpy(new_id),
                       torch.from_numpy(np.argsort(new_id)), offsets,
                       num_parts, uuid.uuid4().hex, member, expand)
    with StagedDirectory(out, overwrite, PARTITION_DIR) as staged:
        tmp = staged.dir
        save_book(tmp, (owner, new_id, offsets))
        for part in tqdm(range(num_parts), desc='writing parts', unit='part',
                         disable=not progress):
            kind.write_part(part_dir(tmp, part), part, parts)
        files = {name: sha256_file(tmp / name) for name in BOOK_FILES}
        for part in range(num_parts):
            for file in kind.part_files:
                name = f'{part_dir(tmp, part).name}/{file}'
                files[name] = sha256_file(tmp / name)
        topo = dataset.topology
        meta = {
            'format': PARTITION_FORMAT, 'format_version': PARTITION_VERSION,
            **kind.marker,
            'method': method, 'num_parts': num_parts, 'num_hops': num_hops,
            'task': task, 'seed': seed, 'max_memory': budget,
            'run': parts.run, **kind.fields(),
            'dataset': {'name': dataset.name, 'num_nodes': topo.num_nodes,
                        'path': str(Path(dataset.path).resolve()),
                        'num_edges': topo.num_edges,
                        'meta_sha256': sha256_file(dataset.path /
                                                   'meta.json')},
            'files': files,
            'seconds': round(time.perf_counter() - started, 1),
            # nodes each part holds, its own and (PaGraph) its replicas
            'held_nodes': [int(member[k].sum()) if member is not None else
                           int(offsets[..., k + 1].sum() -
                               offsets[..., k].sum())
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
    return kind.book(offsets)


class _HomoParts:
    r"""What :func:`partition_dataset` reads and writes of a homogeneous
    dataset directory: its masks, its book (one range per part) and its
    parts (dataset directories in global new ids).

    Args:
        dataset_dir: the dataset directory.
        features (str): ``'copy'`` or ``'source'`` (see
            :func:`partition_dataset`).
    """
    #: What ``partition.json`` says of the kind (nothing: homogeneous).
    marker: Dict[str, str] = {}

    def __init__(self, dataset_dir: PathLike, features: str):
        self.dataset = open_dataset_dir(dataset_dir, verify='size')
        self.features = features
        #: The files of a part ``partition.json`` checksums.
        self.part_files = ('meta.json', SOURCE_ID)[:1 + (features ==
                                                         'source')]

    def masks(self, num_parts: int, method: str,
              task: str) -> List[Optional[torch.Tensor]]:
        r"""The ``(train, val, test)`` boolean masks (:obj:`None` where
        missing), refused where :obj:`method` needs one that is."""
        masks = [self.dataset.arrays.get(f'{s}_mask') for s in
                 ('train', 'val', 'test')]
        if method == 'pagraph' and task == 'node' and masks[0] is None:
            raise ValueError(f"method 'pagraph' assigns training nodes, but "
                             f"'{self.dataset.path}' has no 'train_mask' "
                             f"(for link prediction: --task link)")
        return [None if m is None else m.bool() for m in masks]

    def view(self) -> CSCTopology:
        r"""The graph the method partitions."""
        return self.dataset.topology

    def renumber(self, owner: np.ndarray,
                 num_parts: int) -> Tuple[np.ndarray, np.ndarray]:
        r"""``(new_id, offsets)`` (:func:`~pyg_fastload.partition.
        renumber`)."""
        return renumber(owner, num_parts)

    def fields(self) -> Dict[str, Any]:
        r"""What ``partition.json`` says of this kind's parts."""
        return {'features': self.features}

    def book(self, offsets: np.ndarray) -> PartitionBook:
        return PartitionBook(torch.from_numpy(offsets))

    def write_part(self, path: Path, part: int, parts: Assignment) -> None:
        r"""Part :obj:`part`: the in-neighbour lists of its nodes (in new-id
        order) in new ids, their rows of every node array, and the rows of
        every edge array of the edges the part keeps.

        A PaGraph part's replicas follow its own rows, a ``global_id``
        array gives every row's new id, replicas are never training (nor
        validation/test) nodes here, and only the message-flow rows keep
        their in-edges (every node less than L hops from the part's
        training nodes).

        With ``features='source'``, the feature matrices stay in the
        dataset and ``source_id.npy`` gives the dataset's row of each
        row."""
        dataset, topo, new_of = self.dataset, self.dataset.topology, \
            parts.new_of
        start = int(parts.offsets[part])
        nodes = parts.order[start:int(parts.offsets[part + 1])]
        rows, extra = nodes, {}
        replicas = parts.replicas(part)
        if replicas is not None:  # PaGraph: one node type
            replicas = replicas.nonzero().view(-1)
            held, more, _ = pagraph_rows(
                {None: dataset.arrays},
                {None: (nodes, replicas[torch.argsort(new_of[replicas])])},
                {None: 0}, new_of)
            rows, extra = held[None], more[None]
        begin = topo.indptr[rows]
        degree = topo.indptr[rows + 1] - begin
        if parts.expand is not None:
            degree = torch.where(parts.expand[part][rows], degree, 0)
        indptr = torch.zeros(rows.numel() + 1, dtype=torch.long)
        torch.cumsum(degree, 0, out=indptr[1:])
        # streamed to the writer in chunks, the in-neighbours in the dtype
        # it stores (int32 where it fits): no copy of the part's edges or
        # rows
        ids = new_of.to(index_dtype_for(topo.num_nodes))

        def positions() -> Iterator[torch.Tensor]:
            # where the part's edges are in the dataset's CSC order
            for at, end in edge_chunks(indptr):
                yield expand_ranges(begin[at:end], degree[at:end],
                                    int(indptr[end]) - int(indptr[at]))

        def edges() -> Iterator[torch.Tensor]:
            yield ids[:0]
            for at in positions():
                yield ids[topo.indices[at]]

        copies = self.features == 'copy'  # else the feature matrices stay
        arrays: Dict[str, Any] = {key: row_chunks(value, rows) for key, value
                                  in dataset.arrays.items()
                                  if copies or value.dim() < 2}
        arrays.update(extra)
        write_dataset_dir(
            path, num_nodes=rows.numel(), indptr=indptr, indices=edges,
            node_arrays=arrays, name=f'{dataset.name}-part{part}',
            edge_arrays={key: edge_row_chunks(value, positions)
                         for key, value in dataset.edge_arrays.items()},
            source=f"part {part} of {parts.num_parts} of '{dataset.path}'",
            num_classes=dataset.num_classes, progress=False, verify='size',
            index_space=topo.num_nodes,
            extra_meta={'partition': {
                'run': parts.run, 'part': part,
                'num_parts': parts.num_parts, 'start': start,
                'owned': nodes.numel(),
                'replicas': rows.numel() - nodes.numel()}})
        if not copies:
            write_npy(path / SOURCE_ID, rows.numpy())


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
        raise fail(parts_dir, file, f'unreadable ({exc})') from None
    num_parts = meta['num_parts']
    if offsets.dtype.kind not in 'iu' or offsets.ndim != 1:
        raise fail(parts_dir, file, f'holds {offsets.dtype} of shape '
                    f'{list(offsets.shape)}, expected {num_parts + 1} '
                    f'integers')
    if offsets.size != num_parts + 1:
        raise fail(parts_dir, file, f'holds {offsets.size} boundaries, but '
                    f"'num_parts' is {num_parts} (expected {num_parts + 1})")
    offsets = offsets.astype(np.int64)
    if offsets[0] != 0 or bool((np.diff(offsets) < 0).any()):
        raise fail(parts_dir, file, f'boundaries {offsets.tolist()[:8]} do '
                    f'not start at 0 and never decrease')
    if offsets[-1] != meta['dataset']['num_nodes']:
        raise fail(parts_dir, file, f"ends at {int(offsets[-1])}, but "
                    f"'dataset.num_nodes' is {meta['dataset']['num_nodes']}")
    return PartitionBook(torch.from_numpy(offsets))


def _check_part(parts_dir: Path, file: Path, own: Any, meta: Dict[str, Any],
                part: int, start: int, end: int, num_rows: int) -> None:
    r"""A part's own record agrees with the book: its run, its first new id
    and its row count."""
    if not isinstance(own, dict):
        raise fail(parts_dir, file, "has no 'partition' record")
    expected = {'run': meta['run'], 'part': part, 'start': start,
                'owned': end - start}
    for key, value in expected.items():
        if own.get(key) != value:
            raise fail(parts_dir, file, f"'partition.{key}' is "
                        f"{own.get(key)!r}, the book says {value!r}")
    replicas = own.get('replicas', 0)
    if own['owned'] + replicas != num_rows:
        raise fail(parts_dir, file, f"holds {num_rows} rows, not its "
                    f"{own['owned']} own and {replicas} replicas")


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
        raise fail(parts_dir, file, 'missing, or not the one partition.json '
                    'lists')
    try:
        rows = np.load(file, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise fail(parts_dir, file, f'unreadable ({exc})') from None
    if rows.dtype != np.int64 or rows.ndim != 1 or (rows.size and (
            rows.min() < 0 or rows.max() >= dataset.num_nodes)):
        raise fail(parts_dir, file, f"holds {rows.dtype} {list(rows.shape)}"
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
        return full_hetero_topology(parts_dir, meta)
    load_book(parts_dir, meta)  # checked
    return concat_csc([open_dataset_dir(part_dir(parts_dir, part),
                                        verify='none').topology
                       for part in range(meta['num_parts'])])
