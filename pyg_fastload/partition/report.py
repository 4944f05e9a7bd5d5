r"""The quality of a partition, read from its directory
(``pyg-fastload partition --report PARTS_DIR``, also ``report.json``).

A homogeneous graph is one node type and one relation, so one report
reads both kinds: per node type the nodes and split nodes every part owns
and their balance, per relation the edges every part stores and the edge
cut (edges whose source another part owns), per part the totals, and,
over the homogeneous view (every relation's edges, in global new ids),
the locality and remote/local requests of sampling from the training
nodes (of the labelled type)."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor

from ..config import format_bytes
from .book import HeteroPartitionBook, PartitionBook
from .locality import locality_lines, measure_locality
from .part_dirs import (full_topology, is_hetero_partition, load_book,
                        read_partition_meta)
from .part_format import open_part, part_dir

__all__ = ['partition_report', 'format_report', 'relation_key']

_SPLITS = ('train_mask', 'val_mask', 'test_mask')
Book = Union[PartitionBook, HeteroPartitionBook]


def relation_key(edge_type: Sequence[str]) -> str:
    r"""``'src__rel__dst'``: a relation as a JSON key."""
    return '__'.join(edge_type)


def _balance(values: List[int]) -> float:
    mean = sum(values) / max(len(values), 1)
    return max(values) / mean if mean else 1.0


def _own_rows(book: Book, part: int, node_type: Optional[str]
              ) -> Tuple[int, int]:
    r"""``(global new id of the part's first row of :obj:`node_type`, the
    rows it owns)`` (a homogeneous book's one type is :obj:`None`)."""
    if node_type is None:
        start, end = book.part_range(part)
        return start, end - start
    start, end = book.part_range(part, node_type)
    return book.first_id(node_type) + start, end - start


def _sources(dataset: Any, typed: bool
             ) -> Iterator[Tuple[Any, Optional[str], Tensor, int]]:
    r"""``(relation, source type, sources, the part's first id of the
    source type)`` of every relation a part stores (a homogeneous part's
    one: :obj:`None`, of the one type :obj:`None`)."""
    topo = dataset.topology
    if not typed:
        yield None, None, topo.indices.long(), 0
        return
    for r, edge_type in enumerate(topo.edge_types):
        lo, hi = int(topo.edge_offset[r]), int(topo.edge_offset[r + 1])
        yield (edge_type, edge_type[0], topo.indices[lo:hi].long(),
               int(topo.node_offset[int(topo.src_type[r])]))


def partition_report(parts_dir: Union[str, 'os.PathLike[str]'],
                     locality: bool = True,
                     num_neighbors: Sequence[int] = (10, 5, 3),
                     batch_size: int = 1024, max_roots: int = 8192,
                     seed: int = 0, progress: bool = True) -> Dict[str, Any]:
    r"""Measures the partition in :obj:`parts_dir` and writes
    ``report.json`` there.

    Returns ``{'method', 'num_parts', 'edge_cut' (share of stored edges whose
    source another part owns than their destination; :obj:`None` for
    PaGraph's overlapping parts), 'parts' (per part: the nodes it owns, the
    edges it stores, its cut_edges and the owned seeds of each split of
    the labelled type), 'balance' (max/mean over parts of each)}``;
    for PaGraph, ``'replication'`` (replicas over the graph's nodes, with
    ``cut_edges`` the in-edges from replicas); with :obj:`locality`, also
    ``'locality'``: ``R_micro`` / ``R_sub`` for 2 and 3 hops (HopGNN,
    over :obj:`max_roots` training roots, fan-outs 10, 5, 3) and
    ``'requests'``: the remote/local request ratio of one epoch per part
    sampled with :obj:`num_neighbors` (ByteGNN). The graph is read back
    from the parts (in new ids), so only :obj:`parts_dir` is needed.

    A heterogeneous partition's report has ``'kind': 'hetero'``, its
    ``'target'`` and adds ``'node_types'`` (per type: nodes and split
    nodes per part, their balance) and ``'relations'`` (per
    ``'src__rel__dst'``: edges and cut_edges per part, edge_cut); its
    locality and requests are sampled on the homogeneous view.

    Args:
        parts_dir (str or os.PathLike): the partition directory.
        locality (bool, optional): also sample the locality and request
            ratios. (default: :obj:`True`)
        num_neighbors (List[int], optional): the fan-outs of the sampled
            requests. (default: :obj:`(10, 5, 3)`)
        batch_size (int, optional): seeds per sampled mini-batch.
            (default: :obj:`1024`)
        max_roots (int, optional): training roots the locality is
            sampled over. (default: :obj:`8192`)
        seed (int, optional): the sampling seed. (default: :obj:`0`)
        progress (bool, optional): show progress bars.
            (default: :obj:`True`)

    Example:
        >>> from pyg_fastload.partition import partition_report
        >>> report = partition_report('data/tiny-parts',
        ...                           progress=False)  # doctest: +SKIP
        >>> report['num_parts']  # doctest: +SKIP
        2
    """
    parts_dir = Path(parts_dir).expanduser()
    meta = read_partition_meta(parts_dir)
    book = load_book(parts_dir, meta)
    typed = is_hetero_partition(meta)
    # PaGraph's parts overlap: no cut, no locality
    replicated = meta['method'] == 'pagraph'
    locality = locality and not replicated
    k = book.num_parts
    types: List[Optional[str]] = list(book.node_types) if typed else [None]
    target = meta.get('target') if typed else None
    node_rows: Dict[Optional[str], Dict[str, List[int]]] = {
        t: {'nodes': [], **{s: [] for s in _SPLITS}} for t in types}
    relations: Dict[Any, Dict[str, List[int]]] = {}
    seeds, replicas = [], 0
    for part in range(k):
        dataset = open_part(meta, part_dir(parts_dir, part))
        owned = {}
        for t in types:
            first, owned[t] = _own_rows(book, part, t)
            arrays = dataset.arrays[t] if typed else dataset.arrays
            held = dataset.num_nodes[t] if typed else dataset.num_nodes
            replicas += held - owned[t]
            node_rows[t]['nodes'].append(owned[t])
            for split in _SPLITS:
                if split in arrays:
                    mask = arrays[split][:owned[t]].bool()
                    node_rows[t][split].append(int(mask.sum()))
                    if split == 'train_mask' and t == target:
                        seeds.append(mask.nonzero().view(-1) + first)
        for edge_type, src_type, src, first in _sources(dataset, typed):
            row = relations.setdefault(edge_type,
                                       {'edges': [], 'cut_edges': []})
            row['edges'].append(src.numel())
            # a typed PaGraph part's sources are its rows (of each type
            # its own first, then its replicas), others' new ids
            remote = src - first >= owned[src_type] if typed and \
                replicated else book.owner(src) != part
            row['cut_edges'].append(int(remote.sum()))
    per_type = {}
    for t, rows in node_rows.items():
        rows = {key: v for key, v in rows.items() if len(v) == k}
        per_type[t] = {**rows, 'balance': {key: _balance(v)
                                           for key, v in rows.items()}}
    for row in relations.values():
        row['edge_cut'] = None if replicated else \
            sum(row['cut_edges']) / max(sum(row['edges']), 1)
    parts = []
    for part in range(k):
        parts.append({
            'nodes': sum(per_type[t]['nodes'][part] for t in types),
            'edges': sum(r['edges'][part] for r in relations.values()),
            'cut_edges': sum(r['cut_edges'][part]
                             for r in relations.values()),
            **{s: per_type[target][s][part] for s in _SPLITS
               if s in per_type[target]}})
    total = sum(p['edges'] for p in parts)
    report: Dict[str, Any] = {
        'method': meta['method'], 'num_parts': k,
        'edge_cut': None if replicated else
        sum(p['cut_edges'] for p in parts) / max(total, 1),
        'parts': parts,
        'balance': {key: _balance([p[key] for p in parts])
                    for key in parts[0] if key != 'cut_edges'},
        'partition_seconds': meta.get('seconds'),
        'partition_peak_rss_bytes': meta.get('peak_rss_bytes'),
        'assign_peak_rss_bytes': meta.get('assign_peak_rss_bytes')}
    if typed:
        report.update(kind='hetero', target=target, node_types=per_type,
                      relations={relation_key(e): row
                                 for e, row in relations.items()})
    if replicated:  # extra rows over the graph's nodes
        report['replication'] = replicas / max(book.num_ids, 1)
    if locality and seeds and sum(s.numel() for s in seeds):
        topology = full_topology(parts_dir)
        if typed:  # every relation's edges, in global new ids
            topology = topology.homogeneous_view()
        report.update(measure_locality(
            topology, book.owner(torch.arange(book.num_ids)),
            torch.cat(seeds), num_neighbors, batch_size, max_roots, seed,
            progress))
    _write_report(parts_dir, report)
    return report


def _write_report(parts_dir: Path, report: Dict[str, Any]) -> None:
    tmp = parts_dir / '.report.json.tmp'
    tmp.write_text(json.dumps(report, indent=2) + '\n')
    os.replace(tmp, parts_dir / 'report.json')


def _typed_lines(report: Dict[str, Any]) -> List[str]:
    r"""A heterogeneous report's tables: per node type (nodes, split nodes
    per part), per relation (edges, edge cut per part)."""
    k = report['num_parts']
    cells = {name: [f'{e:,} ({c:,})' for e, c in
                    zip(row['edges'], row['cut_edges'])]
             for name, row in report['relations'].items()}
    width = max([9] + [len(c) for row in cells.values() for c in row])
    left = max([24] + [len(name) for name in cells])
    head = '  '.join(f'{"part " + str(i):>{width}}' for i in range(k))
    lines = [f"{'node type':<{left}}  {head}  {'max/mean':>9}"]
    for t, row in report['node_types'].items():
        for key in ('nodes', *_SPLITS):
            if key in row:
                name = t if key == 'nodes' else f'  {key[:-5]}'
                lines.append(f'{name:<{left}}  ' + '  '.join(
                    f'{v:>{width},}' for v in row[key]) +
                    f"  {row['balance'][key]:>9.3f}")
    lines.append(f"{'relation: edges (cut)':<{left}}  {head}  "
                 f"{'edge cut':>9}")
    for name, row in report['relations'].items():
        lines.append(f'{name:<{left}}  ' + '  '.join(
            f'{c:>{width}}' for c in cells[name]) + (
            f"  {row['edge_cut']:>9.3f}" if row['edge_cut'] is not None
            else f"  {'n/a':>9}"))
    return lines


def format_report(report: Dict[str, Any]) -> str:
    r"""The report as a table, one row per part (of a heterogeneous one,
    then per node type and per relation)."""
    typed = is_hetero_partition(report)
    keys = [k for k in report['parts'][0]]
    cut = ("edge cut n/a (parts overlap; 'cut_edges' are in-edges from "
           "replicas)" if report['edge_cut'] is None else
           f"edge cut {report['edge_cut']:.3f} (share of edges crossing "
           f"parts)")
    of = (f" of a heterogeneous graph (target {report.get('target')!r})"
          if typed else '')
    lines = [f"{report['method']}, {report['num_parts']} parts{of}: {cut}",
             'part  ' + '  '.join(f'{k:>10}' for k in keys)]
    for i, row in enumerate(report['parts']):
        lines.append(f'{i:<4}  ' + '  '.join(f'{row[k]:>10,}' for k in keys))
    lines.append('max/mean  ' + '  '.join(
        f"{report['balance'].get(k, float('nan')):>10.3f}"
        if k in report['balance'] else f"{'':>10}" for k in keys))
    if typed:
        lines.extend(_typed_lines(report))
    if report.get('partition_seconds') is not None:
        peak = report.get('partition_peak_rss_bytes')
        lines.append(f"partitioned in {report['partition_seconds']:.1f}s" +
                     ('' if peak is None else
                      f', peak memory {format_bytes(peak)} (process RSS)'))
    if 'replication' in report:
        lines.append(f"replicated nodes: {report['replication']:.1%} of "
                     f"the graph's (PaGraph's self-reliant parts)")
    lines.extend(locality_lines(report, ', all relations' if typed else ''))
    return '\n'.join(lines)
