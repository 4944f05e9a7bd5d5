r"""The quality of a partition, read from its directory: edge cut and the
balance of nodes, edges and training/validation/test seeds across parts
(``pyg-fastload partition --report PARTS_DIR``, also ``report.json``)."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict, List, Sequence, Union

import torch

from ..config import format_bytes
from ..io import open_dataset_dir
from .hetero_report import format_hetero_report, hetero_partition_report
from .locality import locality_lines, measure_locality
from .part_dirs import (full_topology, is_hetero_partition, load_book,
                        read_partition_meta)

__all__ = ['partition_report', 'format_report']

_SPLITS = ('train_mask', 'val_mask', 'test_mask')


def partition_report(parts_dir: Union[str, 'os.PathLike[str]'],
                     locality: bool = True,
                     num_neighbors: Sequence[int] = (10, 5, 3),
                     batch_size: int = 1024, max_roots: int = 8192,
                     seed: int = 0, progress: bool = True) -> Dict[str, Any]:
    r"""Measures the partition in :obj:`parts_dir` and writes
    ``report.json`` there.

    Returns ``{'method', 'num_parts', 'edge_cut' (share of stored edges whose
    source lies in another part than their destination), 'parts' (per part:
    nodes, edges, cut_edges and the seeds of each split), 'balance'
    (max/mean over parts of nodes, edges and each split)}``; with
    :obj:`locality`, also ``'locality'``: ``R_micro`` / ``R_sub`` for 2 and
    3 hops (HopGNN, over :obj:`max_roots` training roots, fan-outs 10, 5, 3)
    and ``'requests'``: the remote/local request ratio of one epoch per
    part sampled with :obj:`num_neighbors` (ByteGNN). The graph is read
    back from the parts (in new ids), so only :obj:`parts_dir` is needed.

    A heterogeneous partition's report has ``'kind': 'hetero'`` and adds
    ``'node_types'`` (per type: nodes and split nodes per part, their
    balance) and ``'relations'`` (per ``'src__rel__dst'``: edges and
    cut_edges per part, edge_cut); its locality and requests are sampled
    on the homogeneous view from the target type's training nodes.
    """
    parts_dir = Path(parts_dir).expanduser()
    meta = read_partition_meta(parts_dir)
    if is_hetero_partition(meta):  # per node type and relation
        report = hetero_partition_report(
            parts_dir, meta, locality, num_neighbors, batch_size, max_roots,
            seed, progress)
        _write_report(parts_dir, report)
        return report
    book = load_book(Path(parts_dir), read_partition_meta(parts_dir))
    parts: List[Dict[str, int]] = []
    train = []
    replicated = meta['method'] == 'pagraph'  # parts overlap: no locality
    locality = locality and not replicated
    replicas = 0
    for part in range(meta['num_parts']):
        dataset = open_dataset_dir(parts_dir / f'part-{part}')
        replicas += dataset.meta['partition'].get('replicas', 0)
        if locality:
            train.append(dataset.arrays['train_mask'].bool()
                         if 'train_mask' in dataset.arrays else
                         torch.zeros(dataset.num_nodes, dtype=torch.bool))
        sources = book.owner(dataset.topology.indices.long())
        owned = dataset.meta['partition'].get('owned', dataset.num_nodes)
        row = {'nodes': owned, 'edges': dataset.num_edges,
               'cut_edges': int((sources != part).sum())}
        for split in _SPLITS:
            if split in dataset.arrays:
                row[split] = int(dataset.arrays[split][:owned].sum())
        parts.append(row)
    total = sum(p['edges'] for p in parts)
    balance = {}
    for key in parts[0]:
        if key == 'cut_edges':
            continue
        values = torch.tensor([p[key] for p in parts], dtype=torch.float64)
        mean = float(values.mean())
        balance[key] = float(values.max()) / mean if mean else 1.0
    report = {'method': meta['method'], 'num_parts': meta['num_parts'],
              'edge_cut': sum(p['cut_edges'] for p in parts) / max(total, 1),
              'parts': parts, 'balance': balance,
              'partition_seconds': meta.get('seconds'),
              'partition_peak_rss_bytes': meta.get('peak_rss_bytes'),
              'assign_peak_rss_bytes': meta.get('assign_peak_rss_bytes')}
    if replicated:  # PaGraph: extra rows over the graph's nodes
        report['replication'] = replicas / max(book.num_nodes, 1)
    if locality:
        report.update(measure_locality(
            full_topology(parts_dir), book.owner(torch.arange(book.num_nodes)),
            torch.cat(train).nonzero().view(-1), num_neighbors, batch_size,
            max_roots, seed, progress))
    _write_report(parts_dir, report)
    return report


def _write_report(parts_dir: Path, report: Dict[str, Any]) -> None:
    tmp = parts_dir / '.report.json.tmp'
    tmp.write_text(json.dumps(report, indent=2) + '\n')
    os.replace(tmp, parts_dir / 'report.json')


def format_report(report: Dict[str, Any]) -> str:
    r"""The report as a table, one row per part (a heterogeneous one: per
    node type and per relation)."""
    if report.get('kind') == 'hetero':
        return format_hetero_report(report)
    keys = [k for k in report['parts'][0]]
    cut = ("edge cut n/a (parts overlap; 'cut_edges' are in-edges from "
           "replicas)" if 'replication' in report else
           f"edge cut {report['edge_cut']:.3f} (share of edges crossing "
           f"parts)")
    lines = [f"{report['method']}, {report['num_parts']} parts: {cut}",
             'part  ' + '  '.join(f'{k:>10}' for k in keys)]
    for i, row in enumerate(report['parts']):
        lines.append(f'{i:<4}  ' + '  '.join(f'{row[k]:>10,}' for k in keys))
    lines.append('max/mean  ' + '  '.join(
        f"{report['balance'].get(k, float('nan')):>10.3f}"
        if k in report['balance'] else f"{'':>10}" for k in keys))
    if report.get('partition_seconds') is not None:
        peak = report.get('partition_peak_rss_bytes')
        lines.append(f"partitioned in {report['partition_seconds']:.1f}s" +
                     ('' if peak is None else
                      f', peak memory {format_bytes(peak)} (process RSS)'))
    if 'replication' in report:
        lines.append(f"replicated nodes: {report['replication']:.1%} of "
                     f"the graph's (PaGraph's self-reliant parts)")
    lines.extend(locality_lines(report))
    return '\n'.join(lines)
