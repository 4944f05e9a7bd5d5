import contextlib
import csv
import io
import json
from pathlib import Path
from typing import Any, Dict, List

import pytest
import pytorch_lightning as pl
import torch
import torch.nn.functional as F
from pytorch_lightning.loggers import CSVLogger
from pytorch_lightning.utilities import CombinedLoader
from torch_geometric.nn import GraphSAGE

from pyg_fastload.lightning.callbacks import (
    STATS_FILENAME,
    STATS_FORMAT,
    LoaderMonitor,
    _leaf_loaders,
    _timed_loader,
)
from pyg_fastload import FastNeighborLoader, open_dataset
from pyg_fastload.datasets import load_synthetic, prepare_synthetic


class TinyGNN(pl.LightningModule):
    r"""GraphSAGE on seed nodes; counts the rows its training batches
    gathered."""
    def __init__(self, num_features: int = 16, num_classes: int = 4):
        super().__init__()
        self.net = GraphSAGE(num_features, 16, 2, num_classes)
        self.train_rows: List[int] = []

    def _loss(self, batch):
        out = self.net(batch.x, batch.edge_index)[:batch.batch_size]
        return F.cross_entropy(out, batch.y[:batch.batch_size])

    def training_step(self, batch, batch_idx):
        self.train_rows.append(batch.num_nodes)
        return self._loss(batch)

    def validation_step(self, batch, batch_idx, dataloader_idx=0):
        self.log('val_loss', self._loss(batch), batch_size=batch.batch_size)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-2)


class Loaders(pl.LightningDataModule):
    def __init__(self, data: Any, train_mask, val_mask, batch_size: int,
                 val_loaders: int = 1):
        super().__init__()
        self.data, self.batch_size = data, batch_size
        self.train_mask, self.val_mask = train_mask, val_mask
        self.val_loaders = val_loaders

    def train_dataloader(self):
        return FastNeighborLoader(self.data, [4, 4],
                                  input_nodes=self.train_mask,
                                  batch_size=self.batch_size, shuffle=True,
                                  pipeline=False)

    def val_dataloader(self):
        return [
            FastNeighborLoader(self.data, [4, 4], input_nodes=self.val_mask,
                               batch_size=400, pipeline=False)
            for _ in range(self.val_loaders)
        ]


def trainer(**kwargs: Any) -> pl.Trainer:
    return pl.Trainer(**{
        'accelerator': 'cpu', 'enable_checkpointing': False,
        'enable_progress_bar': False, 'enable_model_summary': False,
        'log_every_n_steps': 1, **kwargs
    })


_RUN: Dict[str, Any] = {}


def fit_tiered_run(tmp_path_factory) -> Dict[str, Any]:
    r"""Two epochs on the tiny graph, features on disk behind device and
    host caches, validation twice per epoch on two loaders; run once per
    session (``tests/test_report.py`` reads its log directory too)."""
    if not _RUN:
        root = tmp_path_factory.mktemp('tiered_run')
        prepare_synthetic('tiny', root / 'tiny', cache_root=root / 'cache',
                          progress=False)
        stores = open_dataset(root / 'tiny', host_budget=0.1,
                              device_budget=0.2)
        graph = load_synthetic('tiny', root=root / 'cache', progress=False)
        monitor, module = LoaderMonitor(), TinyGNN()
        fit = trainer(max_epochs=2, logger=CSVLogger(root / 'logs'),
                      val_check_interval=0.5, callbacks=[monitor])
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            fit.fit(module, datamodule=Loaders(stores, graph.train_mask,
                                               graph.val_mask, 256,
                                               val_loaders=2))
        _RUN.update(monitor=monitor, module=module, trainer=fit,
                    stores=stores,
                    graph=graph, log_dir=Path(fit.log_dir),
                    logs=root / 'logs', stdout=out.getvalue())
    return _RUN


@pytest.fixture
def tiered_run(tmp_path_factory) -> Dict[str, Any]:
    return fit_tiered_run(tmp_path_factory)


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
    device cache is CPU memory, storage a memory-mapped file), hit ratios
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
    assert header == ['device cache (CPU memory)', 'host buffer (CPU memory)']
    header, cells = table('rows served (bytes)')
    assert header[-1] == 'storage (file, memory-mapped)'
    storage = summary['storage_read']['x']['rows']
    assert cells[-3] == f'{storage:,}'
    assert summary['rows_by_tier']['x']['storage']['rows'] == storage
    assert f'x: {storage:,} rows asked of storage' in text
    assert 'disk)' not in text
