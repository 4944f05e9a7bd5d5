r"""``pyg-fastload report LOGDIR``: plots what
:class:`~pyg_fastload.lightning.callbacks.LoaderMonitor` recorded (throughput,
cache hit ratios and the loader's time breakdown per epoch) as PNG files."""
from __future__ import annotations

import argparse
import csv
import io
import json
import math
import os
import stat
import sys
import warnings
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from pyg_fastload.config import format_bytes
from pyg_fastload.errors import USAGE_EXIT

from .callbacks import STATS_FILENAME, STATS_FORMAT
from .stats_summary import merge_places, served_rows
from .summary_text import tier_label

__all__ = ['make_report', 'plot_run', 'add_arguments', 'run']

PathLike = Union[str, os.PathLike]

#: The Lightning ``CSVLogger`` file read where no JSON file was written.
METRICS_CSV = 'metrics.csv'

#: The ``time_breakdown`` entries of the consumer (the training loop): they
#: add up to the epoch and form the first stacked bar.
_CONSUMER_KEYS = ('model', 'waiting')


#: The largest stats or metrics file a report reads (LoaderMonitor writes
#: about a kilobyte per epoch and rank).
MAX_FILE_BYTES = 64 * 2**20
#: The most epoch records a report plots from one file (all ranks together
#: and each rank's, counted together).
MAX_RECORDS = 5_000

#: The record fields a report reads besides ``epoch``, and how deep in
#: dicts their numbers lie (``cache``: attribute, tier, counter); the other
#: fields are left alone.
_READ = {'seeds_per_s': 0, 'batches_per_s': 0, 'time': 1, 'cache': 3}

Records = List[Dict[str, Any]]


def _read_text(path: Path) -> str:
    r"""The text of :obj:`path`: a regular file (a FIFO or device of that
    name would be read without end) of at most :data:`MAX_FILE_BYTES`."""
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):
            raise ValueError(f"'{path}' is not a regular file (a FIFO, "
                             f"device or directory of that name): remove "
                             f"or rename it")
        if info.st_size > MAX_FILE_BYTES:
            raise ValueError(f"'{path}' is {format_bytes(info.st_size)}, "
                             f"more than the {format_bytes(MAX_FILE_BYTES)} "
                             f"a report reads (a damaged file, or a run to "
                             f"plot in parts: keep some epochs in a copy)")
        with open(path, 'rb') as f:
            return f.read(MAX_FILE_BYTES).decode()
    except OSError as error:
        raise ValueError(f"cannot read '{path}': {error.strerror}") from None
    except UnicodeDecodeError as error:
        raise ValueError(f"'{path}' is not text (byte {error.start:,} is "
                         f"{error.object[error.start]:#04x}): a damaged "
                         f"file") from None


def _short(value: Any) -> str:
    r"""``repr(value)`` cut to a line (a dict or list: its type)."""
    if isinstance(value, (dict, list)):
        return f'a {type(value).__name__}'
    text = repr(value)
    return text if len(text) <= 60 else f'{text[:57]}...'


def _finite(value: Any) -> bool:
    r"""Whether :obj:`value` is an int that a 64-bit array holds or a
    float that is neither infinite nor NaN."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    if isinstance(value, int):  # beyond 64 bits numpy holds no array
        return -2**63 <= value < 2**63
    return math.isfinite(value)


def _bad_leaf(value: Any, key: str, depth: int) -> Optional[str]:
    r"""What is wrong with the first entry of :obj:`value` that is not a
    dict :obj:`depth` deep with finite numbers or nulls at the bottom,
    naming it (:obj:`key` and the keys below)."""
    if depth:
        if not isinstance(value, dict):
            return f"'{key}' is {_short(value)}, not a dict"
        for name, item in value.items():
            found = _bad_leaf(item, f'{key}.{name}', depth - 1)
            if found is not None:
                return found
        return None
    if value is None or _finite(value):
        return None
    return f"'{key}' is {_short(value)}, not a finite number"


def _bad_field(record: Dict[str, Any]) -> Optional[str]:
    r"""What is wrong with the first field of an epoch record that does
    not have a stats record's form, naming it."""
    epoch = record.get('epoch')
    if not isinstance(epoch, int) or not _finite(epoch) or epoch < 0:
        return (f"'epoch' is {_short(epoch)}, not an epoch number (a whole "
                f"number >= 0)")
    if 'time' not in record:
        return "'time' is missing"
    for key, depth in _READ.items():
        found = None if key not in record else _bad_leaf(record[key], key,
                                                         depth)
        if found is not None:
            return found
    return None


def _checked_epochs(path: Path, epochs: Any, where: str = '') -> Records:
    r""":obj:`epochs` if it is a list of records of a stats record's form
    (see :func:`_bad_field`); a one-line error naming the file and field
    otherwise."""
    if not isinstance(epochs, list) or not all(
            isinstance(e, dict) for e in epochs):
        raise ValueError(f"'{path}': '{where}epochs' is not a list of "
                         f"records (a damaged or hand-edited stats file)")
    for i, epoch in enumerate(epochs):
        bad = _bad_field(epoch)
        if bad is not None:
            raise ValueError(f"'{path}': {where}epoch record {i}: {bad} (a "
                             f"damaged or hand-edited stats file)")
    return epochs


def _check_count(path: Path, count: int) -> None:
    r"""Refuses more than :data:`MAX_RECORDS` epoch records of a file."""
    if count > MAX_RECORDS:
        raise ValueError(f"'{path}' holds {count:,} epoch records, more "
                         f"than the {MAX_RECORDS:,} a report plots (a "
                         f"damaged file, or a run to plot in parts: keep "
                         f"some epochs in a copy)")


def _read_json(path: Path) -> Tuple[Records, List[Records]]:
    r"""The all-ranks records of a stats file and, for a distributed run,
    each rank's (empty list otherwise)."""
    text = _read_text(path)
    try:
        data = json.loads(text)
    except RecursionError:
        raise ValueError(f"'{path}' nests its values deeper than a stats "
                         f"file does (a damaged or hand-edited stats "
                         f"file)") from None
    except ValueError as error:
        raise ValueError(f"cannot read '{path}': {error}") from None
    if not isinstance(data, dict) or data.get('format') != STATS_FORMAT:
        raise ValueError(f"'{path}' is not a LoaderMonitor stats file (no "
                         f"\"format\": \"{STATS_FORMAT}\")")
    epochs, ranks = data.get('epochs'), data.get('ranks', [])
    if not isinstance(ranks, list) or not all(
            isinstance(r, dict) for r in ranks):
        raise ValueError(f"'{path}': 'ranks' is not a list of per-rank "
                         f"records (a damaged or hand-edited stats file)")
    _check_count(path, sum(len(e) for e in [epochs, *(
        r.get('epochs') for r in ranks)] if isinstance(e, list)))
    return _checked_epochs(path, epochs), [
        _checked_epochs(path, r.get('epochs'), f'ranks[{i}].')
        for i, r in enumerate(ranks)]


#: The ``metrics.csv`` column groups a report reads (``cache/ATTR/TIER/...``
#: included; the other columns, losses and accuracies, are left alone).
_CSV_GROUPS = ('throughput', 'time', 'loader', 'cache')


def _csv_number(path: Path, line: int, key: str, text: str) -> float:
    r""":obj:`text`, a field of line :obj:`line`, as a finite number; a
    one-line error naming the file, line and column otherwise."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise ValueError(f"'{path}' line {line}: '{key}' is {_short(text)}, "
                         f"not a finite number (a damaged or hand-edited "
                         f"metrics file)")
    return value


def _read_csv(path: Path) -> List[Dict[str, Any]]:
    r"""Per-epoch records from a ``metrics.csv`` with ``LoaderMonitor``'s
    columns (empty if it has none); rows of one epoch are merged."""
    reader = csv.DictReader(io.StringIO(_read_text(path), newline=''))
    records: Dict[int, Dict[str, Any]] = {}
    try:
        for row in reader:
            line = reader.line_num
            if None in row:
                raise ValueError(f"'{path}' line {line}: more fields than "
                                 f"the header's {len(reader.fieldnames)} "
                                 f"columns (a damaged metrics file)")
            if not row.get('epoch') or not any(
                    key.startswith('throughput/') and value
                    for key, value in row.items()):
                continue
            epoch = _csv_number(path, line, 'epoch', row['epoch'])
            if not epoch.is_integer() or epoch < 0:
                raise ValueError(f"'{path}' line {line}: 'epoch' is "
                                 f"{_short(row['epoch'])}, not an epoch "
                                 f"number (a whole number >= 0)")
            record = records.setdefault(int(epoch), {
                'epoch': int(epoch), 'seeds_per_s': None,
                'batches_per_s': None, 'time': {}, 'loader_counts': {},
                'cache': {}})
            _check_count(path, len(records))
            for key, text in row.items():
                group, _, name = key.partition('/')
                if not text or group not in _CSV_GROUPS or (
                        group == 'cache' and name.count('/') < 2):
                    continue
                value = _csv_number(path, line, key, text)
                if group == 'throughput':
                    record[name] = value
                elif group == 'time':
                    record['time'][name] = value
                elif group == 'loader':
                    record['loader_counts'][name] = value
                else:
                    attr, tier, field = name.rsplit('/', 2)
                    record['cache'].setdefault(attr, {}).setdefault(
                        tier, {})[field] = value
    except csv.Error as error:  # the DictReader counts complete rows only
        raise ValueError(f"'{path}' line {reader.reader.line_num}: {error} "
                         f"(a damaged metrics file)") from None
    return [records[epoch] for epoch in sorted(records)]


Run = Tuple[Path, Records, List[Records]]


def _find_runs(logdir: Path) -> List[Run]:
    r"""``(run directory, per-epoch records, each rank's records)`` for
    every ``fastload_stats.json`` under :obj:`logdir`, and every
    ``metrics.csv`` with ``LoaderMonitor``'s columns in a directory without
    one."""
    runs: List[Run] = [(path.parent, *_read_json(path))
                       for path in sorted(logdir.rglob(STATS_FILENAME))]
    with_json = {run[0] for run in runs}
    for path in sorted(logdir.rglob(METRICS_CSV)):
        if path.parent not in with_json:
            records = _read_csv(path)
            if records:
                runs.append((path.parent, records, []))
    return [run for run in runs if run[1]]


def _new_figure(title: str) -> Tuple[Any, Any]:
    r"""A figure on its own Agg canvas (pyplot's global backend is left
    alone)."""
    figure = Figure(figsize=(7, 4), layout='constrained')
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    axes.set_title(title)
    axes.set_xlabel('epoch')
    return figure, axes


def _value(value: Optional[float]) -> float:
    return math.nan if value is None else value


def _plot_throughput(records: Records, run: str,
                     ranks: Sequence[Records] = ()) -> Any:
    r"""Seeds/s per epoch (batches/s where the batches had no
    ``batch_size``): all ranks together and, in a distributed run, each
    rank."""
    key, label = 'seeds_per_s', 'seed nodes / s'
    if all(r.get(key) is None for r in records):
        key, label = 'batches_per_s', 'batches / s'
    figure, axes = _new_figure(f'{run}: training throughput per epoch')
    lines = [('all ranks' if ranks else None, records)] + [
        (f'rank {index}', own) for index, own in enumerate(ranks)]
    if len({r['epoch'] for r in records}) == 1:  # a bar each: one point
        return _throughput_bars(figure, axes, lines, key, label)  # is no line
    for name, own in lines:
        axes.plot([r['epoch'] for r in own],
                  [_value(r.get(key)) for r in own],
                  'o-' if name in (None, 'all ranks') else 'o--',
                  label=name)
    axes.set_ylabel(label)
    axes.set_ylim(bottom=0)
    _epoch_axis(axes, records)
    if ranks:
        figure.legend(loc='outside right center')
    return figure


def _throughput_bars(figure: Any, axes: Any,
                     lines: List[Tuple[Optional[str], Records]], key: str,
                     label: str) -> Any:
    r"""One epoch's throughput: a bar (with its value) for all ranks
    and for each rank."""
    epoch = lines[0][1][0]['epoch']
    values = [_value(own[0].get(key)) for _, own in lines]
    bars = axes.bar(range(len(lines)), values, 0.6, color='tab:blue')
    axes.bar_label(bars, fmt='{:,.0f}')
    axes.set_xticks(range(len(lines)),
                    [name or 'this run' for name, _ in lines])
    axes.set_xlabel(f'epoch {epoch} (one epoch recorded)')
    axes.set_ylabel(label)
    return figure


def _epoch_axis(axes: Any, records: List[Dict[str, Any]]) -> None:
    r"""Whole epochs on the x axis (every one labelled, up to
    :data:`_LABELLED_EPOCHS`; a tick every few epochs beyond), half an epoch
    of margin."""
    epochs = sorted({r['epoch'] for r in records})
    axes.set_xlim(epochs[0] - 0.5, epochs[-1] + 0.5)
    if len(epochs) <= _LABELLED_EPOCHS:
        axes.set_xticks(epochs)


#: The most epochs whose every tick is labelled (more labels overlap, and
#: thousands take minutes to lay out).
_LABELLED_EPOCHS = 30


_TIER_ORDER = ('device', 'host', 'storage', 'remote', 'remote_disk')
#: One colour per tier, the same in every plot.
_TIER_COLOUR = {'device': 'tab:green', 'host': 'tab:blue',
                'storage': 'tab:orange', 'remote': 'tab:red',
                'remote_disk': 'tab:purple'}


def _tier_shares(counters: Dict[str, Dict[str, Any]]) -> Dict[str, float]:
    r"""Share of the requested rows each tier served, fastest first: from
    the rows each tier served (a cache's ``hits``, every row asked of
    storage and other ranks; other ranks' rows under ``remote``), or, where only hit ratios were logged (``metrics.csv``), a
    tier's hit ratio of what the faster tiers missed (storage serves the
    rest). ``served`` (rows this rank gave others) is not a tier of its
    reads."""
    counters = {t: c for t, c in counters.items() if t != 'served'}
    if counters and all(isinstance(c.get(k), (int, float))
                        for c in counters.values()
                        for k in ('hits', 'requests')):
        rows = {t: served_rows(t, c) for t, c in counters.items()}
        total = sum(rows.values())
        order = [t for t in _TIER_ORDER if t in counters] + [
            t for t in counters if t not in _TIER_ORDER]
        return {t: rows[t] / total if total else 0.0 for t in order}
    left, shares = 1.0, {}
    for tier in [t for t in _TIER_ORDER if t in counters] + [
            t for t in counters if t not in _TIER_ORDER]:
        ratio = counters[tier].get('hit_ratio')
        share = left * (1.0 if tier == 'storage' or ratio is None
                        else ratio)
        shares[tier] = share
        left -= share
    return shares


def _shown_attrs(records: List[Dict[str, Any]]) -> List[str]:
    r"""The attributes worth a bar: served by more than one tier, and
    (where bytes were counted) at least 5% of all bytes served (the
    feature matrices, not the labels and masks)."""
    tiers: Dict[str, set] = {}
    size: Dict[str, float] = {}
    for record in records:
        for attr, counters in record.get('cache', {}).items():
            tiers.setdefault(attr, set()).update(
                t for t in counters if t != 'served')
            size[attr] = size.get(attr, 0.0) + sum(
                c.get('bytes') or 0.0 for t, c in counters.items()
                if t != 'served')
    total = sum(size.values())
    return [attr for attr in tiers if len(tiers[attr]) > 1 and (
        not total or size[attr] >= 0.05 * total)]


def _plot_tier_share(records: Records, run: str,
                     ranks: Sequence[Records] = ()) -> Any:
    r"""Which tier served the rows: per epoch (and attribute worth showing;
    in a distributed run, per rank), the share of the requested rows each
    tier served, stacked to 1, one colour per tier."""
    attrs = _shown_attrs(records)
    if not attrs:
        return None
    figure, axes = _new_figure(f"{run}: which tier served the rows "
                               f"({', '.join(attrs)})")
    owners = [(f'r{i}', own) for i, own in enumerate(ranks)] or [
        ('', records)]
    groups = [(attr, name, own) for attr in attrs for name, own in owners]
    width = 0.8 / len(groups)
    seen = set()
    places = merge_places(records)
    for index, (attr, name, own) in enumerate(groups):
        x = [r['epoch'] + (index - (len(groups) - 1) / 2) * width
             for r in own]
        shares = [_tier_shares(r.get('cache', {}).get(attr, {}))
                  for r in own]
        bottom = [0.0] * len(own)
        for tier in dict.fromkeys(t for s in shares for t in s):
            heights = [s.get(tier, 0.0) for s in shares]
            axes.bar(x, heights, width * 0.95, bottom=bottom,
                     color=_TIER_COLOUR.get(tier),
                     label=None if tier in seen else tier_label(
                         tier, places.get(attr, {}).get(tier)))
            seen.add(tier)
            bottom = [b + h for b, h in zip(bottom, heights)]
        if len(groups) > 1:  # which bar is which
            tag = ' '.join(part for part in (
                attr if len(attrs) > 1 else '', name) if part)
            for position in x:
                axes.text(position, 1.01, tag, ha='center',
                          va='bottom', fontsize='small')
    axes.set_ylabel('share of requested rows')
    axes.set_ylim(0, 1.1)
    _epoch_axis(axes, records)
    figure.legend(loc='outside right center', title='tier')
    return figure


def _plot_time(records: Records, run: str,
               ranks: Sequence[Records] = ()) -> Any:
    r"""Per epoch, the training loop's ``model`` + ``waiting`` stacked (they
    add up to the epoch), and next to it one bar per loader stage with its
    busy time (``sampling``, ``feature_loading``, ...): the stages run
    concurrently with the loop and each other, so they are not stacked
    (sub-timings named ``<stage>.<part>`` are inside their stage); stages
    busy less than 0.5% of the epochs and idle time (:data:`_NOT_BUSY`)
    are left out."""
    keys = list(dict.fromkeys(key for r in records for key in r['time']))
    total = {key: sum(r['time'].get(key, 0.0) for r in records)
             for key in keys}
    consumer = [key for key in _CONSUMER_KEYS if key in keys]
    stages = [key for key in keys if key not in _CONSUMER_KEYS
              and key != 'epoch' and '.' not in key and total[key] > 0
              and key not in _NOT_BUSY
              and total[key] >= _IDLE * total.get('epoch', 0.0)]
    if not consumer and not stages:
        return None
    mean = f' (mean of {len(ranks)} ranks)' if ranks else ''
    figure, axes = _new_figure(f'{run}: where the time went per epoch'
                               f'{mean}')
    epochs = [r['epoch'] for r in records]
    groups = ([('training loop', consumer)] if consumer else []) + [
        ('busy', [stage]) for stage in stages]
    width = 0.8 / len(groups)
    for index, (name, group) in enumerate(groups):
        x = [e + (index - (len(groups) - 1) / 2) * width for e in epochs]
        bottom = [0.0] * len(records)
        for key in group:
            heights = [r['time'].get(key, 0.0) for r in records]
            axes.bar(x, heights, width * 0.95, bottom=bottom,
                     label=f'{key} ({name})')
            bottom = [b + h for b, h in zip(bottom, heights)]
    axes.set_ylabel('seconds')
    _epoch_axis(axes, records)
    figure.legend(loc='outside lower center', ncols=2)
    return figure


#: Stages busy for less than this share of the epochs are left out.
_IDLE = 0.005

#: Timings that are idle time, not a stage's work: the sampler paused by the
#: run-ahead scheduler while far enough ahead of the model.
_NOT_BUSY = ('throttled', )

_PLOTS = (('throughput.png', _plot_throughput),
          ('tier_share.png', _plot_tier_share),
          ('time_breakdown.png', _plot_time))


def make_report(logdir: PathLike,
                out_dir: Optional[PathLike] = None) -> List[Path]:
    r"""Plots every run under :obj:`logdir`: the ``fastload_stats.json``
    files :class:`~pyg_fastload.lightning.callbacks.LoaderMonitor` writes (e.g.
    ``lightning_logs/version_N/``, searched recursively) or, in a directory
    without one, Lightning's ``metrics.csv`` with its columns.

    Per run it writes ``throughput.png`` (seeds/s per epoch),
    ``tier_share.png`` (which tier served the rows: the share of the
    requested rows each tier served, other ranks' under ``remote``, for the
    attributes served by several tiers that carry at least 5% of the
    bytes) and ``time_breakdown.png`` (the training loop's model and
    waiting seconds stacked, and each loader stage's busy seconds beside
    them, stages busy less than 0.5% of the time left out); every title
    names the run (its path below :obj:`logdir`).  For a distributed run the throughput
    is drawn for all ranks together and for each rank, the tier shares per
    rank, and the times as the mean of the ranks.

    Args:
        logdir (str or os.PathLike): the log directory to search.
        out_dir (str or os.PathLike, optional): where to write; runs keep
            their path relative to :obj:`logdir` below it. (default: next
            to each run's file)

    Returns:
        List[pathlib.Path]: the PNG files written.

    Raises:
        ValueError: naming the file (and the field or line) of a stats or
            metrics file that is not a regular file, is larger than
            :data:`MAX_FILE_BYTES`, holds more than :data:`MAX_RECORDS`
            epoch records or is damaged; or naming :obj:`out_dir` where the
            plots cannot be written.
    """
    logdir = Path(logdir).expanduser()
    if not logdir.is_dir():
        raise FileNotFoundError(f"'logdir' {str(logdir)!r} is not a "
                                f"directory: pass the log directory of a "
                                f"run that used LoaderMonitor")
    out = None if out_dir is None else Path(out_dir).expanduser()
    if out is not None and out.exists() and not out.is_dir():
        raise ValueError(f"'out_dir' (--out) {str(out)!r} is a file, not a "
                         f"directory: pass a directory (made if missing)")
    runs = _find_runs(logdir)
    if not runs:
        raise FileNotFoundError(
            f"no '{STATS_FILENAME}' and no '{METRICS_CSV}' with "
            f"'throughput/...' columns under {str(logdir)!r}: train with "
            f"pyg_fastload.lightning.LoaderMonitor among the Trainer's "
            f"callbacks and pass its log directory (e.g. lightning_logs)")
    plotted = {run[0] for run in runs}
    for run_dir in sorted({path.parent for path in logdir.rglob(
            'hparams.yaml')} - plotted):  # Lightning's runs without stats
        warnings.warn(f"skipped {str(run_dir)!r}: no '{STATS_FILENAME}' "
                      f"(a fit stopped before its first training batch, or "
                      f"trained without LoaderMonitor)", stacklevel=2)
    written = []
    for run_dir, records, ranks in runs:
        target = run_dir
        if out is not None:
            target = out / run_dir.relative_to(logdir)
        label = str(run_dir.relative_to(logdir)) if run_dir != logdir \
            else run_dir.name
        written += _draw(records, ranks, label, target)
    return written


def plot_run(stats_file: PathLike) -> List[Path]:
    r"""Plots one run, its ``fastload_stats.json``, next to the file (as
    :func:`make_report` does for each run it finds); returns the PNG files
    written."""
    path = Path(stats_file)
    records, ranks = _read_json(path)
    return _draw(records, ranks, f'{path.parent.parent.name}/'
                 f'{path.parent.name}', path.parent)


def _draw(records: Records, ranks: List[Records], label: str,
          target: Path) -> List[Path]:
    r"""Draws :data:`_PLOTS` of one run into :obj:`target`."""
    written = []
    try:
        target.mkdir(parents=True, exist_ok=True)
        for name, plot in _PLOTS:
            figure = plot(records, label, ranks)
            if figure is not None:
                figure.savefig(target / name)
                written.append(target / name)
    except OSError as error:
        raise ValueError(f"cannot write the plots to {str(target)!r}: "
                         f"{error.strerror}; pass a writable directory "
                         f"as 'out_dir' (--out)") from None
    return written


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument('logdir',
                        help='log directory of runs trained with '
                        'LoaderMonitor (searched recursively)')
    parser.add_argument('--out', dest='out_dir', default=None,
                        help='write the plots here (default: next to each '
                        "run's stats file)")


def run(args: argparse.Namespace) -> List[Path]:
    r"""Runs ``pyg-fastload report``: prints the written files.  A log
    directory without stats, or a file it cannot read or write, exits
    with status 2 and a one-line message naming it."""
    try:
        with warnings.catch_warnings(record=True) as notes:
            warnings.simplefilter('always')
            paths = make_report(args.logdir, args.out_dir)
    except (FileNotFoundError, ValueError) as error:
        print(f'pyg-fastload report: error: {error}', file=sys.stderr)
        raise SystemExit(USAGE_EXIT) from None
    for note in notes:
        print(f'pyg-fastload report: {note.message}', file=sys.stderr)
    for path in paths:
        print(path)
    return paths
