r"""``pyg-fastload report LOGDIR``: plots what
:class:`~pyg_fastload.lightning.callbacks.LoaderMonitor` recorded (throughput,
cache hit ratios and the loader's time breakdown per epoch) as PNG files."""
from __future__ import annotations

import argparse
import csv
import json
import math
import os
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from .callbacks import STATS_FILENAME, STATS_FORMAT
from .summary_text import TIER_LABEL

__all__ = ['make_report', 'add_arguments', 'run']

PathLike = Union[str, os.PathLike]

#: The Lightning ``CSVLogger`` file read where no JSON file was written.
METRICS_CSV = 'metrics.csv'

#: The ``time_breakdown`` entries of the consumer (the training loop): they
#: add up to the epoch and form the first stacked bar.
_CONSUMER_KEYS = ('model', 'waiting')


#: The record fields that hold text (every other leaf is a number or null).
_TEXT_KEYS = ('loader', )


def _checked_epochs(path: Path, epochs: Any,
                    where: str = '') -> List[Dict[str, Any]]:
    r""":obj:`epochs` if it is a list of records whose leaves are numbers
    (text where text belongs); a one-line error naming the file and key
    otherwise."""
    if not isinstance(epochs, list) or not all(
            isinstance(e, dict) for e in epochs):
        raise ValueError(f"'{path}': '{where}epochs' is not a list of "
                         f"records (a damaged or hand-edited stats file)")
    for i, epoch in enumerate(epochs):
        bad = _not_a_number({k: v for k, v in epoch.items()
                             if k not in _TEXT_KEYS})
        if bad is not None:
            raise ValueError(f"'{path}': {where}epoch record {i}: "
                             f"'{bad[0]}' is {bad[1]!r}, not a number (a "
                             f"damaged or hand-edited stats file)")
    return epochs


Records = List[Dict[str, Any]]


def _read_json(path: Path) -> Tuple[Records, List[Records]]:
    r"""The all-ranks records of a stats file and, for a distributed run,
    each rank's (empty list otherwise)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise ValueError(f"cannot read '{path}': {error}") from None
    if not isinstance(data, dict) or data.get('format') != STATS_FORMAT:
        raise ValueError(f"'{path}' is not a LoaderMonitor stats file (no "
                         f"\"format\": \"{STATS_FORMAT}\")")
    epochs = _checked_epochs(path, data.get('epochs'))
    ranks = data.get('ranks', [])
    if not isinstance(ranks, list) or not all(
            isinstance(r, dict) for r in ranks):
        raise ValueError(f"'{path}': 'ranks' is not a list of per-rank "
                         f"records (a damaged or hand-edited stats file)")
    return epochs, [_checked_epochs(path, r.get('epochs'),
                                    f'ranks[{i}].')
                    for i, r in enumerate(ranks)]


def _not_a_number(value: Any, key: str = '') -> Optional[Tuple[str, Any]]:
    r"""``(key, value)`` of the first leaf of :obj:`value` (nested dicts)
    that is neither a number nor null."""
    if isinstance(value, dict):
        for name, item in value.items():
            found = _not_a_number(item, f'{key}.{name}' if key else name)
            if found is not None:
                return found
        return None
    if value is None or (isinstance(value, (int, float))):
        return None
    return key, value


def _float(text: str) -> Optional[float]:
    return float(text) if text not in ('', None) else None


def _read_csv(path: Path) -> List[Dict[str, Any]]:
    r"""Per-epoch records from a ``metrics.csv`` with ``LoaderMonitor``'s
    columns (empty if it has none); rows of one epoch are merged."""
    with open(path, newline='') as f:
        rows = list(csv.DictReader(f))
    records: Dict[int, Dict[str, Any]] = {}
    for row in rows:
        if not row.get('epoch') or not any(
                key.startswith('throughput/') and value
                for key, value in row.items()):
            continue
        epoch = int(float(row['epoch']))
        record = records.setdefault(epoch, {
            'epoch': epoch, 'seeds_per_s': None, 'batches_per_s': None,
            'time': {}, 'loader_counts': {}, 'cache': {}})
        for key, text in row.items():
            value = _float(text)
            if value is None:
                continue
            group, _, name = key.partition('/')
            if group == 'throughput':
                record[name] = value
            elif group == 'time':
                record['time'][name] = value
            elif group == 'loader':
                record['loader_counts'][name] = value
            elif group == 'cache' and name.count('/') >= 2:
                attr, tier, field = name.rsplit('/', 2)
                record['cache'].setdefault(attr, {}).setdefault(
                    tier, {})[field] = value
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
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator
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


def _epoch_axis(axes: Any, records: List[Dict[str, Any]]) -> None:
    r"""Whole epochs on the x axis, half an epoch of margin."""
    epochs = [r['epoch'] for r in records]
    axes.set_xlim(min(epochs) - 0.5, max(epochs) + 0.5)
    axes.set_xticks(sorted(set(epochs)))


_TIER_ORDER = ('device', 'host', 'storage', 'remote', 'remote_disk')
#: One colour per tier, the same in every plot.
_TIER_COLOUR = {'device': 'tab:green', 'host': 'tab:blue',
                'storage': 'tab:orange', 'remote': 'tab:red',
                'remote_disk': 'tab:purple'}


def _tier_shares(counters: Dict[str, Dict[str, Any]]) -> Dict[str, float]:
    r"""Share of the requested rows each tier served, fastest first: from
    the rows each tier served (``hits``; other ranks' rows under
    ``remote``), or, where only hit ratios were logged (``metrics.csv``), a
    tier's hit ratio of what the faster tiers missed (storage serves the
    rest). ``served`` (rows this rank gave others) is not a tier of its
    reads."""
    counters = {t: c for t, c in counters.items() if t != 'served'}
    if counters and all(isinstance(c.get('hits'), (int, float))
                        for c in counters.values()):
        total = sum(c['hits'] for c in counters.values())
        order = [t for t in _TIER_ORDER if t in counters] + [
            t for t in counters if t not in _TIER_ORDER]
        return {t: counters[t]['hits'] / total if total else 0.0
                for t in order}
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
                     label=None if tier in seen else TIER_LABEL.get(
                         tier, tier))
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
    busy less than 0.5% of the epochs are left out."""
    keys = list(dict.fromkeys(key for r in records for key in r['time']))
    total = {key: sum(r['time'].get(key, 0.0) for r in records)
             for key in keys}
    consumer = [key for key in _CONSUMER_KEYS if key in keys]
    stages = [key for key in keys if key not in _CONSUMER_KEYS
              and key != 'epoch' and '.' not in key and total[key] > 0
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
                     label=_STAGE_LABEL.get(key, f'{key} ({name})'))
            bottom = [b + h for b, h in zip(bottom, heights)]
    axes.set_ylabel('seconds')
    _epoch_axis(axes, records)
    figure.legend(loc='outside lower center', ncols=2)
    return figure


#: Stages busy for less than this share of the epochs are left out.
_IDLE = 0.005

#: Legend entries that need more than the key.
_STAGE_LABEL = {'throttled': 'throttled (sampler held back by the '
                             'run-ahead scheduler)'}

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
    """
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise ImportError("make_report needs matplotlib: pip install "
                          "matplotlib") from None
    logdir = Path(logdir).expanduser()
    if not logdir.is_dir():
        raise FileNotFoundError(f"'logdir' {str(logdir)!r} is not a "
                                f"directory: pass the log directory of a "
                                f"run that used LoaderMonitor")
    runs = _find_runs(logdir)
    if not runs:
        raise FileNotFoundError(
            f"no '{STATS_FILENAME}' and no '{METRICS_CSV}' with "
            f"'throughput/...' columns under {str(logdir)!r}: train with "
            f"pyg_fastload.lightning.LoaderMonitor among the Trainer's "
            f"callbacks and pass its log directory (e.g. lightning_logs)")
    written = []
    for run_dir, records, ranks in runs:
        target = run_dir
        if out_dir is not None:
            target = Path(out_dir).expanduser() / run_dir.relative_to(logdir)
        target.mkdir(parents=True, exist_ok=True)
        label = str(run_dir.relative_to(logdir)) if run_dir != logdir \
            else run_dir.name
        for name, plot in _PLOTS:
            figure = plot(records, label, ranks)
            if figure is not None:
                figure.savefig(target / name)
                written.append(target / name)
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
    directory without stats exits with a one-line message."""
    try:
        paths = make_report(args.logdir, args.out_dir)
    except (FileNotFoundError, ValueError) as error:
        raise SystemExit(f'pyg-fastload report: error: {error}') from None
    for path in paths:
        print(path)
    return paths
