import argparse
import re
import shutil

import pytest

from pyg_fastload.lightning import report


PNG_MAGIC = b'\x89PNG\r\n\x1a\n'
PLOTS = {'throughput.png', 'tier_share.png', 'time_breakdown.png'}


def assert_pngs(paths, directory):
    assert {path.name for path in paths} == PLOTS
    for path in paths:
        assert path.parent == directory
        assert path.read_bytes()[:8] == PNG_MAGIC
        assert path.stat().st_size > 1000


def test_report_from_stats_json(tiered_run, tmp_path):
    run = tiered_run
    paths = report.make_report(run['logs'], out_dir=tmp_path)
    relative = run['log_dir'].relative_to(run['logs'])
    assert_pngs(paths, tmp_path / relative)


def test_report_falls_back_to_metrics_csv(tiered_run, tmp_path):
    run = tiered_run
    shutil.copy(run['log_dir'] / 'metrics.csv', tmp_path)
    records = report._read_csv(tmp_path / 'metrics.csv')
    assert [r['epoch'] for r in records] == [0, 1]
    assert records[1]['cache']['x']['device']['hit_ratio'] == pytest.approx(
        run['monitor'].records[1]['cache']['x']['device']['hit_ratio'],
        rel=1e-5)
    assert_pngs(report.make_report(tmp_path), tmp_path)


def test_tier_shares_add_up_and_storage_is_not_a_hit_ratio():
    shares = report._tier_shares({
        'host': {'hit_ratio': 0.5}, 'device': {'hit_ratio': 0.2},
        'storage': {'hit_ratio': 1.0}})
    assert list(shares) == ['device', 'host', 'storage']
    assert shares['device'] == pytest.approx(0.2)
    assert shares['host'] == pytest.approx(0.4)  # half of the 0.8 missed
    assert shares['storage'] == pytest.approx(0.4)
    assert sum(shares.values()) == pytest.approx(1.0)


def test_cli_prints_paths_and_fails_clearly(tiered_run, tmp_path,
                                            capsys):
    parser = argparse.ArgumentParser()
    report.add_arguments(parser)
    run = tiered_run
    paths = report.run(parser.parse_args(
        [str(run['logs']), '--out', str(tmp_path / 'plots')]))
    assert capsys.readouterr().out.split() == [str(p) for p in paths]

    empty = tmp_path / 'empty'
    (empty / 'version_0').mkdir(parents=True)
    (empty / 'version_0' / 'metrics.csv').write_text('epoch,step\n0,1\n')
    with pytest.raises(FileNotFoundError, match="fastload_stats.json.*empty"):
        report.make_report(empty)
    with pytest.raises(SystemExit) as info:
        report.run(parser.parse_args([str(tmp_path / 'missing')]))
    assert info.value.code == 2
    assert re.fullmatch("pyg-fastload report: error: 'logdir' .*missing' "
                        "is not a directory.*\n", capsys.readouterr().err)


@pytest.mark.reliability(
    fault="a malformed `fastload_stats.json` given to `pyg-fastload report`",
    behaviour="a one-line error naming the file and the field (was: a raw "
              "traceback)")
def test_a_malformed_stats_file_is_named(tmp_path, capsys):
    import json
    run = tmp_path / 'logs' / 'version_0'
    run.mkdir(parents=True)
    stats = run / 'fastload_stats.json'
    parser = argparse.ArgumentParser()
    report.add_arguments(parser)
    for epochs, match in (
            ('many', "'epochs' is not a list of records"),
            ([{'epoch': 0, 'time': {}, 'seeds_per_s': 'fast'}],
             "epoch record 0: 'seeds_per_s' is 'fast', not a finite "
             "number")):
        stats.write_text(json.dumps({'format': report.STATS_FORMAT,
                                     'epochs': epochs}))
        with pytest.raises(SystemExit) as info:
            report.run(parser.parse_args([str(tmp_path / 'logs')]))
        assert info.value.code == 2
        assert capsys.readouterr().err.startswith(
            f"pyg-fastload report: error: '{stats}': {match}")


def _dsp_like_records():
    def tiers(host, storage, remote):
        return {'host': {'requests': host + storage, 'hits': host,
                         'bytes': host * 400.0},
                'storage': {'requests': storage, 'hits': storage,
                            'bytes': storage * 400.0},
                'remote': {'requests': remote, 'hits': remote,
                           'bytes': remote * 400.0},
                'served': {'requests': 0, 'hits': 0, 'bytes': 0}}
    cache = {'x': tiers(300, 500, 200)}
    for attr in ('y', 'train_mask', 'val_mask'):  # small, storage + remote
        cache[attr] = {'storage': {'requests': 800, 'hits': 800,
                                   'bytes': 800.0},
                       'remote': {'requests': 200, 'hits': 200,
                                  'bytes': 200.0}}
    return [{'epoch': 0, 'cache': cache,
             'places': {'x': {'host': 'CPU memory',
                              'storage': 'file, memory-mapped',
                              'remote': 'sent by their owners'}},
             'time': {'sampling': 1.0, 'transfer': 0.0, 'model': 2.0,
                      'waiting': 0.5, 'epoch': 2.5, 'throttled': 1.5}}]


@pytest.mark.reliability(
    fault='tier_share.png with a legend entry per attribute and tier in '
          'repeated colours, every label and mask at 100% storage, remote '
          'rows left out, titles that never name the run; an empty '
          '"transfer" bar',
    behaviour="one legend entry per tier (remote included) in fixed "
              "colours, only the feature matrix shown, shares from the rows "
              "each tier served, where each tier's rows live, the run in "
              "every title; idle stages and the paused sampler left out")
def test_plots_answer_one_question_each_and_name_the_run():
    records = _dsp_like_records()
    shares = report._tier_shares(records[0]['cache']['x'])
    assert shares == pytest.approx({'host': 0.3, 'storage': 0.5,
                                    'remote': 0.2})
    figure = report._plot_tier_share(records, 'dsp/version_0')
    [legend] = figure.legends
    assert [t.get_text() for t in legend.get_texts()] == [
        'host buffer (CPU memory)', 'storage (file, memory-mapped)',
        'other ranks (sent by their owners)']
    [axes] = figure.axes
    assert axes.get_title() == ('dsp/version_0: which tier served the '
                                'rows (x)')
    assert axes.get_xlim() == (-0.5, 0.5)
    time = report._plot_time(records, 'dsp/version_0')
    labels = [t.get_text() for t in time.legends[0].get_texts()]
    assert not any('transfer' in label for label in labels)
    # the sampler paused ahead of the model is idle time, not a stage's
    assert labels == ['model (training loop)', 'waiting (training loop)',
                      'sampling (busy)']
    assert time.axes[0].get_title().startswith('dsp/version_0: ')
    assert report._plot_throughput(
        [{'epoch': 0, 'seeds_per_s': 10.0}], 'run').axes[0].get_title() == \
        'run: training throughput per epoch'


def _rank_records(rank):
    record = _dsp_like_records()[0]
    record.update(seeds_per_s=100.0 * (rank + 1), batches_per_s=1.0)
    return [record]


@pytest.mark.reliability(
    fault='a distributed run plotted from rank 0 alone',
    behaviour='the throughput of all ranks and of each rank (bars for one '
              'epoch, lines for more), the tier shares per rank; a damaged '
              'per-rank list is named')
def test_a_distributed_run_is_plotted_per_rank(tmp_path):
    import json
    ranks = [_rank_records(0), _rank_records(1)]
    both = _rank_records(0)
    both[0]['seeds_per_s'] = 300.0
    # one epoch: a bar each, named on the axis, with its value
    figure = report._plot_throughput(both, 'run', ranks)
    [axes] = figure.axes
    assert [t.get_text() for t in axes.get_xticklabels()] == [
        'all ranks', 'rank 0', 'rank 1']
    assert [bar.get_height() for bar in axes.patches] == [300.0, 100.0,
                                                          200.0]
    assert [t.get_text() for t in axes.texts] == ['300', '100', '200']
    # two epochs: a line each
    second = [dict(r[0], epoch=1) for r in (both, *ranks)]
    figure = report._plot_throughput(both + second[:1], 'run', [
        own + [again] for own, again in zip(ranks, second[1:])])
    assert [t.get_text() for t in figure.legends[0].get_texts()] == [
        'all ranks', 'rank 0', 'rank 1']
    assert [list(line.get_ydata()) for line in figure.axes[0].lines] == [
        [300.0, 300.0], [100.0, 100.0], [200.0, 200.0]]
    shares = report._plot_tier_share(both, 'run', ranks)
    assert sorted(t.get_text() for t in shares.axes[0].texts) == [
        'r0', 'r1']
    assert len(shares.axes[0].patches) == 2 * 3  # 3 tiers per rank
    assert report._plot_time(both, 'run', ranks).axes[0].get_title() == \
        'run: where the time went per epoch (mean of 2 ranks)'

    run = tmp_path / 'logs' / 'version_0'
    run.mkdir(parents=True)
    stats = {'format': report.STATS_FORMAT, 'epochs': both,
             'ranks': [{'rank': i, 'epochs': own}
                       for i, own in enumerate(ranks)]}
    (run / 'fastload_stats.json').write_text(json.dumps(stats))
    assert {p.name for p in report.make_report(tmp_path / 'logs')} == PLOTS
    stats['ranks'][1]['epochs'] = [{'epoch': 0, 'time': {},
                                    'seeds_per_s': 'fast'}]
    (run / 'fastload_stats.json').write_text(json.dumps(stats))
    with pytest.raises(ValueError, match=r"ranks\[1\]\.epoch record 0: "
                       "'seeds_per_s' is 'fast'"):
        report.make_report(tmp_path / 'logs')
