r"""The quality of a partition, read from its directory: edge cut and the
balance of nodes, edges and training/validation/test seeds across parts
(``pyg-fastload partition --report PARTS_DIR``, also ``report.json``)."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict, List, Union

import torch

from ..io import open_dataset_dir
from .book import PartitionBook
from .parts import read_partition_meta

__all__ = ['partition_report', 'format_report']

_SPLITS = ('train_mask', 'val_mask', 'test_mask')


def partition_report(parts_dir: Union[str, 'os.PathLike[str]']
                     ) -> Dict[str, Any]:
    r"""Measures the partition in :obj:`parts_dir` and writes
    ``report.json`` there.

    Returns ``{'method', 'num_parts', 'edge_cut' (share of edges whose
    source lies in another part than their destination), 'parts' (per part:
    nodes, edges, cut_edges and the seeds of each split), 'balance'
    (max/mean over parts of nodes, edges and each split)}``."""
    parts_dir = Path(parts_dir).expanduser()
    meta = read_partition_meta(parts_dir)
    book = PartitionBook.load(parts_dir)
    parts: List[Dict[str, int]] = []
    for part in range(meta['num_parts']):
        dataset = open_dataset_dir(parts_dir / f'part-{part}')
        sources = book.owner(dataset.topology.indices.long())
        row = {'nodes': dataset.num_nodes, 'edges': dataset.num_edges,
               'cut_edges': int((sources != part).sum())}
        for split in _SPLITS:
            if split in dataset.arrays:
                row[split] = int(dataset.arrays[split].sum())
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
              'partition_seconds': meta.get('seconds')}
    tmp = parts_dir / '.report.json.tmp'
    tmp.write_text(json.dumps(report, indent=2) + '\n')
    os.replace(tmp, parts_dir / 'report.json')
    return report


def format_report(report: Dict[str, Any]) -> str:
    r"""The report as a table, one row per part."""
    keys = [k for k in report['parts'][0]]
    lines = [f"{report['method']}, {report['num_parts']} parts: edge cut "
             f"{report['edge_cut']:.3f} (share of edges crossing parts)",
             'part  ' + '  '.join(f'{k:>10}' for k in keys)]
    for i, row in enumerate(report['parts']):
        lines.append(f'{i:<4}  ' + '  '.join(f'{row[k]:>10,}' for k in keys))
    lines.append('max/mean  ' + '  '.join(
        f"{report['balance'].get(k, float('nan')):>10.3f}"
        if k in report['balance'] else f"{'':>10}" for k in keys))
    return '\n'.join(lines)
