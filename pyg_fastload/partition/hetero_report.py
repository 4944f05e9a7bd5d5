r"""The quality of a heterogeneous partition, read from its directory: per
node type the nodes and training nodes of every part and their balance,
per relation the edges every part stores and the edge cut (edges whose
source lies in another part than their destination), and, over the
homogeneous view, the locality and remote/local requests the homogeneous
report measures (``pyg-fastload partition --report PARTS_DIR``)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Sequence

import torch

from ..graph.topology import CSCTopology
from ..io import open_dataset_dir
from .hetero import HeteroPartitionBook, load_hetero_book
from .locality import locality_lines, measure_locality
from .part_dirs import part_dir

__all__ = ['hetero_partition_report', 'format_hetero_report',
           'relation_key']

_SPLITS = ('train_mask', 'val_mask', 'test_mask')


def relation_key(edge_type: Sequence[str]) -> str:
    r"""``'src__rel__dst'``: a relation as a JSON key."""
    return '__'.join(edge_type)


def _balance(values: List[int]) -> float:
    mean = sum(values) / max(len(values), 1)
    return max(values) / mean if mean else 1.0


def hetero_partition_report(parts_dir: Path, meta: Dict[str, Any],
                            locality: bool = True,
                            num_neighbors: Sequence[int] = (10, 5, 3),
                            batch_size: int = 1024, max_roots: int = 8192,
                            seed: int = 0,
                            progress: bool = True) -> Dict[str, Any]:
    r"""The report of the heterogeneous partition in :obj:`parts_dir`
    (``partition.json`` :obj:`meta`, already checked): see
    :func:`~pyg_fastload.partition.partition_report`. Locality and requests
    sample the homogeneous view (every relation's edges, in global new
    ids) from the target type's training nodes, each part from its own."""
    book: HeteroPartitionBook = load_hetero_book(parts_dir, meta)
    # PaGraph's parts overlap, in their own row ids: no cut, no locality
    replicated = meta['method'] == 'pagraph'
    locality = locality and not replicated
    types = book.node_types
    k = book.num_parts
    node_rows: Dict[str, Dict[str, List[int]]] = {
        t: {'nodes': [], **{s: [] for s in _SPLITS}} for t in types}
    relations: Dict[str, Dict[str, List[int]]] = {}
    sources, targets, seeds = [], [], []
    for part in range(k):
        dataset = open_dataset_dir(part_dir(parts_dir, part))
        topo = dataset.topology
        for t in types:
            node_rows[t]['nodes'].append(dataset.num_nodes[t])
            for split in _SPLITS:
                if split in dataset.arrays[t]:
                    mask = dataset.arrays[t][split].bool()
                    node_rows[t][split].append(int(mask.sum()))
                    if split == 'train_mask' and t == meta.get('target'):
                        start = book.part_range(part, t)[0]
                        seeds.append(book.global_ids(
                            mask.nonzero().view(-1) + start, t))
        for r, edge_type in enumerate(topo.edge_types):
            lo, hi = int(topo.edge_offset[r]), int(topo.edge_offset[r + 1])
            src = topo.indices[lo:hi].long()
            row = relations.setdefault(relation_key(edge_type),
                                       {'edges': [], 'cut_edges': []})
            row['edges'].append(hi - lo)
            row['cut_edges'].append(
                0 if replicated else int((book.owner(src) != part).sum()))
            if locality:
                first = int(topo.segment_offset[r])
                dst_type = edge_type[2]
                count = dataset.num_nodes[dst_type]
                degree = topo.indptr[first + 1:first + count + 1] - \
                    topo.indptr[first:first + count]
                start = book.part_range(part, dst_type)[0]
                dst = book.global_ids(torch.arange(count) + start, dst_type)
                sources.append(src)
                targets.append(dst.repeat_interleave(degree))
    per_type = {}
    for t, rows in node_rows.items():
        rows = {key: v for key, v in rows.items() if len(v) == k}
        per_type[t] = {**rows, 'balance': {key: _balance(v)
                                           for key, v in rows.items()}}
    total = cut = 0
    for row in relations.values():
        edges, cuts = sum(row['edges']), sum(row['cut_edges'])
        row['edge_cut'] = None if replicated else cuts / max(edges, 1)
        total += edges
        cut += cuts
    parts = []
    for part in range(k):
        parts.append({
            'nodes': sum(per_type[t]['nodes'][part] for t in types),
            'edges': sum(r['edges'][part] for r in relations.values()),
            'cut_edges': sum(r['cut_edges'][part]
                             for r in relations.values())})
    report: Dict[str, Any] = {
        'kind': 'hetero', 'method': meta['method'], 'num_parts': k,
        'target': meta.get('target'),
        'edge_cut': None if replicated else cut / max(total, 1),
        'parts': parts,
        'balance': {key: _balance([p[key] for p in parts])
                    for key in ('nodes', 'edges')},
        'node_types': per_type, 'relations': relations,
        'partition_seconds': meta.get('seconds'),
        'partition_peak_rss_bytes': meta.get('peak_rss_bytes')}
    seeds_t = torch.cat(seeds) if seeds else torch.empty(0, dtype=torch.long)
    if locality and seeds_t.numel():
        n = sum(book.num_nodes.values())
        edge_index = torch.stack([torch.cat(sources), torch.cat(targets)])
        del sources, targets
        topology = CSCTopology.from_edge_index(edge_index, n)
        del edge_index
        report.update(measure_locality(
            topology, book.owner(torch.arange(n)), seeds_t, num_neighbors,
            batch_size, max_roots, seed, progress))
    return report


def format_hetero_report(report: Dict[str, Any]) -> str:
    r"""The report as tables: per node type (nodes, training nodes per
    part), per relation (edges, edge cut per part), then the totals."""
    k = report['num_parts']
    cells = {name: [f'{e:,} ({c:,})' for e, c in
                    zip(row['edges'], row['cut_edges'])]
             for name, row in report['relations'].items()}
    width = max([9] + [len(c) for row in cells.values() for c in row])
    left = max([24] + [len(name) for name in cells])
    head = '  '.join(f'{"part " + str(i):>{width}}' for i in range(k))
    cut = report['edge_cut']
    lines = [f"{report['method']}, {k} parts of a heterogeneous graph "
             f"(target {report.get('target')!r}): edge cut " +
             (f"{cut:.3f} (share of edges crossing parts)" if cut is not None
              else "n/a (PaGraph's parts overlap: nodes and edges counted "
              "with their replicas)"),
             f"{'node type':<{left}}  {head}  {'max/mean':>9}"]
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
    lines.append(f"all nodes max/mean {report['balance']['nodes']:.3f}, "
                 f"all edges max/mean {report['balance']['edges']:.3f}")
    if report.get('partition_seconds') is not None:
        lines.append(f"partitioned in {report['partition_seconds']:.1f}s")
    lines.extend(locality_lines(report, ', all relations'))
    return '\n'.join(lines)
