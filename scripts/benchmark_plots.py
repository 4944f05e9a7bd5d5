r"""Draws the bar charts of ``docs/benchmarks.md`` from the page's own tables.

The figures in the page are the measured ones (each table quotes the command
that printed them), so the plots are drawn from the tables, not typed again.
A table is plotted where an HTML comment right above it (blank lines
allowed) says how::

    <!-- plot: loader.png | seeds/s, steady state | label=graph |
         series=FastNeighborLoader, PyG NeighborLoader (best) | rows=1,2 |
         log -->

``file`` (first field) is the PNG written under ``--out``; the second field is
the title; ``label`` names the column (or columns joined with ``+``) whose
cells label the groups; ``series`` names the columns drawn as bars (the first
number of each cell, ``**``, commas and units stripped; an empty cell, ``-``
or one starting with ``n/a`` draws no bar); ``rows`` picks rows by number (1 = first body row;
default all); ``ylabel`` names the axis (default: the title); ``log`` uses a
log scale. A table that does not parse, or a named column or cell that is
not there, is refused with the page's line number.

Run from the repository root::

    python scripts/benchmark_plots.py --out docs/_static/benchmarks
"""
from __future__ import annotations

import argparse
import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

PLOT = re.compile(r'<!--\s*plot:(.*?)-->', re.S)
NUMBER = re.compile(r'-?\d+(?:\.\d+)?(?:e[+-]?\d+)?')
EMPTY = {'', '-', 'n/a'}


class TableError(ValueError):
    r"""A plotted table or its plot comment is malformed."""


@dataclass
class Spec:
    file: str
    title: str
    label: List[str]
    series: List[str]
    rows: Optional[List[int]] = None
    ylabel: Optional[str] = None
    log: bool = False
    line: int = 0
    header: List[str] = field(default_factory=list)
    body: List[List[str]] = field(default_factory=list)


def _cells(line: str) -> List[str]:
    text = line.strip()
    if not (text.startswith('|') and text.endswith('|')):
        raise TableError(f'not a table row: {line.strip()!r}')
    return [c.strip() for c in text[1:-1].split('|')]


def _spec(text: str, line: int) -> Spec:
    fields = [f.strip() for f in ' '.join(text.split()).split('|')]
    if len(fields) < 2 or not fields[0].endswith('.png'):
        raise TableError(f'line {line}: a plot comment starts with '
                         f"'FILE.png | title', got {text.strip()!r}")
    spec = Spec(file=fields[0], title=fields[1], label=[], series=[],
                line=line)
    for item in fields[2:]:
        key, _, value = item.partition('=')
        key, value = key.strip(), value.strip()
        if key == 'label':
            spec.label = [v.strip() for v in value.split('+')]
        elif key == 'series':
            spec.series = [v.strip() for v in value.split(',')]
        elif key == 'rows':
            spec.rows = [int(v) for v in value.split(',')]
        elif key == 'ylabel':
            spec.ylabel = value
        elif key == 'log' and not value:
            spec.log = True
        else:
            raise TableError(f'line {line}: unknown plot field {item!r}')
    if not spec.label or not spec.series:
        raise TableError(f"line {line}: a plot needs 'label=' and "
                         f"'series='")
    return spec


def parse(markdown: str) -> List[Spec]:
    r"""The plots the page asks for, each with the table below its comment;
    raises :class:`TableError` for a malformed one."""
    specs = []
    for match in PLOT.finditer(markdown):
        end_line = markdown.count('\n', 0, match.end()) + 1
        spec = _spec(match.group(1), end_line)
        lines = markdown[match.end():].split('\n')
        # skip the rest of the comment's line and blank lines
        i = 1
        while i < len(lines) and not lines[i].strip():
            i += 1
        table = []
        while i < len(lines) and lines[i].strip().startswith('|'):
            table.append(lines[i])
            i += 1
        if len(table) < 3:
            raise TableError(f'line {end_line}: the plot comment for '
                             f'{spec.file} is not followed by a table with '
                             f'a header, a separator and a row')
        spec.header = _cells(table[0])
        if not all(re.fullmatch(r':?-{3,}:?', c) for c in _cells(table[1])):
            raise TableError(f'line {end_line}: the table for {spec.file} '
                             f'has no |---| separator under its header')
        for row in table[2:]:
            cells = _cells(row)
            if len(cells) != len(spec.header):
                raise TableError(
                    f'line {end_line}: a row of the table for {spec.file} '
                    f'has {len(cells)} cells, its header '
                    f'{len(spec.header)}: {row.strip()!r}')
            spec.body.append(cells)
        for name in (*spec.label, *spec.series):
            if name not in spec.header:
                raise TableError(f'line {end_line}: the table for '
                                 f'{spec.file} has no column {name!r} '
                                 f'(it has {spec.header})')
        specs.append(spec)
    return specs


def value(cell: str, spec: Spec) -> float:
    r"""The first number of :obj:`cell` (NaN for an empty one)."""
    text = cell.replace('**', '').replace(',', '').strip()
    if text.lower() in EMPTY or text.lower().startswith('n/a '):
        return math.nan
    match = NUMBER.search(text)
    if match is None:
        raise TableError(f'line {spec.line}: {spec.file}: no number in the '
                         f'cell {cell!r}')
    return float(match.group())


def data(spec: Spec) -> Dict[str, List[float]]:
    r"""``{group label: [value per series]}`` in the table's order."""
    picked = spec.body
    if spec.rows is not None:
        if max(spec.rows) > len(spec.body) or min(spec.rows) < 1:
            raise TableError(f'line {spec.line}: {spec.file}: rows '
                             f'{spec.rows} of a {len(spec.body)}-row table')
        picked = [spec.body[i - 1] for i in spec.rows]
    out = {}
    for cells in picked:
        row = dict(zip(spec.header, cells))
        label = ', '.join(row[c].replace('**', '').replace('`', '')
                          for c in spec.label if row[c])
        out[label] = [value(row[s], spec) for s in spec.series]
    return out


def _label(v: float) -> str:
    return f'{v:,.0f}' if abs(v) >= 1000 else f'{v:.3g}'


def draw(spec: Spec, out_dir: Path) -> Path:
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    import textwrap

    groups = data(spec)
    fig, ax = plt.subplots(figsize=(7, 0.5 + 0.45 * len(groups)
                                    * max(1, len(spec.series)) + 1.2
                                    + 0.3 * (len(spec.series) > 1)))
    height = 0.8 / len(spec.series)
    labels = list(groups)
    for k, name in enumerate(spec.series):
        ys = [len(labels) - 1 - i + (len(spec.series) - 1 - k) * height
              - 0.4 + height / 2 for i in range(len(labels))]
        values = [groups[g][k] for g in labels]
        bars = ax.barh(ys, [0 if math.isnan(v) else v for v in values],
                       height=height, label=name.replace('`', ''))
        for bar, v in zip(bars, values):
            if not math.isnan(v):
                ax.annotate(_label(v), (bar.get_width(), bar.get_y()
                                          + bar.get_height() / 2),
                            xytext=(3, 0), textcoords='offset points',
                            va='center', fontsize=8)
    ax.set_yticks(range(len(labels)))
    ax.set_yticklabels([textwrap.fill(g, 28) for g in reversed(labels)],
                       fontsize=8)
    if spec.log:
        ax.set_xscale('log')
    ax.set_xlabel((spec.ylabel or spec.title).replace('`', ''))
    ax.set_title(spec.title.replace('`', ''), fontsize=10)
    ax.margins(x=0.22)
    if len(spec.series) > 1:
        ax.legend(fontsize=8, loc='upper center', ncol=2,
                  bbox_to_anchor=(0.5, -0.12 - 0.3 / len(groups)))
    fig.tight_layout()
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / spec.file
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return path


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--page', default='docs/benchmarks.md',
                        help='the Markdown page whose tables are plotted')
    parser.add_argument('--out', default='docs/_static/benchmarks',
                        help='where the PNG files go')
    args = parser.parse_args(argv)
    try:
        specs = parse(Path(args.page).read_text())
        if not specs:
            raise TableError(f'{args.page} asks for no plot '
                             f"('<!-- plot: FILE.png | ... -->')")
        names = [s.file for s in specs]
        if len(set(names)) != len(names):
            raise TableError(f'two plots write the same file: {names}')
        for spec in specs:
            data(spec)  # refuse a bad cell before anything is written
        for spec in specs:
            print(draw(spec, Path(args.out)))
    except TableError as error:
        print(f'benchmark_plots: {args.page}: {error}', file=sys.stderr)
        return 2
    return 0


if __name__ == '__main__':
    sys.exit(main())
