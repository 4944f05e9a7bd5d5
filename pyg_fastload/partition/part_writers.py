r"""The part writers of :func:`~pyg_fastload.partition.partition_dataset`,
one per kind of dataset directory (each part is a directory of the kind it
partitions), sharing how a part's in-edges are picked and streamed.

A homogeneous part (:class:`HomoParts`) holds the in-neighbour lists of
its nodes (CSC, in global new ids, so a sampler sees which neighbours are
remote) and its rows of every node array. A heterogeneous part
(:class:`HeteroParts`) holds, per node type, its nodes (their rows of
every node array, in new-id order) and the in-edges of every relation into
them (CSC over the part's rows of the destination type; source ids are
typed new ids of the whole graph, recorded as its ``index_space``). Both
keep the rows of every edge array of the edges they keep. PaGraph's parts
(``--method pagraph``) overlap: their replicas follow their own rows
(:func:`~pyg_fastload.partition.pagraph.pagraph_rows`)."""
from __future__ import annotations

import os
from pathlib import Path
from typing import (Any, Callable, Dict, Iterator, List, Optional, Tuple,
                    Union)

import torch
from torch import Tensor

from ..graph.hetero_topology import HeteroTopology
from ..graph.ranges import expand_ranges
from ..graph.topology import CSCTopology, index_dtype_for
from ..io import open_dataset_dir, write_dataset_dir
from .pagraph import pagraph_rows
from .part_format import (SOURCE_ID, Assignment, edge_chunks,
                          edge_row_chunks, row_chunks, write_npy)

__all__ = ['HomoParts', 'HeteroParts']

PathLike = Union[str, 'os.PathLike[str]']
#: ``(first row, end row, the edges' positions in the CSC)`` chunk by
#: chunk: the in-edges a part keeps (:func:`in_edges`).
Positions = Callable[[], Iterator[Tuple[int, int, Tensor]]]


def in_edges(indptr: Tensor, segments: Tensor, keep: Optional[Tensor] = None
             ) -> Tuple[Tensor, Tensor, Positions]:
    r"""The in-edges of the CSC :obj:`segments` (a part's rows, in its
    order; of a heterogeneous graph, along one relation) that a part keeps:
    all, or only the rows :obj:`keep` marks. Gives ``(degree, part_indptr,
    positions)``: each row's kept in-edges, the part's CSC offsets, and a
    source of the edges' positions in the graph's CSC, chunk by chunk (the
    part's edges never whole in memory)."""
    begin = indptr[segments]
    degree = indptr[segments + 1] - begin
    if keep is not None:
        degree = torch.where(keep, degree, 0)
    part_indptr = torch.zeros(segments.numel() + 1, dtype=torch.long)
    torch.cumsum(degree, 0, out=part_indptr[1:])

    def positions() -> Iterator[Tuple[int, int, Tensor]]:
        for at, end in edge_chunks(part_indptr):
            yield at, end, expand_ranges(
                begin[at:end], degree[at:end],
                int(part_indptr[end]) - int(part_indptr[at]))
    return degree, part_indptr, positions


class HomoParts:
    r"""What :func:`~pyg_fastload.partition.partition_dataset` reads and
    writes of a homogeneous dataset directory: its masks, its book (one
    range per part) and its parts (dataset directories in global new ids).

    Args:
        dataset_dir: the dataset directory.
        features (str): ``'copy'`` or ``'source'`` (see
            :func:`~pyg_fastload.partition.partition_dataset`).
    """
    #: What ``partition.json`` says of the kind (nothing: homogeneous).
    marker: Dict[str, str] = {}
    #: Where each node type's global ids start (one type: no offsets).
    node_offset = None

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

    def fields(self) -> Dict[str, Any]:
        r"""What ``partition.json`` says of this kind's parts."""
        return {'features': self.features}

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
        _, indptr, kept = in_edges(
            topo.indptr, rows,
            None if parts.expand is None else parts.expand[part][rows])
        # streamed to the writer in chunks, the in-neighbours in the dtype
        # it stores (int32 where it fits): no copy of the part's edges or
        # rows
        ids = new_of.to(index_dtype_for(topo.num_nodes))

        def positions() -> Iterator[torch.Tensor]:
            # where the part's edges are in the dataset's CSC order
            return (at for _, _, at in kept())

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


class HeteroParts:
    r"""What :func:`~pyg_fastload.partition.partition_dataset` reads and
    writes of a heterogeneous dataset directory: the masks of its labelled
    (target) type over all nodes, its typed book (renumbered per node
    type) and its parts (heterogeneous dataset directories; see the module
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

    @property
    def node_offset(self) -> Tensor:
        r"""Where each node type's global ids start (the book renumbers
        per type)."""
        return self.dataset.topology.node_offset

    def fields(self) -> Dict[str, Any]:
        r"""What ``partition.json`` says of this kind's parts."""
        topo, counts = self.dataset.topology, self.dataset.num_nodes
        return {'node_types': [{'name': t, 'num_nodes': counts[t]}
                               for t in topo.node_types],
                'edge_types': [list(e) for e in topo.edge_types],
                'target': self.dataset.target}

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
    degree, _, positions = in_edges(
        topo.indptr, first + rows, None if expand is None else
        expand[rows + topo.node_offset[int(topo.dst_type[r])]])

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
