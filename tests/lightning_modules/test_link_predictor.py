r"""``LinkPredictor``: OGB's ranking metrics, training on binary and triplet
link batches, and errors for a model and data that do not fit."""
import pytest
import pytorch_lightning as pl
import torch

from pyg_fastload.lightning import (
    ConfigError,
    FastLoadDataModule,
    LinkOptions,
    LinkPredictor,
    NodeClassifier,
)
from pyg_fastload.lightning.link_predictor import ranking_metrics


def test_ranking_metrics_rank_ties_halfway():
    scores = torch.tensor([[3., 1., 2.], [1., 2., 3.], [2., 2., 0.]])
    out = ranking_metrics(scores, [1, 2])
    # ranks 1, 3 and 1.5 (one tie: halfway between 1 and 2)
    assert torch.allclose(out['mrr'], torch.tensor([1., 1 / 3, 2 / 3]))
    assert torch.equal(out['hits@1'], torch.tensor([1., 0., 0.]))
    assert torch.equal(out['hits@2'], torch.tensor([1., 0., 1.]))


@pytest.fixture(scope='module')
def cache(tmp_path_factory):
    return str(tmp_path_factory.mktemp('presets'))


def _module(cache, neg_sampling='binary'):
    return FastLoadDataModule(
        'tiny', task='link', num_neighbors=[5, 5], batch_size=512,
        eval_batch_size=2100, progress=False, cache_dir=cache,
        link=LinkOptions(eval_edges=300, eval_negatives=20,
                         neg_sampling=neg_sampling))


def _trainer(epochs):
    return pl.Trainer(max_epochs=epochs, logger=False,
                      enable_checkpointing=False, enable_progress_bar=False,
                      enable_model_summary=False, callbacks=[])


@pytest.mark.parametrize('neg_sampling, loss', [('binary', 'bce'),
                                                ('triplet', 'bpr')])
@pytest.mark.reliability(
    fault='a link model that does not learn from link batches (labels, '
          'negatives or evaluation groups mixed up)',
    behaviour='two epochs raise validation MRR over 20 fixed negatives '
              'from chance (about 0.17) to above 0.3, AUROC above 0.7')
def test_link_training_beats_chance(neg_sampling, loss, cache):
    pl.seed_everything(0)
    module = _module(cache, neg_sampling)
    model = LinkPredictor(hidden_channels=32, loss=loss, lr=0.01)
    trainer = _trainer(2)
    [before] = trainer.validate(model, module, verbose=False)
    trainer.fit(model, module)
    after = trainer.callback_metrics
    assert before['val_mrr'] < 0.25
    assert float(after['val_mrr']) > 0.3
    assert float(after['val_mrr']) > before['val_mrr'] + 0.08
    assert float(after['val_auroc']) > 0.7
    [test] = trainer.test(model, module, verbose=False)
    assert set(test) == {'test_mrr', 'test_hits@1', 'test_hits@10',
                         'test_hits@50', 'test_auroc'}


def test_model_and_task_must_fit(cache):
    with pytest.raises(ConfigError, match="'bpr' ranks each positive"):
        _trainer(1).fit(LinkPredictor(loss='bpr'),
                        _module(cache, 'binary'))
    node_module = FastLoadDataModule('tiny', num_neighbors=[5, 5],
                                     progress=False, cache_dir=cache)
    with pytest.raises(ConfigError, match='set data.task: link'):
        _trainer(1).fit(LinkPredictor(), node_module)
    with pytest.raises(ConfigError, match='set data.task: node'):
        _trainer(1).fit(NodeClassifier(), _module(cache))
    with pytest.raises(ConfigError, match="'decoder'"):
        LinkPredictor(decoder='cosine')
