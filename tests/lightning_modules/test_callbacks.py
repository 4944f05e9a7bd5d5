import csv
import json

import pytest
from pytorch_lightning.utilities import CombinedLoader

from pyg_fastload import FastNeighborLoader
from pyg_fastload.datasets import load_synthetic
from pyg_fastload.lightning.callbacks import (
    STATS_FILENAME,
    STATS_FORMAT,
    LoaderMonitor,
    _leaf_loaders,
    _timed_loader,
)

from .runs import Loaders, TinyGNN, trainer


def test_records_and_json_per_epoch(tiered_run):
    monitor, graph = tiered_run['monitor'], tiered_run['graph']
    records = monitor.records
    assert [r['epoch'] for r in records] == [0, 1]
    num_train = int(graph.train_mask.sum())
    for record in records:
        assert record['seeds'] == num_train and record['batches'] == 4
        assert record['seeds_per_s'] > 0 and record['batches_per_s'] > 0
        assert record['loader'] == 'FastNeighborLoader'
        assert {'sampling', 'feature_loading', 'waiting', 'model',
                'epoch'} <= set(record['time'])
        assert record['loader_counts']['batches'] == 4
        tiers = record['cache']['x']
        assert set(tiers) == {'device', 'host', 'storage'}
        for tier in ('device', 'host'):  # caches; storage serves all
            assert 0 <= tiers[tier]['hit_ratio'] <= 1
        assert tiers['storage']['hit_ratio'] is None
        assert tiers['device']['hit_ratio'] > 0
    # Validation ran 4 times on 2 loaders; its gathers are not counted.
    rows = tiered_run['module'].train_rows
    assert len(rows) == 8
    assert sum(r['cache']['y']['storage']['requests']
               for r in records) == sum(rows)

    stats = json.loads((tiered_run['log_dir'] / STATS_FILENAME).read_text())
    assert stats['format'] == STATS_FORMAT
    assert stats['epochs'] == json.loads(json.dumps(records))
    summary = monitor.summary()
    assert stats['summary'] == json.loads(json.dumps(summary))
    assert summary['epochs'] == 2 and summary['seeds_per_s'] > 0
    assert 0 < summary['hit_ratio']['x']['device'] < 1
    assert summary['time_share_pct']['model'] > 0
    assert 'LoaderMonitor: 2 epoch(s)' in tiered_run['stdout']
    # storage reads: the rows asked of storage, and what the device read
    read = summary['storage_read']['x']
    assert read['rows'] == sum(r['cache']['x']['storage']['requests']
                               for r in records) > 0
    assert read['disk_bytes'] == sum(
        r['cache']['x']['storage']['disk_bytes'] for r in records)
    assert 'rows asked of storage' in tiered_run['stdout']
    # the process's allocated memory holds at least its two caches, and
    # never more than its peak resident size
    entry = tiered_run['stores'][0]._entries[(None, 'x')]
    caches = entry.host.nbytes() + entry.device.nbytes()
    from pyg_fastload.storage import process_memory
    for record in records:
        assert caches <= record['peak_anon_bytes'] <= \
            process_memory()['peak']
    assert summary['peak_anon_bytes'] == max(r['peak_anon_bytes']
                                             for r in records)


def test_metrics_reach_the_csv_logger(tiered_run):
    path = tiered_run['log_dir'] / 'metrics.csv'
    with open(path, newline='') as f:
        rows = list(csv.DictReader(f))
    epoch_rows = [r for r in rows if r['throughput/seeds_per_s']]
    assert [int(r['epoch']) for r in epoch_rows] == [0, 1]
    for key in ('throughput/batches_per_s', 'time/sampling',
                'time/feature_loading', 'time/waiting', 'time/model',
                'time/epoch', 'loader/batches', 'cache/x/device/hit_ratio',
                'cache/x/host/bytes', 'cache/x/storage/bytes'):
        assert all(r[key] for r in epoch_rows), key
    first = tiered_run['monitor'].records[0]
    assert float(epoch_rows[0]['cache/x/device/hit_ratio']) == pytest.approx(
        first['cache']['x']['device']['hit_ratio'], rel=1e-5)
    assert not any('seeds/s' in key for key in rows[0])  # progress bar only


def test_no_logger_early_stop_and_fast_dev_run(tmp_path):
    graph = load_synthetic('tiny', root=tmp_path / 'cache', progress=False)
    data = graph.to_data()
    loaders = Loaders(data, data.train_mask, data.val_mask, 128)

    monitor = LoaderMonitor(print_summary=False)
    trainer(max_epochs=5, max_steps=3, logger=False, callbacks=[monitor],
            default_root_dir=tmp_path / 'plain').fit(TinyGNN(),
                                                     datamodule=loaders)
    [record] = monitor.records  # stopped inside the first epoch
    assert record['batches'] == 3 and record['seeds'] == 3 * 128
    assert record['cache'] == {} and record['time']['epoch'] > 0
    stats = json.loads((tmp_path / 'plain' / STATS_FILENAME).read_text())
    assert len(stats['epochs']) == 1

    monitor = LoaderMonitor(print_summary=False)
    trainer(fast_dev_run=2, callbacks=[monitor],
            default_root_dir=tmp_path / 'dev').fit(TinyGNN(),
                                                   datamodule=loaders)
    assert [r['batches'] for r in monitor.records] == [2]
    assert not (tmp_path / 'dev').exists()  # debugging runs write nothing


@pytest.mark.parametrize('pipeline', ['auto', False])
def test_pipeline_auto_says_its_first_epoch_is_slower(pipeline, tmp_path,
                                                      capsys):
    graph = load_synthetic('tiny', root=tmp_path / 'cache', progress=False)
    data = graph.to_data()
    loaders = Loaders(data, data.train_mask, data.val_mask, 128)
    loaders.train_dataloader = lambda: FastNeighborLoader(
        data, [4, 4], input_nodes=data.train_mask, batch_size=128,
        shuffle=True, pipeline=pipeline)
    trainer(max_epochs=3, logger=False, limit_val_batches=0,
            callbacks=[LoaderMonitor(filename=None)],
            default_root_dir=tmp_path).fit(TinyGNN(), datamodule=loaders)
    said = [line for line in capsys.readouterr().out.splitlines()
            if "pipeline 'auto'" in line]
    if pipeline == 'auto':  # once, before the first epoch: not every epoch
        assert said == ["pyg-fastload: pipeline 'auto' runs this epoch's "
                        "first batches both ways (in the training loop, "
                        "then in the loader's threads) and keeps the "
                        "faster, so this epoch is slower than the next "
                        "ones: time a later epoch, or set "
                        "data.pipeline_settings.pipeline true or false"]
    else:
        assert said == []


def test_finds_the_loader_inside_wrappers(graph):
    loader = FastNeighborLoader(graph, [2], batch_size=50)

    class Wrapper:
        def __init__(self, loader):
            self.loader = loader

    for wrapped in (loader, [loader], {'nodes': loader},
                    CombinedLoader({'nodes': Wrapper(loader)}, 'min_size')):
        assert _timed_loader(list(_leaf_loaders(wrapped))) is loader
    assert _timed_loader(list(_leaf_loaders([range(3)]))) is None


@pytest.mark.parametrize('kwargs', [{'smoothing': 1.0}, {'filename': 'a/b'}])
def test_rejects_bad_arguments(kwargs):
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        LoaderMonitor(**kwargs)


def test_the_summary_names_where_each_tier_lives(tiered_run):
    r"""A CPU run's summary: each tier named with where its rows live (the
    device cache, in CPU memory, is named an in-memory cache: not 'device
    cache (CPU memory)'; storage a memory-mapped file), hit ratios
    of the caches only, and the rows storage served as many as the rows
    asked of it."""
    text = tiered_run['stdout']
    summary = tiered_run['monitor'].summary()
    assert summary['places']['x'] == {'device': 'CPU memory',
                                      'host': 'CPU memory',
                                      'storage': 'file, memory-mapped'}
    lines = text.splitlines()

    def table(title):
        at = lines.index(next(line for line in lines
                              if line.startswith(title)))
        header = [c.strip() for c in lines[at][len(title):].split('  ')
                  if c.strip()]
        return header, lines[at + 1].split()[1:]
    header, _ = table('cache hit ratio')
    assert header == ['in-memory cache (device_budget)',
                      'host buffer (CPU memory)']
    header, cells = table('rows served (bytes)')
    assert header[-1] == 'storage (file, memory-mapped)'
    storage = summary['storage_read']['x']['rows']
    assert cells[-3] == f'{storage:,}'
    assert summary['rows_by_tier']['x']['storage']['rows'] == storage
    assert f'x: {storage:,} rows asked of storage' in text
    assert 'disk)' not in text
