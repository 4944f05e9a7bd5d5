r"""The Lightning side on a ``HeteroData``: the data module serves the
labelled type's seeds, ``NodeClassifier`` builds a heterogeneous network
(embeddings for featureless types), ``pyg-fastload fit`` trains it, and what
is not supported yet is refused naming the setting."""
import json
from pathlib import Path

import pytest
import pytorch_lightning as pl
import torch

from pyg_fastload.datasets import generate_hetero
from pyg_fastload.lightning import (
    ConfigError,
    FastLoadDataModule,
    FeatureCache,
    LoaderMonitor,
    NodeClassifier,
)
from pyg_fastload.lightning.command import main

from ..helpers import random_hetero_graph


def test_a_hetero_data_module_trains_a_hetero_model(tmp_path):
    data = generate_hetero('hetero-tiny')
    dm = FastLoadDataModule(data, num_neighbors=[4, 3], batch_size=64,
                            progress=False)
    schema = dm.hetero_schema
    assert schema.target == 'paper' and schema.num_classes == 4
    assert (dm.num_features, dm.num_classes) == (16, 4)
    model = NodeClassifier(hidden_channels=32, num_layers=2, dropout=0.0)
    monitor = LoaderMonitor()
    trainer = pl.Trainer(max_epochs=8, accelerator='cpu', logger=False,
                         enable_progress_bar=False,
                         enable_model_summary=False, callbacks=[monitor],
                         default_root_dir=tmp_path)
    trainer.fit(model, dm)
    # learned embeddings for the types without features
    assert set(model.net.embeddings) == {'author', 'institution',
                                         'field_of_study'}
    assert float(trainer.callback_metrics['val_acc']) > 0.8
    train = int(data['paper'].train_mask.sum())
    assert monitor.records[-1]['seeds'] == train  # every paper seed once
    predictions = trainer.predict(model, dm)
    ids = torch.cat([p['n_id'] for p in predictions])
    assert sorted(ids.tolist()) == list(range(400))  # every paper


def test_fit_on_a_hetero_preset_from_the_command_line(tmp_path, capsys):
    main(['fit', '--data.dataset', 'hetero-tiny', '--data.num_neighbors',
          '[4, 3]', '--data.batch_size', '64', '--data.progress', 'false',
          '--model.hidden_channels', '16', '--model.num_layers', '2',
          '--trainer.max_epochs', '2', '--trainer.accelerator', 'cpu',
          '--trainer.enable_progress_bar', 'false',
          '--trainer.default_root_dir', str(tmp_path)])
    out = capsys.readouterr().out
    assert 'validation accuracy:' in out and 'seeds/s' in out
    [stats] = tmp_path.rglob('fastload_stats.json')
    [line] = [line for line in out.splitlines()
              if line.startswith('written: ')]
    written = dict(item.split(' ', 1) for item in line.removeprefix(
        'written: ').split(', '))
    assert Path(written['stats']) == stats
    assert Path(written['checkpoint']).is_file()
    assert Path(written['logs']) == stats.parent
    assert json.loads(stats.read_text())['epochs'][0]['seeds'] == 240


@pytest.mark.reliability(
    fault='a HeteroData with a setting that does not take it yet (storage '
          'read-ahead in memory, GCN or the MLP) or with '
          'labels on several node types',
    behaviour='a ConfigError naming the setting and what to use instead')
def test_what_hetero_data_cannot_take_yet_is_named(tmp_path):
    data = random_hetero_graph()
    with pytest.raises(ConfigError, match='dataset directory') as info:
        FastLoadDataModule(data, feature_cache=FeatureCache(
            device_budget=0.1, read_ahead=2))
    assert info.value.config_key == 'data.feature_cache.read_ahead'
    data['author'].y = torch.zeros(80, dtype=torch.long)
    with pytest.raises(ConfigError, match="exactly one node type") as info:
        FastLoadDataModule(data, progress=False).num_classes
    assert info.value.config_key == 'data.dataset'
    dm = FastLoadDataModule(random_hetero_graph(), progress=False)
    model = NodeClassifier(model='gcn')
    trainer = pl.Trainer(accelerator='cpu', logger=False, max_epochs=1,
                         enable_progress_bar=False,
                         enable_model_summary=False,
                         default_root_dir=tmp_path)
    with pytest.raises(ConfigError, match="'gcn' does not take a "
                       "HeteroData") as info:
        trainer.fit(model, dm)
    assert info.value.config_key == 'model.model'


@pytest.mark.reliability(
    fault='a heterogeneous dataset directory (or a cached HeteroData) '
          'refused or trained without its caches',
    behaviour='fit trains from the directory; LoaderMonitor counts every '
              "type's cache tiers")
def test_fit_on_a_hetero_directory_with_one_cache_over_the_types(
        tmp_path, capsys):
    from pyg_fastload.datasets import prepare_hetero_preset
    directory = tmp_path / 'tiny'
    prepare_hetero_preset('hetero-tiny', directory, progress=False)
    main(['fit', '--data.dataset', str(directory), '--data.num_neighbors',
          '[4, 3]', '--data.batch_size', '64', '--data.progress', 'false',
          '--data.feature_cache.host_budget', '0.5',
          '--model.hidden_channels', '16', '--model.num_layers', '2',
          '--trainer.max_epochs', '2', '--trainer.accelerator', 'cpu',
          '--trainer.enable_progress_bar', 'false',
          '--trainer.default_root_dir', str(tmp_path)])
    assert 'validation accuracy:' in capsys.readouterr().out
    [stats] = tmp_path.rglob('fastload_stats.json')
    epoch = json.loads(stats.read_text())['epochs'][0]
    assert epoch['seeds'] == 240
    paper = epoch['cache']['paper.x']
    assert 0 < paper['host']['hits'] < paper['host']['requests']
    # the same model on the same data in memory (no caches) sees the
    # same paper rows: the tiers serve all of them
    data = generate_hetero('hetero-tiny')
    dm = FastLoadDataModule(str(directory), num_neighbors=[4, 3],
                            batch_size=64, progress=False,
                            feature_cache=FeatureCache(host_budget=0.5))
    dm.setup('fit')
    batch = next(iter(dm.train_dataloader()))
    assert torch.equal(batch['paper'].x,
                       data['paper'].x[batch['paper'].n_id])
    assert dm.hetero_schema.num_features == {'paper': 16}


@pytest.mark.reliability(
    fault='a heterogeneous model computes every hop in every layer, or '
          'trimming changes its outputs',
    behaviour="layer l drops the outermost l hops (PyG's trim_to_layer); "
              "the seeds' logits are those of the untrimmed model")
@pytest.mark.parametrize('model', ['sage', 'gat'])
def test_hetero_layers_are_trimmed_without_changing_the_seeds(model):
    from pyg_fastload import FastNeighborLoader
    from pyg_fastload.lightning.hetero_net import HeteroNet
    from pyg_fastload.modes import hetero_schema
    data = generate_hetero('hetero-tiny')
    batch = next(iter(FastNeighborLoader(
        data, num_neighbors=[4, 3], input_nodes=('paper', torch.arange(30)),
        batch_size=30)))
    torch.manual_seed(0)
    net = HeteroNet(hetero_schema(data), model, 16, 2, 0.0, heads=2,
                    node_embeddings=False).eval()
    sizes = []
    net.convs[-1].register_forward_pre_hook(
        lambda module, args: sizes.append(args[0]['paper'].size(0)))
    trimmed = net(batch)
    net.trim = False
    full = net(batch)
    hops = batch['paper'].num_sampled_nodes
    assert sizes == [hops[0] + hops[1], sum(hops)]  # last layer: trimmed
    assert torch.allclose(trimmed[:30], full[:30], atol=1e-5)


def test_a_hetero_checkpoint_rebuilds_without_a_data_module(tmp_path):
    dm = FastLoadDataModule(generate_hetero('hetero-tiny'),
                            num_neighbors=[4, 3], batch_size=64,
                            progress=False)
    model = NodeClassifier(hidden_channels=16, num_layers=2)
    trainer = pl.Trainer(max_epochs=1, accelerator='cpu', logger=False,
                         enable_progress_bar=False,
                         enable_model_summary=False,
                         default_root_dir=tmp_path)
    trainer.fit(model, dm)
    path = tmp_path / 'hetero.ckpt'
    trainer.save_checkpoint(path)
    loaded = NodeClassifier.load_from_checkpoint(path)
    assert loaded.net is not None and loaded.hparams.schema['target'] == \
        'paper'
    batch = next(iter(dm.val_dataloader()))
    model.eval()
    loaded.eval()
    assert torch.equal(loaded(batch), model(batch))
    with pytest.raises(ConfigError, match='not a HeteroSchema') as info:
        NodeClassifier(schema={'target': 'paper'})
    assert info.value.config_key == 'model.schema'


def test_fit_on_a_hetero_directory_with_windows_and_read_ahead(
        tmp_path, monkeypatch):
    r"""Window buffering and storage read-ahead over several node types
    are taken from the CLI: the paper type's window serves rows, and every
    batch is announced to its direct storage's read accumulator before
    its rows are read."""
    from pyg_fastload.datasets import prepare_hetero_preset
    from pyg_fastload.storage import TieredFeatureStore
    stores, set_read_ahead = [], TieredFeatureStore.set_read_ahead

    def recorded(store, *args, **kwargs):
        stores.append(store)
        return set_read_ahead(store, *args, **kwargs)

    monkeypatch.setattr(TieredFeatureStore, 'set_read_ahead', recorded)
    directory = tmp_path / 'tiny'
    prepare_hetero_preset('hetero-tiny', directory, progress=False)
    main(['fit', '--data.dataset', str(directory), '--data.num_neighbors',
          '[4, 3]', '--data.batch_size', '64', '--data.progress', 'false',
          '--data.feature_cache.device_budget', '0.3',
          '--data.feature_cache.device_cache', 'window',
          '--data.feature_cache.window', '2',
          '--data.feature_cache.storage', 'direct',
          '--data.feature_cache.read_ahead', '2',
          '--model.hidden_channels', '16', '--model.num_layers', '2',
          '--trainer.max_epochs', '1', '--trainer.accelerator', 'cpu',
          '--trainer.enable_progress_bar', 'false',
          '--trainer.default_root_dir', str(tmp_path)])
    [stats] = tmp_path.rglob('fastload_stats.json')
    epoch = json.loads(stats.read_text())['epochs'][0]
    paper = epoch['cache']['paper.x']
    assert 0 < paper['device']['hits'] <= paper['device']['requests']
    [store] = stores
    assert store.read_ahead == 2
    ahead = store.accumulator_stats()
    assert list(ahead) == ['paper.x']  # the type with features on disk
    # 4 training, 2 validation and 2 sanity-check batches, each announced
    # ahead; read in at most one submission each (fewer where a merge,
    # which depends on the measured read rates, staged a batch's rows)
    assert ahead['paper.x']['announced'] == 8
    assert 0 < ahead['paper.x']['submissions'] <= 8


def test_learnt_embeddings_are_looked_up_by_the_dataset_ids():
    r"""A batch of a heterogeneous partition carries ``dataset_id`` (its
    ``n_id`` being the partition's ids): the featureless types' learnt
    embeddings are those rows, as a batch of the dataset reads them."""
    from pyg_fastload import FastNeighborLoader
    from pyg_fastload.lightning.hetero_net import HeteroNet
    from pyg_fastload.modes import hetero_schema
    data = generate_hetero('hetero-tiny')
    batch = next(iter(FastNeighborLoader(
        data, num_neighbors=[4, 3], input_nodes=('paper', torch.arange(30)),
        batch_size=30)))
    torch.manual_seed(0)
    net = HeteroNet(hetero_schema(data), 'sage', 16, 2, 0.0).eval()
    expected = net(batch)
    shift = {t: torch.randperm(data[t].num_nodes) for t in data.node_types}
    for node_type, perm in shift.items():  # n_id in other ids
        store = batch[node_type]
        store.dataset_id = store.n_id
        store.n_id = torch.argsort(perm)[store.n_id]
    assert torch.allclose(net(batch), expected, atol=1e-6)
    for node_type in shift:
        del batch[node_type].dataset_id
    assert not torch.allclose(net(batch), expected, atol=1e-3)
