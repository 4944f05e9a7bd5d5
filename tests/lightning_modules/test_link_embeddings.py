r"""``pyg-fastload predict`` with a ``LinkPredictor``: every node's encoder
embedding written (kind ``'embeddings'``) by the ``PredictionWriter``, from
one rank or two, and pairs scored from them with the model's decoder."""
import os
import subprocess
import sys

import pytest
import pytorch_lightning as pl
import torch
import yaml

from pyg_fastload.inference import read_predictions
from pyg_fastload.lightning import (ConfigError, FastLoadDataModule,
                                    LinkPredictor, PredictionWriter)

from ..distributed.ranks import free_port
from ..helpers import cli_succeeds

pytestmark = [
    pytest.mark.filterwarnings("ignore:LightningCLI's args parameter"),
    pytest.mark.filterwarnings('ignore::DeprecationWarning'),
]


def _trainer(*callbacks, epochs=1):
    return pl.Trainer(callbacks=list(callbacks), accelerator='cpu',
                      logger=False, enable_progress_bar=False,
                      enable_model_summary=False, max_epochs=epochs,
                      limit_train_batches=2, limit_val_batches=1,
                      enable_checkpointing=False)


def _tiny():
    from pyg_fastload.datasets import load_synthetic
    return load_synthetic('tiny', progress=False).to_data()


@pytest.mark.parametrize('encoder, decoder', [('sage', 'mlp'),
                                              ('gcn', 'dot'),
                                              ('gat', 'dot')])
def test_written_embeddings_and_scores_are_the_full_batch_ones(
        cache_env, encoder, decoder):
    pl.seed_everything(0)
    model = LinkPredictor(encoder=encoder, decoder=decoder,
                          hidden_channels=16, heads=2)
    _trainer(epochs=1).fit(model, FastLoadDataModule(
        'tiny', task='link', num_neighbors=[5, 5], batch_size=256,
        progress=False))
    data = FastLoadDataModule('tiny', task='node', eval='layerwise',
                              num_neighbors=[5, 5], progress=False)
    writer = PredictionWriter('emb')
    _trainer(writer).predict(model, data)
    written = read_predictions('emb')
    graph = _tiny()
    model.eval()
    with torch.no_grad():
        full = model.encoder(graph.x, graph.edge_index)
    assert written['manifest']['kind'] == 'embeddings'
    assert written['manifest']['model'] == 'LinkPredictor'
    assert 'predictions' not in written
    assert written['node_ids'].tolist() == list(range(graph.num_nodes))
    assert torch.allclose(written['embeddings'], full, atol=1e-4)
    assert torch.allclose(model.node_embeddings(graph, progress=False),
                          full, atol=1e-4)
    pairs = torch.randint(0, graph.num_nodes, (2, 5000))
    with torch.no_grad():
        expected = model.score((full, full), pairs[0], pairs[1])
    scores = model.score_pairs('emb', pairs, chunk_size=700)
    assert torch.allclose(scores, expected, atol=1e-4)
    with pytest.raises(IndexError, match="'pairs' holds node id 2000"):
        model.score_pairs('emb', torch.tensor([[0], [2000]]))


def test_sampled_prediction_gives_every_seed_an_embedding(cache_env):
    pl.seed_everything(0)
    model = LinkPredictor(in_channels=16, hidden_channels=16)
    data = FastLoadDataModule('tiny', task='node', num_neighbors=[5, 5],
                              batch_size=512, progress=False)
    _trainer(PredictionWriter('emb')).predict(model, data)
    written = read_predictions('emb')
    assert written['node_ids'].tolist() == list(range(2000))
    assert written['embeddings'].shape == (2000, 16)


def test_a_heterogeneous_link_predictor_is_refused_naming_why(cache_env):
    from .test_link_predictor import _community_graph
    from pyg_fastload.modes import LinkOptions
    data = FastLoadDataModule(
        _community_graph(), task='link', num_neighbors=[5, 5],
        progress=False,
        link=LinkOptions(edge_type=['author', 'writes', 'paper']))
    model = LinkPredictor(hidden_channels=16)
    _trainer(epochs=1).fit(model, data)
    with pytest.raises(ConfigError, match='heterogeneous LinkPredictor '
                                          r'\(HeteroNet\) are not supported'):
        model.node_embeddings(_community_graph())
    with pytest.raises(ConfigError, match='not supported yet'):
        model.score_pairs(torch.randn(3, 16), torch.zeros(2, 1).long())


def test_pyg_fastload_predict_writes_a_link_predictors_embeddings(
        cache_env, capsys):
    common = ['--model', 'LinkPredictor', '--model.hidden_channels', '16',
              '--model.decoder', 'mlp', '--data.dataset', 'tiny',
              '--data.num_neighbors', '[5, 5]', '--data.progress', 'false',
              '--trainer.accelerator', 'cpu',
              '--trainer.default_root_dir', str(cache_env / 'runs')]
    cli_succeeds(['fit', *common, '--data.task', 'link', '--data.batch_size',
               '256', '--trainer.max_epochs', '1',
               '--trainer.limit_train_batches', '2',
               '--trainer.limit_val_batches', '1'])
    ckpt = next((cache_env / 'runs').rglob('*.ckpt'))
    # the same config as the fit: task link predicts every node's embedding
    cli_succeeds(['predict', *common, '--data.task', 'link', '--ckpt_path',
               str(ckpt),
               '--trainer.callbacks+=pyg_fastload.lightning.PredictionWriter',
               '--trainer.callbacks.out_dir', 'emb'])
    assert "wrote the embeddings of 2,000 nodes to '" in \
        capsys.readouterr().out
    model = LinkPredictor.load_from_checkpoint(ckpt)
    graph = _tiny()
    model.eval()
    with torch.no_grad():
        full = model.encoder(graph.x, graph.edge_index)
    assert torch.allclose(read_predictions('emb')['embeddings'], full,
                          atol=1e-4)
    pairs = graph.edge_index[:, :300]
    torch.save(pairs, 'pairs.pt')
    with torch.no_grad():
        expected = model.score((full, full), pairs[0], pairs[1])
    assert torch.allclose(model.score_pairs('emb', 'pairs.pt'), expected,
                          atol=1e-4)


def test_two_ranks_write_the_embeddings_one_rank_writes(tmp_path):
    env = dict(os.environ, PYG_FASTLOAD_CACHE=str(tmp_path / 'cache'))
    written = {}
    for devices in (2, 1):
        config = {
            'seed_everything': 0,
            'trainer': {
                'accelerator': 'cpu', 'devices': devices,
                'strategy': {
                    'class_path': 'pytorch_lightning.strategies.DDPStrategy',
                    'init_args': {'process_group_backend': 'gloo',
                                  'timeout': '0:01:00'}},
                'enable_progress_bar': False, 'logger': False},
            'model': {'class_path': 'LinkPredictor',
                      'init_args': {'hidden_channels': 16}},
            'data': {'dataset': 'tiny', 'task': 'node', 'eval': 'layerwise',
                     'num_neighbors': [5, 5], 'progress': False,
                     'dist_timeout': 60}}
        path = tmp_path / f'config-{devices}.yaml'
        path.write_text(yaml.safe_dump(config))
        out = tmp_path / f'emb-{devices}'
        env['MASTER_PORT'] = str(free_port())
        result = subprocess.run(
            [sys.executable, '-m', 'pyg_fastload', 'predict', '--config',
             str(path), '--trainer.callbacks+=pyg_fastload.lightning.'
             'PredictionWriter', '--trainer.callbacks.out_dir', str(out)],
            cwd=tmp_path, env=env, capture_output=True, text=True,
            timeout=300)
        assert result.returncode == 0, result.stderr[-3000:]
        assert result.stdout.count('wrote the embeddings of 2,000 '
                                   'nodes') == 1  # the first rank only
        written[devices] = read_predictions(out)
    two, one = written[2], written[1]
    assert two['manifest']['ranks'] == 2
    assert two['manifest']['kind'] == 'embeddings'
    assert two['node_ids'].tolist() == list(range(2000))  # each once
    assert torch.allclose(two['embeddings'], one['embeddings'], atol=1e-5)
