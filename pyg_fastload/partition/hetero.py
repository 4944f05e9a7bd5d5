r"""Partitioning heterogeneous dataset directories: the methods run on the
homogeneous view (every node type in one id space, every relation's edges,
as PyG's and DistDGL's partitioners do), and the new ids keep the types
apart: within each part, each node type's nodes get one contiguous range.

New ids are *typed*: node ``i`` of type ``t`` gets the type-local new id
``new_local`` (a permutation of ``[0, N_t)``) and the global new id
``node_offset[t] + new_local``, so type ``t`` still occupies the global
range it had (:class:`~pyg_fastload.graph.HeteroTopology`'s layout) and,
within it, part ``k`` owns ``[offsets[t, k], offsets[t, k + 1])``. The
owner of a node is a range check per type (:class:`HeteroPartitionBook`,
one :class:`~pyg_fastload.partition.PartitionBook` per node type), or one
binary search over the ``T * K + 1`` boundaries of every (type, part)
range for a global id.

``PARTS_DIR`` holds, as a homogeneous partition does, ``owner.npy`` (the
part of every original global id), ``new_id.npy`` (the global new id of
every original global id), ``offsets.npy`` (``[T, K + 1]``: row ``t`` the
part boundaries of type ``t``'s new ids), ``partition.json`` (with
``"kind": "hetero"``, the node and edge types and the target) and one
heterogeneous dataset directory per part, ``part-K``: the part's nodes of
every type (their rows of every node array, in new-id order) and the
in-edges of every relation into them (CSC over the part's rows of the
destination type; source ids are global new ids of the whole graph,
recorded as its ``index_space``, so a sampler sees which are remote), with
the rows of every relation's edge arrays of the edges it keeps.
PaGraph's parts (``--method pagraph``) overlap and are written in their own
row ids instead (:func:`~pyg_fastload.partition.pagraph.pagraph_rows`).

:func:`~pyg_fastload.partition.partition_dataset` partitions both kinds;
:class:`HeteroParts` is what it reads and writes of this one.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import (Any, Callable, Dict, Iterator, List, Optional, Tuple,
                    Union)

import numpy as np
import torch
from torch import Tensor

from ..graph.hetero_topology import HeteroTopology, offsets_of
from ..graph.local import local_hetero_topology
from ..graph.ranges import expand_ranges
from ..graph.topology import CSCTopology
from ..caching import Scores, open_dataset
from ..config import FeatureCache
from ..io import open_dataset_dir, write_dataset_dir
from ..storage import CSCGraphStore
from .book import PartitionBook, renumber
from .pagraph import pagraph_rows
from .part_format import (Assignment, checked_part, concat_csc, edge_chunks,
                          edge_row_chunks, fail, is_hetero_partition,
                          part_dir, read_partition_meta, row_chunks)

__all__ = ['HeteroPartitionBook', 'renumber_hetero', 'HeteroParts',
           'open_hetero_partition', 'load_hetero_book',
           'full_hetero_topology']

PathLike = Union[str, 'os.PathLike[str]']


class HeteroPartitionBook:
    r"""Who owns which node of each type, in typed new ids: one
    :class:`PartitionBook` per node type (its parts' ranges of the type's
    new ids), and one over the ``(type, part)`` ranges of the global new
    ids, so either kind of id is one binary search.

    Args:
        offsets (Dict[str, torch.Tensor]): per node type (in the global id
            order of the types), the ``num_parts + 1`` boundaries of its
            parts' ranges of type-local new ids.
    """
    def __init__(self, offsets: Dict[str, Tensor]):
        if not offsets:
            raise ValueError("'offsets' needs at least one node type")
        self.books = {t: PartitionBook(o) for t, o in offsets.items()}
        parts = {book.num_parts for book in self.books.values()}
        if len(parts) != 1:
            raise ValueError(f'the node types have different part counts '
                             f'({sorted(parts)}); one partition has one')
        #: Where each type's global ids start (``T + 1`` entries).
        self.node_offset = offsets_of([b.num_nodes for b in
                                       self.books.values()])
        starts = [self.node_offset[i] + book.offsets[:-1]
                  for i, book in enumerate(self.books.values())]
        #: The ``(type, part)`` ranges of global new ids, type-major:
        #: range ``t * num_parts + k``.
        self.slots = PartitionBook(torch.cat(starts + [self.node_offset[-1:]]))

    @property
    def node_types(self) -> List[str]:
        return list(self.books)

    @property
    def num_parts(self) -> int:
        return next(iter(self.books.values())).num_parts

    @property
    def num_nodes(self) -> Dict[str, int]:
        r"""Node count per type."""
        return {t: b.num_nodes for t, b in self.books.items()}

    @property
    def num_ids(self) -> int:
        r"""The global new ids there are (nodes of all types)."""
        return int(self.node_offset[-1])

    @property
    def offsets(self) -> Tensor:
        r"""``[T, num_parts + 1]``: row ``t`` the part boundaries of type
        ``t``'s new ids (``offsets.npy``)."""
        return torch.stack([b.offsets for b in self.books.values()])

    def __getitem__(self, node_type: str) -> PartitionBook:
        r"""The book of :obj:`node_type`'s (type-local) new ids."""
        if node_type not in self.books:
            raise KeyError(f'{node_type!r} is not a node type of this '
                           f"partition ({', '.join(self.books)})")
        return self.books[node_type]

    def of_group(self, group_name: Optional[str]) -> PartitionBook:
        r"""The book of a feature store group's ids: the ranges of node
        type :obj:`group_name`'s type-local new ids."""
        if group_name is None:
            raise ValueError(f'this partition is heterogeneous: name a node '
                             f"type ({', '.join(self.books)})")
        return self[group_name]

    def owner(self, ids: Tensor, node_type: Optional[str] = None) -> Tensor:
        r"""The part owning each id: type-local new ids of
        :obj:`node_type`, or global new ids when it is :obj:`None`."""
        if node_type is not None:
            return self[node_type].owner(ids)
        return self.slots.owner(ids) % self.num_parts

    def node_type_of(self, ids: Tensor) -> Tensor:
        r"""The type (index into :attr:`node_types`) of each global new
        id."""
        return torch.bucketize(ids, self.node_offset[1:], right=True)

    def local(self, ids: Tensor, node_type: Optional[str] = None) -> Tensor:
        r"""Each id's row in its owner's range of its type (the row of the
        part's arrays of that type)."""
        if node_type is not None:
            return self[node_type].local(ids)
        return ids - self.slots.offsets[self.slots.owner(ids)]

    def part_range(self, part: int, node_type: str) -> Tuple[int, int]:
        r"""``[start, end)`` of the type-local new ids of :obj:`node_type`
        part :obj:`part` owns."""
        return self[node_type].part_range(part)

    def first_id(self, node_type: str) -> int:
        r"""The global new id of :obj:`node_type`'s first node (its
        type-local ids start there)."""
        return int(self.node_offset[self.node_types.index(node_type)])

    def global_ids(self, ids: Tensor, node_type: str) -> Tensor:
        r"""The global new ids of type-local new ids of :obj:`node_type`."""
        return ids + self.first_id(node_type)

    @classmethod
    def load(cls, parts_dir: PathLike) -> 'HeteroPartitionBook':
        r"""Reads ``offsets.npy`` and the node types of ``partition.json``
        (never unpickling); :func:`open_hetero_partition` checks them."""
        parts_dir = Path(parts_dir).expanduser()
        meta = json.loads((parts_dir / 'partition.json').read_text())
        offsets = np.load(parts_dir / 'offsets.npy', allow_pickle=False)
        return cls({e['name']: torch.from_numpy(offsets[i].astype(np.int64))
                    for i, e in enumerate(meta['node_types'])})

    def __repr__(self) -> str:
        nodes = ', '.join(f'{t}: {n:,}' for t, n in self.num_nodes.items())
        return (f'{self.__class__.__name__}(num_parts={self.num_parts}, '
                f'num_nodes={{{nodes}}})')


def renumber_hetero(owner: np.ndarray, node_offset: Tensor,
                    num_parts: int) -> Tuple[np.ndarray, np.ndarray]:
    r"""``(new_id, offsets)`` for :obj:`owner` (the part of every global
    id): :func:`~pyg_fastload.partition.renumber` per node type, so
    ``new_id`` keeps every type in its global range and ``offsets`` is
    ``[T, num_parts + 1]``, each type's part boundaries."""
    new_id = np.empty_like(owner)
    offsets = np.zeros((node_offset.numel() - 1, num_parts + 1),
                       dtype=np.int64)
    for t in range(node_offset.numel() - 1):
        lo, hi = int(node_offset[t]), int(node_offset[t + 1])
        local, offsets[t] = renumber(owner[lo:hi], num_parts)
        new_id[lo:hi] = local + lo
    return new_id, offsets


class HeteroParts:
    r"""What :func:`~pyg_fastload.partition.partition_dataset` reads and
    writes of a heterogeneous dataset directory: the masks of its labelled
    (target) type over all nodes, its typed book (:func:`renumber_hetero`)
    and its parts (heterogeneous dataset directories; see the module
    docstring).

    Args:
        dataset_dir: the heterogeneous dataset directory.
    """
    #: What ``partition.json`` says of the kind.
    marker = {'kind': 'hetero'}
    #: The files of a part ``partition.json`` checksums.
    part_files = ('meta.json', )

    def __init__(self, dataset_dir: PathLike):
        self.dataset = open_dataset_dir(dataset_dir, verify='size')

    def _global_mask(self, key: str) -> Optional[Tensor]:
        r"""Mask :obj:`key` of the target type over all global ids (false
        for other types), or :obj:`None` when it lacks it."""
        dataset, node_type = self.dataset, self.dataset.target
        if node_type is None or key not in dataset.arrays[node_type]:
            return None
        topo = dataset.topology
        t = topo.node_types.index(node_type)
        mask = torch.zeros(topo.num_nodes, dtype=torch.bool)
        mask[int(topo.node_offset[t]):int(topo.node_offset[t + 1])] = \
            dataset.arrays[node_type][key].bool()
        return mask

    def masks(self, num_parts: int, method: str,
              task: str) -> List[Optional[Tensor]]:
        r"""The target's ``(train, val, test)`` masks over all nodes
        (:obj:`None` where missing), refused where :obj:`method` needs one
        that is, or where a part would get none of the target's nodes."""
        dataset, target = self.dataset, self.dataset.target
        if target is not None and num_parts > dataset.num_nodes[target]:
            raise ValueError(
                f"'num_parts' = {num_parts} is more than the "
                f"{dataset.num_nodes[target]} nodes of the labelled type "
                f"{target!r} of '{dataset.path}': every part needs some; "
                f"use at most {dataset.num_nodes[target]} parts")
        masks = [self._global_mask(f'{s}_mask')
                 for s in ('train', 'val', 'test')]
        if method == 'bytegnn' and all(m is None for m in masks):
            raise ValueError(
                f"--method bytegnn grows its blocks around the train/val/"
                f"test nodes, but the labelled type {target!r} of "
                f"'{dataset.path}' has no masks; use --method metis")
        if method == 'pagraph' and task == 'node' and masks[0] is None:
            raise ValueError(
                f"--method pagraph streams the training nodes of the "
                f"labelled type {target!r} of '{dataset.path}' to parts, but "
                f"it has no 'train_mask'; use --method metis (or, to train "
                f"links, --task link)")
        return masks

    def view(self) -> CSCTopology:
        r"""The graph the method partitions: the homogeneous view of all
        node types."""
        return self.dataset.topology.homogeneous_view()

    def renumber(self, owner: np.ndarray,
                 num_parts: int) -> Tuple[np.ndarray, np.ndarray]:
        r"""``(new_id, offsets)``: :func:`renumber_hetero`."""
        return renumber_hetero(owner, self.dataset.topology.node_offset,
                               num_parts)

    def fields(self) -> Dict[str, Any]:
        r"""What ``partition.json`` says of this kind's parts."""
        topo, counts = self.dataset.topology, self.dataset.num_nodes
        return {'node_types': [{'name': t, 'num_nodes': counts[t]}
                               for t in topo.node_types],
                'edge_types': [list(e) for e in topo.edge_types],
                'target': self.dataset.target}

    def book(self, offsets: np.ndarray) -> HeteroPartitionBook:
        return HeteroPartitionBook({t: torch.from_numpy(offsets[i]) for i, t
                                    in enumerate(self.dataset.node_types)})

    def write_part(self, path: Path, part: int, parts: Assignment) -> None:
        r"""Part :obj:`part`: per node type, its nodes in new-id order
        (then a PaGraph part's replicas, in its own row ids), every
        relation's in-edges into them and their rows of every array."""
        dataset, topo, offsets = self.dataset, self.dataset.topology, \
            parts.offsets
        nodes = {}  # per type: original type-local ids, new-id order
        for t, node_type in enumerate(topo.node_types):
            lo = int(topo.node_offset[t])
            nodes[node_type] = parts.order[lo + int(offsets[t, part]):
                                           lo + int(offsets[t, part + 1])
                                           ] - lo
        starts = dict(zip(topo.node_types, offsets[:, part].tolist()))
        replicas = parts.replicas(part)
        if replicas is None:
            held, ids, extra = nodes, parts.new_of, {}
            counts = {'owned': {t: v.numel() for t, v in nodes.items()}}
        else:
            first = dict(zip(topo.node_types, topo.node_offset.tolist()))
            held, extra, counts = pagraph_rows(
                dataset.arrays, _with_replicas(nodes, replicas, parts.new_of,
                                               topo.node_offset),
                first, parts.new_of)
            # every global original id as a source of the part's edges:
            # its type's first id plus its row here, -1 where not held
            ids = torch.full((topo.num_nodes, ), -1, dtype=torch.long)
            for node_type, local in held.items():
                start = first[node_type]
                ids[local + start] = torch.arange(start,
                                                  start + local.numel())
        relations, arrays, edge_arrays = _part(
            dataset, held, ids,
            None if parts.expand is None else parts.expand[part])
        for node_type, more in extra.items():
            arrays[node_type].update(more)
        pagraph = replicas is not None
        write_dataset_dir(
            path, num_nodes={t: v.numel() for t, v in held.items()},
            relations=relations, node_arrays=arrays,
            edge_arrays=edge_arrays, name=f'{dataset.name}-part{part}',
            source=f"{'PaGraph ' if pagraph else ''}part {part} of "
                   f"{parts.num_parts} of '{dataset.path}'",
            num_classes=dataset.num_classes, target=dataset.target,
            progress=False, verify='size',
            index_space=None if pagraph else dataset.num_nodes,
            extra_meta={'partition': {'run': parts.run, 'part': part,
                                      'num_parts': parts.num_parts,
                                      'start': starts, **counts}})


def _with_replicas(nodes: Dict[str, Tensor], replica: Tensor,
                   new_of: Tensor, node_offset: Tensor
                   ) -> Dict[str, Tuple[Tensor, Tensor]]:
    r"""Per node type ``(own, replicas)``: :obj:`nodes` and the nodes
    :obj:`replica` marks (over global original ids), each in new-id order,
    as type-local original ids."""
    out = {}
    for t, (node_type, own) in enumerate(nodes.items()):
        lo, hi = int(node_offset[t]), int(node_offset[t + 1])
        ids = replica[lo:hi].nonzero().view(-1)
        out[node_type] = (own, ids[torch.argsort(new_of[ids + lo])])
    return out


def _part(dataset: Any, nodes: Dict[str, Tensor], ids: Tensor,
          expand: Optional[Tensor] = None
          ) -> Tuple[Dict[Any, Any], Dict[str, Dict[str, Any]],
                     Dict[Any, Dict[str, Any]]]:
    r"""``(relations, arrays, edge_arrays)`` of a part holding :obj:`nodes`
    (per type, original type-local ids in the part's row order), as chunk
    sources the writer streams (the part's edges and rows never whole in
    memory): every relation's in-edges into them (only of the nodes
    :obj:`expand` marks, over global original ids, where given), in CSC
    order, sources mapped by :obj:`ids` (:func:`_part_edges`), their rows
    of every node array, and the rows of every relation's edge arrays of
    the edges it keeps."""
    topo = dataset.topology
    relations, edge_arrays = {}, {}
    for r, edge_type in enumerate(topo.edge_types):
        relations[edge_type], edge_arrays[edge_type] = _part_edges(
            topo, r, nodes[edge_type[2]], ids, expand,
            dataset.edge_arrays.get(edge_type, {}))
    arrays = {t: {key: row_chunks(value, nodes[t])
                  for key, value in a.items()}
              for t, a in dataset.arrays.items()}
    return relations, arrays, edge_arrays


def _part_edges(topo: HeteroTopology, r: int, rows: Tensor, ids: Tensor,
                expand: Optional[Tensor] = None,
                edge_arrays: Optional[Dict[str, Tensor]] = None
                ) -> Tuple[Callable[[], Iterator[Tuple[Tensor, Tensor]]],
                           Dict[str, Callable[[], Iterator[Tensor]]]]:
    r"""Relation :obj:`r`'s in-edges into :obj:`rows` (of the nodes
    :obj:`expand` marks, over global original ids, where given) as
    ``(source, row)`` chunks: source ``s`` as ``ids[s]`` less its type's
    ``node_offset`` (the global new ids give type-local new ids; a PaGraph
    part's ids its rows), rows the positions in :obj:`rows` (one ``int64``
    per row held, the edges chunk by chunk); and the same edges' rows of
    each of the relation's :obj:`edge_arrays`, chunk by chunk. The edges
    come sorted by row, so their order is the part's CSC order (the writer
    sorts stably) and the rows follow them."""
    first = int(topo.segment_offset[r])
    shift = topo.node_offset[int(topo.src_type[r])]
    start = int(topo.edge_offset[r])  # the relation's edge arrays' row 0
    begin = topo.indptr[first + rows]
    degree = topo.indptr[first + rows + 1] - begin
    if expand is not None:
        degree = torch.where(expand[rows + topo.node_offset[int(
            topo.dst_type[r])]], degree, 0)
    indptr = torch.zeros(rows.numel() + 1, dtype=torch.long)
    torch.cumsum(degree, 0, out=indptr[1:])

    def positions() -> Iterator[Tuple[int, int, Tensor]]:
        # the part's edges by chunk: their rows, their positions in indices
        for at, end in edge_chunks(indptr):
            yield at, end, expand_ranges(begin[at:end], degree[at:end],
                                         int(indptr[end]) - int(indptr[at]))

    def chunks() -> Iterator[Tuple[Tensor, Tensor]]:
        for at, end, edges in positions():
            yield (ids[topo.indices[edges].long()] - shift,
                   torch.repeat_interleave(torch.arange(at, end),
                                           degree[at:end],
                                           output_size=edges.numel()))

    def edge_positions() -> Iterator[Tensor]:
        return (edges - start for _, _, edges in positions())
    return chunks, {key: edge_row_chunks(value, edge_positions)
                    for key, value in (edge_arrays or {}).items()}


def load_hetero_book(parts_dir: Path,
                     meta: Dict[str, Any]) -> HeteroPartitionBook:
    r"""The typed book of a heterogeneous partition, checked against its
    ``partition.json``: ``[T, num_parts + 1]`` integer boundaries, each row
    from 0, never decreasing, ending at its type's node count."""
    types = meta.get('node_types')
    if not is_hetero_partition(meta) or not isinstance(types, list) or \
            not types or not all(
                isinstance(e, dict) and isinstance(e.get('name'), str) and
                isinstance(e.get('num_nodes'), int) for e in types):
        raise fail(parts_dir, parts_dir / 'partition.json',
                    "'node_types' is not a list of {name, num_nodes} (not "
                    "a heterogeneous partition?)")
    file = parts_dir / 'offsets.npy'
    try:
        offsets = np.load(file, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise fail(parts_dir, file, f'unreadable ({exc})') from None
    shape = [len(types), meta['num_parts'] + 1]
    if offsets.dtype.kind not in 'iu' or list(offsets.shape) != shape:
        raise fail(parts_dir, file, f'holds {offsets.dtype} of shape '
                    f'{list(offsets.shape)}, expected integers of shape '
                    f'{shape} (node types x part boundaries)')
    offsets = offsets.astype(np.int64)
    for row, entry in zip(offsets, types):
        if row[0] != 0 or bool((np.diff(row) < 0).any()) or \
                row[-1] != entry['num_nodes']:
            raise fail(parts_dir, file, f"boundaries {row.tolist()[:8]} of "
                        f"node type {entry['name']!r} do not run from 0 to "
                        f"its {entry['num_nodes']} nodes, never decreasing")
    return HeteroPartitionBook({e['name']: torch.from_numpy(row.copy())
                                for row, e in zip(offsets, types)})


def full_hetero_topology(parts_dir: Path, meta: Dict[str, Any]
                         ) -> HeteroTopology:
    r"""The whole heterogeneous graph in typed new ids, from the parts of a
    disjoint partition: every relation's in-edges into each part's rows,
    part after part (a type's rows of consecutive parts are consecutive new
    ids). A relation's edge ids are positions among its edges of every
    part, as DSP's collective samplers number them."""
    book = load_hetero_book(parts_dir, meta)
    parts = [open_dataset_dir(part_dir(parts_dir, part),
                                     verify='none').topology
             for part in range(book.num_parts)]
    return HeteroTopology.from_csc(book.num_nodes, {
        tuple(edge_type): concat_csc([topo.relation_topology(tuple(
            edge_type)) for topo in parts])
        for edge_type in meta['edge_types']})


def open_hetero_partition(
    parts_dir: PathLike,
    part: int,
    cache: Optional[FeatureCache] = None,
    *,
    device: Optional[Union[str, torch.device]] = None,
    verify: str = 'size',
    scores: Optional[Scores] = None,
    local: bool = False,
) -> Tuple[Any, Any, HeteroPartitionBook]:
    r"""Opens part :obj:`part` of a heterogeneous partition alone: its
    feature store (per node type, the rows of the part's nodes in new-id
    order), its graph store (every relation's in-edges into them; source
    ids are global new ids of the whole graph; with each relation's edge
    arrays, one row per edge of the part) and the typed book.

    A PaGraph part (``--method pagraph``) is stored in its own row ids and
    opens with :obj:`local` only: per node type its own rows, then its
    replicas, a ``global_id`` attribute giving every row's new id, and the
    in-edges of its message-flow rows in those row ids.

    Args:
        parts_dir: a directory written by :func:`~pyg_fastload.
            partition.partition_dataset`.
        part (int): which part, in ``[0, num_parts)``.
        cache (FeatureCache, optional): caches in front of the features;
            their policies rank the part's rows on its own edges.
        device: where the device cache lives.
        verify (str): how the part's files are checked.
        scores (Scores, optional): what ranks the part's rows for the
            caches (see :func:`~pyg_fastload.open_dataset`).
        local (bool): the part in its own row ids (PaGraph's parts only).
    """
    parts_dir = Path(parts_dir).expanduser()
    meta = read_partition_meta(parts_dir)
    pagraph = meta['method'] == 'pagraph'
    if local != pagraph:
        raise ValueError(
            f"'{parts_dir}': PaGraph's heterogeneous parts are stored in "
            f"their own row ids and open with local=True only; other "
            f"methods' parts keep the whole graph's ids (local=False)")
    path = checked_part(parts_dir, meta, part)
    meta_file = path / 'meta.json'
    book = load_hetero_book(parts_dir, meta)
    dataset = open_dataset_dir(path, verify='none')
    own = dataset.meta.get('partition')
    expected = {'run': meta['run'], 'part': part,
                'start': {t: book.part_range(part, t)[0]
                          for t in book.node_types},
                'owned': {t: book.part_range(part, t)[1] -
                          book.part_range(part, t)[0]
                          for t in book.node_types}}
    for key, value in expected.items():
        found = own.get(key) if isinstance(own, dict) else None
        if found != value:
            raise fail(parts_dir, meta_file, f"'partition.{key}' is "
                        f"{found!r}, the book says {value!r}")
    relations = [list(e) for e in dataset.edge_types]
    if dataset.node_types != book.node_types or \
            relations != meta.get('edge_types'):
        raise fail(parts_dir, meta_file, f"the part's node types "
                    f"{dataset.node_types} and relations {relations} are not "
                    f"the partition's ({book.node_types}, "
                    f"{meta.get('edge_types')} in partition.json)")
    ranked = None
    if cache is not None and cache.enabled and not pagraph:
        ranked = local_hetero_topology(
            dataset.topology, {t: book.part_range(part, t)
                               for t in book.node_types})
    feature_store, _ = open_dataset(path, cache, device=device,
                                    verify=verify, scores=scores,
                                    topology=ranked)
    # the part's edges as stored, with their rows of the edge arrays
    return feature_store, CSCGraphStore(dataset.topology,
                                        dataset.edge_arrays), book
