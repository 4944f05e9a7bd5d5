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
from typing import Any, Dict, Optional, Tuple, Union

import numpy as np
import torch
from tqdm.auto import tqdm

from ..caching import Scores, open_dataset
from ..config import FeatureCache
from ..graph.local import local_hetero_topology, local_topology
from ..graph.hetero_topology import HeteroTopology
from ..graph.topology import CSCTopology
from ..io import (DatasetFormatError, dataset_dir_kind,
                  open_dataset_dir)
from ..io.format import sha256_file
from ..io.reader import verify_files
from ..io.staging import StagedDirectory, check_target
from ..storage import CSCGraphStore, TieredFeatureStore
from .book import BOOK_FILES, HeteroPartitionBook, PartitionBook, renumber
from .bounded import check_max_memory
from .methods import METHODS, assign_parts, check_num_parts
from .pagraph_link import TASK_HOPS, check_task, task_assign
from .part_format import (FEATURES, PARTITION_DIR, PARTITION_FORMAT,
                          PARTITION_VERSION, SOURCE_ID, Assignment,
                          checked_part, concat_csc, fail,
                          is_hetero_partition, load_book, open_part,
                          part_dir, read_partition_meta, save_book)
from .part_writers import HeteroParts, HomoParts

__all__ = ['partition_dataset', 'open_partition', 'full_topology',
           'concat_csc', 'part_dir', 'PARTITION_FORMAT',
           'is_hetero_partition', 'read_partition_meta', 'FEATURES',
           'feature_source', 'source_rows', 'load_book']

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
    (as PyG's and DistDGL's partitioners do), with typed new ids
    (:mod:`~pyg_fastload.partition.book`), parts that are heterogeneous
    dataset directories (:mod:`~pyg_fastload.partition.part_writers`) and
    a :class:`~pyg_fastload.partition.HeteroPartitionBook`.

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
    hetero = dataset_dir_kind(Path(dataset_dir).expanduser()).hetero
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
        HomoParts(dataset_dir, features)
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
    new_id, offsets = renumber(owner, num_parts, kind.node_offset)
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
    return load_book(out, meta)


def _check_part(parts_dir: Path, meta: Dict[str, Any],
                book: Union[PartitionBook, HeteroPartitionBook], part: int,
                dataset: Any) -> None:
    r"""A part's own record agrees with the book: its run, its first new id
    and its row count (per node type of a heterogeneous part, whose node
    types and relations must be the partition's)."""
    file = part_dir(parts_dir, part) / 'meta.json'
    own = dataset.meta.get('partition')
    if not isinstance(own, dict):
        raise fail(parts_dir, file, "has no 'partition' record")
    typed = is_hetero_partition(meta)
    if typed:
        ranges = {t: book.part_range(part, t) for t in book.node_types}
        start: Any = {t: lo for t, (lo, _) in ranges.items()}
        owned: Any = {t: hi - lo for t, (lo, hi) in ranges.items()}
    else:
        start, end = book.part_range(part)
        owned = end - start
    expected = {'run': meta['run'], 'part': part, 'start': start,
                'owned': owned}
    for key, value in expected.items():
        if own.get(key) != value:
            raise fail(parts_dir, file, f"'partition.{key}' is "
                       f"{own.get(key)!r}, the book says {value!r}")
    if typed:
        relations = [list(e) for e in dataset.edge_types]
        if dataset.node_types != book.node_types or \
                relations != meta.get('edge_types'):
            raise fail(parts_dir, file, f"the part's node types "
                       f"{dataset.node_types} and relations {relations} are "
                       f"not the partition's ({book.node_types}, "
                       f"{meta.get('edge_types')} in partition.json)")
        return
    replicas = own.get('replicas', 0)
    if own['owned'] + replicas != dataset.num_nodes:
        raise fail(parts_dir, file, f"holds {dataset.num_nodes} rows, not "
                   f"its {own['owned']} own and {replicas} replicas")


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
           Union[PartitionBook, HeteroPartitionBook]]:
    r"""Opens part :obj:`part` of :obj:`parts_dir` alone: its feature store
    (rows of the part's nodes, in new-id order from the part's first new
    id, then a PaGraph part's replicas; per node type of a heterogeneous
    partition), its graph store (the part's in-neighbour lists, in new
    ids; of a heterogeneous partition, every relation's in-edges into its
    rows, source ids typed new ids of the whole graph) and the partition
    book (:class:`~pyg_fastload.partition.HeteroPartitionBook` of a
    heterogeneous partition).

    With :obj:`local`, the graph store is in the part's own row ids
    instead (neighbours the part does not store are dropped: none for the
    message-flow rows of a PaGraph part, so sampling from its training
    nodes is exact), and the feature store has a ``global_id`` attribute
    (every row's new id), so batches carry it. The dataset's edge arrays
    (one row per edge of the part) are in the graph store of the part's
    own edges (not :obj:`local`: a local one may have dropped some). A
    heterogeneous PaGraph part is stored in its own row ids and opens with
    :obj:`local` only; other heterogeneous parts without it.

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

    Example:
        >>> from pyg_fastload.partition import open_partition
        >>> features, graph, book = open_partition(
        ...     'data/tiny-parts', part=1)  # doctest: +SKIP
    """
    parts_dir = Path(parts_dir).expanduser()
    meta = read_partition_meta(parts_dir)
    typed, pagraph = is_hetero_partition(meta), meta['method'] == 'pagraph'
    if typed and local != pagraph:
        raise ValueError(
            f"'{parts_dir}': PaGraph's heterogeneous parts are stored in "
            f"their own row ids and open with local=True only; other "
            f"methods' parts keep the whole graph's ids (local=False)")
    path = checked_part(parts_dir, meta, part)
    book = load_book(parts_dir, meta)
    dataset = open_part(meta, path)
    _check_part(parts_dir, meta, book, part, dataset)
    caching = cache is not None and cache.enabled
    if typed:
        # The caches rank the part's rows on its own edges.
        ranked = local_hetero_topology(dataset.topology, {
            t: book.part_range(part, t) for t in book.node_types}) \
            if caching and not pagraph else None
        feature_store, _ = open_dataset(path, cache, device=device,
                                        verify=verify, scores=scores,
                                        topology=ranked)
        # the part's edges as stored, with their rows of the edge arrays
        return feature_store, CSCGraphStore(dataset.topology,
                                            dataset.edge_arrays), book
    start, end = book.part_range(part)
    rows = dataset.arrays['global_id'].clone() if 'global_id' in \
        dataset.arrays else torch.arange(start, end)
    topology = None
    if local or caching:
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
    partition; a relation's edge ids are then positions among its edges of
    every part, as DSP's collective samplers number them). Checks the book
    like :func:`open_partition`.

    Args:
        parts_dir (str or Path): the partition directory.
    """
    parts_dir = Path(parts_dir).expanduser()
    meta = read_partition_meta(parts_dir)
    if meta['method'] == 'pagraph':
        raise ValueError(f"'{parts_dir}': PaGraph's parts overlap and keep "
                         f"only message-flow edges; the whole graph is not "
                         f"in them")
    book = load_book(parts_dir, meta)
    parts = [open_part(meta, part_dir(parts_dir, part)).topology
             for part in range(book.num_parts)]
    if not is_hetero_partition(meta):
        return concat_csc(parts)
    return HeteroTopology.from_csc(book.num_nodes, {
        tuple(edge_type): concat_csc([topo.relation_topology(tuple(
            edge_type)) for topo in parts])
        for edge_type in meta['edge_types']})
