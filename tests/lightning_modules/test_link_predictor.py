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

from ..helpers import requires_torch_sparse


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


def _community_graph(seed=0):
    r"""Authors write papers of their own community (of 4); both types'
    features tell the community, noisily: a learnable link signal."""
    from torch_geometric.data import HeteroData
    gen = torch.Generator().manual_seed(seed)
    data = HeteroData()
    group = {'author': torch.arange(200) % 4, 'paper': torch.arange(300) % 4}
    for node_type, of in group.items():
        data[node_type].x = torch.nn.functional.one_hot(of, 4).float() + \
            0.5 * torch.randn(of.numel(), 4, generator=gen)
    author = torch.randint(200, (1500, ), generator=gen)
    paper = torch.randint(75, (1500, ), generator=gen) * 4 + author % 4
    writes = torch.stack([author, paper])
    cites = torch.randint(300, (2, 600), generator=gen)
    data['author', 'writes', 'paper'].edge_index = writes
    data['paper', 'rev_writes', 'author'].edge_index = writes.flip(0)
    data['paper', 'cites', 'paper'].edge_index = cites
    data['paper'].y = group['paper']  # a labelled type (the schema's)
    return data


@pytest.mark.reliability(
    fault='a heterogeneous link model scoring the wrong types or pairs (the '
          'relation, its label edges or triplet indices mixed up)',
    behaviour="3 epochs on author-writes-paper links lift validation MRR "
              "over 20 fixed negative papers from chance (about 0.17) to "
              "above 0.35; a checkpoint's hyperparameters rebuild the model")
@pytest.mark.parametrize('neg_sampling, loss', [('binary', 'bce'),
                                                ('triplet', 'bpr')])
def test_hetero_link_training_beats_chance(neg_sampling, loss):
    pl.seed_everything(0)
    module = FastLoadDataModule(
        _community_graph(), task='link', num_neighbors=[5, 5],
        batch_size=128, eval_batch_size=420, progress=False,
        link=LinkOptions(edge_type=['author', 'writes', 'paper'],
                         eval_edges=100, eval_negatives=20,
                         neg_sampling=neg_sampling))
    model = LinkPredictor(hidden_channels=16, loss=loss, lr=0.01)
    trainer = _trainer(3)
    [before] = trainer.validate(model, module, verbose=False)
    trainer.fit(model, module)
    after = float(trainer.callback_metrics['val_mrr'])
    assert before['val_mrr'] < 0.3
    assert after > 0.35 and after > before['val_mrr'] + 0.1
    again = LinkPredictor(**model.hparams)  # as a checkpoint rebuilds it
    again.load_state_dict(model.state_dict())
    batch = next(iter(module.val_dataloader()))
    model.eval()
    again.eval()
    with torch.no_grad():
        src, dst = batch['author', 'writes', 'paper'].edge_label_index
        assert torch.equal(model.score(model(batch), src, dst),
                           again.score(again(batch), src, dst))
    with pytest.raises(ConfigError, match="'gcn' does not take a "
                       "heterogeneous graph"):
        _trainer(1).fit(LinkPredictor(encoder='gcn'), module)


@requires_torch_sparse
@pytest.mark.parametrize('encoder', ['sage', 'gcn', 'gat'])
def test_a_sparse_adjacency_gives_the_edge_index_embeddings(encoder, cache):
    r"""``data.adjacency: sparse``: the encoder aggregates over the
    batch's ``adj_t`` (without ``edge_index`` it still embeds), to the
    embeddings ``edge_index`` gives."""
    module = FastLoadDataModule('tiny', task='link', num_neighbors=[5, 5],
                                batch_size=64, progress=False,
                                cache_dir=cache, adjacency='sparse')
    torch.manual_seed(0)
    model = LinkPredictor(encoder=encoder, hidden_channels=16, heads=2,
                          in_channels=module.num_features).eval()
    batch = next(iter(module.train_dataloader()))
    sparse, listed = batch.clone(), batch.clone()
    del sparse.edge_index, listed.adj_t
    with torch.no_grad():
        h, _ = model(sparse)
        want, _ = model(listed)
    assert h.shape == (batch.num_nodes, 16)
    torch.testing.assert_close(h, want, rtol=1e-5, atol=1e-5)
