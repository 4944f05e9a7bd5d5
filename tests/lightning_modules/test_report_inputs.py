import argparse
import json
import os

import pytest

from pyg_fastload.lightning import report

from ..distributed.ranks import run_command


def record(epoch, **fields):
    r"""An epoch record of the form ``LoaderMonitor`` writes."""
    return {'epoch': epoch, 'seeds_per_s': 100.0 + epoch,
            'batches_per_s': 2.0, 'loader': 'FastNeighborLoader',
            'time': {'model': 1.0, 'waiting': 0.5, 'sampling': 0.8,
                     'epoch': 1.5},
            'cache': {'x': {'device': {'hits': 30, 'bytes': 120.0},
                            'storage': {'hits': 70, 'bytes': 280.0}}},
            **fields}


def stats_run(root, text):
    r"""A log directory with one run whose stats file holds :obj:`text`."""
    run = root / 'logs' / 'version_0'
    run.mkdir(parents=True)
    (run / report.STATS_FILENAME).write_text(text)
    return root / 'logs', run / report.STATS_FILENAME


def stats_text(epochs):
    return json.dumps({'format': report.STATS_FORMAT, 'epochs': epochs})


def run_report(capsys, *words):
    r"""``(exit status, stderr)`` of ``pyg-fastload report WORDS``."""
    parser = argparse.ArgumentParser()
    report.add_arguments(parser)
    with pytest.raises(SystemExit) as info:
        report.run(parser.parse_args([str(w) for w in words]))
    return info.value.code, capsys.readouterr().err


def assert_one_line(status, err, *parts):
    assert status == 2
    assert err.startswith('pyg-fastload report: error: ')
    assert err.count('\n') == 1 and len(err) < 400, err
    for part in parts:
        assert part in err, err


@pytest.mark.reliability(
    fault='a FIFO or `/dev/zero` named `fastload_stats.json` given to '
          '`pyg-fastload report`',
    behaviour='exit status 2 and one line naming the file, not a regular '
              'file (was: a hang on the FIFO, reading `/dev/zero` until '
              'memory runs out)')
def test_only_regular_files_are_read(tmp_path, capsys):
    logs = tmp_path / 'fifo'
    (logs / 'version_0').mkdir(parents=True)
    fifo = logs / 'version_0' / report.STATS_FILENAME
    os.mkfifo(fifo)
    done = run_command(['report', str(logs)])  # a hang ends at a timeout
    assert_one_line(done.returncode, done.stderr, f"'{fifo}'",
                    'not a regular file')

    logs = tmp_path / 'zero'
    (logs / 'version_0').mkdir(parents=True)
    zero = logs / 'version_0' / report.STATS_FILENAME
    zero.symlink_to('/dev/zero')
    assert_one_line(*run_report(capsys, logs), f"'{zero}'",
                    'not a regular file')
    # a regular file beside them is plotted
    logs, _ = stats_run(tmp_path / 'good', stats_text([record(0),
                                                       record(1)]))
    assert {p.name for p in report.make_report(logs)} == {
        'throughput.png', 'tier_share.png', 'time_breakdown.png'}


@pytest.mark.reliability(
    fault='a `fastload_stats.json` of 200,000 epoch records, or larger '
          'than 64 MiB, given to `pyg-fastload report`',
    behaviour='exit status 2 and one line naming the file, its count or '
              'size and the bound, before anything is plotted (was: '
              'minutes of plotting without a bound)')
def test_the_records_and_bytes_read_are_bounded(tmp_path, capsys):
    many = [{'epoch': i, 'time': {}} for i in range(200_000)]
    logs, stats = stats_run(tmp_path / 'many', stats_text(many))
    assert_one_line(*run_report(capsys, logs), f"'{stats}'",
                    f'holds 200,000 epoch records, more than the '
                    f'{report.MAX_RECORDS:,} a report plots')
    assert not list(logs.rglob('*.png'))

    logs, stats = stats_run(tmp_path / 'large', '')
    os.truncate(stats, report.MAX_FILE_BYTES + 2**20)  # sparse: no disk
    assert_one_line(*run_report(capsys, logs), f"'{stats}' is 65.0 MiB",
                    'more than the 64.0 MiB a report reads')

    logs, stats = stats_run(tmp_path / 'csv', '')
    stats.unlink()
    rows = ''.join(f'{i},{i},10.0\n' for i in range(report.MAX_RECORDS + 1))
    (stats.parent / 'metrics.csv').write_text(
        'epoch,step,throughput/seeds_per_s\n' + rows)
    assert_one_line(*run_report(capsys, logs), 'metrics.csv',
                    f'holds {report.MAX_RECORDS + 1:,} epoch records')


@pytest.mark.reliability(
    fault='a `fastload_stats.json` nested 100,000 deep, with `epoch` '
          'infinite, 1e30 (a float, or a whole number beyond 64 bits) or a '
          'number beyond any float; a `metrics.csv` with '
          '`epoch` inf, a 200 KB field or more fields than columns (given '
          'to `pyg-fastload report`)',
    behaviour='exit status 2 and one line naming the file and the field or '
              'line (was: RecursionError, OverflowError, csv.Error or, for a '
              'whole-number epoch of 1e30, numpy TypeError tracebacks, or a '
              'matplotlib message naming neither)')
@pytest.mark.parametrize('name, text, parts', [
    ('fastload_stats.json', '{"epochs": ' + '[' * 100_000 + ']' * 100_000
     + '}', ['nests its values deeper than a stats file']),
    ('fastload_stats.json', stats_text([record(0, cache={'x': 5})]),
     ["epoch record 0: 'cache.x' is 5, not a dict"]),
    ('fastload_stats.json', stats_text([record(0), record(1)]).replace(
        '"epoch": 1,', '"epoch": Infinity,'),
     ["epoch record 1: 'epoch' is inf, not an epoch number"]),
    ('fastload_stats.json', stats_text([record(0), record(1)]).replace(
        '"epoch": 1,', '"epoch": 1e30,'),
     ["epoch record 1: 'epoch' is 1e+30, not an epoch number"]),
    ('fastload_stats.json', stats_text([record(0), record(1)]).replace(
        '"epoch": 1,', '"epoch": 1' + '0' * 30 + ','),
     ["epoch record 1: 'epoch' is 1" + '0' * 30 + ", not an epoch number"]),
    ('fastload_stats.json', stats_text([record(0)]).replace(
        '"seeds_per_s": 100.0', '"seeds_per_s": 1' + '0' * 30),
     ["'seeds_per_s' is 1" + '0' * 30, 'not a finite number']),
    ('fastload_stats.json', stats_text([record(0)]).replace(
        '"seeds_per_s": 100.0', '"seeds_per_s": 1' + '0' * 400),
     ["'seeds_per_s' is 1000000", 'not a finite number']),
    ('metrics.csv', 'epoch,step,throughput/seeds_per_s\n0,1,5.0\ninf,2,5.0\n',
     ["line 3: 'epoch' is 'inf', not a finite number"]),
    ('metrics.csv', 'epoch,step,throughput/seeds_per_s\n0,1,"'
     + 'x' * 200_000 + '"\n', ['line 2: field larger than field limit']),
    ('metrics.csv', 'epoch,step,throughput/seeds_per_s\n0,1,5.0,7\n',
     ["line 2: more fields than the header's 3 columns"]),
])
def test_a_damaged_file_is_named_with_its_field(tmp_path, capsys, name,
                                                text, parts):
    run = tmp_path / 'logs' / 'version_0'
    run.mkdir(parents=True)
    (run / name).write_text(text)
    assert_one_line(*run_report(capsys, tmp_path / 'logs'),
                    f"'{run / name}'", *parts)


def test_unused_metrics_columns_may_hold_anything(tmp_path):
    run = tmp_path / 'logs' / 'version_0'
    run.mkdir(parents=True)
    (run / 'metrics.csv').write_text(
        'epoch,step,train_loss,throughput/seeds_per_s,time/model\n'
        '0,1,nan,5.0,1.0\n1,2,inf,6.0,1.0\n')
    assert [r['seeds_per_s'] for r in report._read_csv(
        run / 'metrics.csv')] == [5.0, 6.0]


@pytest.mark.reliability(
    fault='`pyg-fastload report --out` naming a file, or a directory that '
          'cannot be written',
    behaviour='exit status 2 and one line naming it (was: a '
              'FileExistsError traceback)')
def test_out_naming_a_file_is_refused(tmp_path, capsys):
    logs, _ = stats_run(tmp_path, stats_text([record(0)]))
    out = tmp_path / 'plots.png'
    out.write_bytes(b'')
    assert_one_line(*run_report(capsys, logs, '--out', out),
                    f"'out_dir' (--out) '{out}' is a file")
    assert out.read_bytes() == b''
    assert_one_line(*run_report(capsys, logs, '--out', out / 'sub'),
                    f"cannot write the plots to '{out / 'sub'}", "--out")
