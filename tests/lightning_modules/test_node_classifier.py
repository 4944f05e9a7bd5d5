import pytest
import pytorch_lightning as pl
import torch

from pyg_fastload.lightning import (
    ConfigError,
    FastLoadDataModule,
    NodeClassifier,
)
from pyg_fastload import FastNeighborLoader

from ..helpers import random_graph


@pytest.fixture(scope='module')
def batch():
    data = random_graph(num_nodes=300, num_edges=3000)
    del data.edge_attr
    loader = FastNeighborLoader(data, [4, 3], batch_size=32,
                                generator=torch.Generator().manual_seed(0))
    return next(iter(loader))


@pytest.mark.parametrize('name', ['sage', 'gcn', 'gat', 'mlp'])
@pytest.mark.filterwarnings('ignore:You are trying to `self.log')
def test_models_give_seed_logits(batch, name):
    model = NodeClassifier(name, in_channels=8, num_classes=4,
                           hidden_channels=16, num_layers=2)
    loss = model.training_step(batch, 0)
    assert loss.dim() == 0 and torch.isfinite(loss)
    out = model.predict_step(batch, 0)
    assert torch.equal(out['n_id'], batch.n_id[:32])
    assert out['pred'].shape == (32, ) and int(out['pred'].max()) < 4


@pytest.mark.parametrize('name', ['sage', 'gat'])
def test_trimming_keeps_seed_outputs(batch, name):
    torch.manual_seed(0)
    model = NodeClassifier(name, in_channels=8, num_classes=4,
                           hidden_channels=16, num_layers=2).eval()
    assert model.trim
    trimmed = model(batch)[:32]
    model.trim = False
    full = model(batch)[:32]
    assert torch.allclose(trimmed, full, atol=1e-5)


def test_size_read_from_data_module_and_saved(tmp_path):
    dm = FastLoadDataModule('tiny', num_neighbors=[3, 3], batch_size=256,
                            cache_dir=str(tmp_path / 'cache'),
                            progress=False)
    model = NodeClassifier('sage', hidden_channels=8, num_layers=2)
    assert model.net is None
    trainer = pl.Trainer(max_epochs=1, accelerator='cpu', logger=False,
                         enable_progress_bar=False, limit_train_batches=2,
                         limit_val_batches=1, default_root_dir=tmp_path)
    trainer.fit(model, datamodule=dm)
    path = tmp_path / 'model.ckpt'
    trainer.save_checkpoint(path)
    loaded = NodeClassifier.load_from_checkpoint(path)
    assert (loaded.hparams.in_channels, loaded.hparams.num_classes) == (16, 4)
    for a, b in zip(loaded.parameters(), model.parameters()):
        assert torch.equal(a, b)


@pytest.mark.parametrize('kwargs, key', [
    (dict(model='transformer'), 'model'),
    (dict(model='gcn', trim=True), 'trim'),
    (dict(model='gat', hidden_channels=10, heads=4), 'hidden_channels'),
    (dict(num_layers=0), 'num_layers'),
    (dict(dropout=1.5), 'dropout'),
    (dict(predict_logits='no'), 'predict_logits'),
    (dict(predict_embeddings=1), 'predict_embeddings'),
])
def test_bad_arguments_name_their_key(kwargs, key):
    with pytest.raises(ConfigError) as info:
        NodeClassifier(**kwargs)
    assert info.value.config_key == f'model.{key}'


def test_unknown_size_without_data_module():
    model = NodeClassifier()
    with pytest.raises(RuntimeError, match="no network yet"):
        model(None)
    with pytest.raises(ConfigError, match='in_channels'):
        model.configure_model()


@pytest.mark.parametrize('key, value, match', [
    ('num_classes', 10**11, r'needs a 100,000,000,000 x 256 layer'),
    ('num_classes', -3, 'must be a positive int'),
    ('in_channels', 'x', 'must be a positive int'),
    ('num_classes', 2.5, 'must be a positive int'),
])
def test_layer_widths_are_checked_before_allocating(key, value, match):
    with pytest.raises(ConfigError, match=match) as info:
        NodeClassifier(**{key: value})
    assert info.value.key == key


@pytest.mark.reliability(
    fault='the MLP baseline sampling neighbourhoods it never reads (half '
          'of its loading time)',
    behaviour='with model mlp the batches hold the seeds alone (fan-out 0, '
              'no edges); a GNN keeps its fan-outs')
def test_the_mlp_baseline_samples_no_neighbourhood(tmp_path):
    def fit(name):
        dm = FastLoadDataModule('tiny', num_neighbors=[3, 3], batch_size=64,
                                cache_dir=str(tmp_path / 'cache'),
                                progress=False)
        trainer = pl.Trainer(max_epochs=1, accelerator='cpu', logger=False,
                             enable_progress_bar=False, callbacks=[],
                             enable_checkpointing=False,
                             limit_train_batches=2, limit_val_batches=1)
        trainer.fit(NodeClassifier(name, hidden_channels=8, num_layers=2),
                    datamodule=dm)
        return dm, next(iter(dm.train_dataloader()))
    dm, batch = fit('mlp')
    assert dm.spec.num_neighbors == [0] == dm.spec.evaluation.num_neighbors
    assert batch.num_nodes == batch.batch_size == 64
    assert batch.edge_index.numel() == 0
    dm, batch = fit('sage')
    assert dm.spec.num_neighbors == [3, 3]
    assert batch.num_nodes > batch.batch_size
