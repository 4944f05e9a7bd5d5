r"""``pyg-fastload predict`` with a ``LinkPredictor``: every node's encoder
embedding written (kind ``'embeddings'``; one table per node type on a
heterogeneous graph) by the ``PredictionWriter``, from one rank or two, and
pairs scored from them with the model's decoder."""
import os

import pytest
import pytorch_lightning as pl
import torch
import yaml

from torch_geometric.data import HeteroData

from pyg_fastload.inference import read_predictions, write_predictions
from pyg_fastload.lightning import (ConfigError, FastLoadDataModule,
                                    LinkPredictor, PredictionWriter)

from ..distributed.ranks import command_ranks, free_port
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


def _hetero_full_batch(model):
    r"""The encoder's full-batch output of every node type of hetero-tiny
    (every node's id as its ``n_id``, as a batch of the whole graph)."""
    from pyg_fastload.datasets import generate_hetero
    graph = generate_hetero('hetero-tiny')
    for node_type in graph.node_types:
        graph[node_type].n_id = torch.arange(graph[node_type].num_nodes)
    model.eval()
    model.encoder.trim = False
    with torch.no_grad():
        return graph, model.encoder.embed(graph)


def test_pyg_fastload_predict_writes_a_hetero_link_predictors_tables(
        cache_env, capsys):
    common = ['--model', 'LinkPredictor', '--model.hidden_channels', '16',
              '--model.decoder', 'mlp', '--data.dataset', 'hetero-tiny',
              '--data.task', 'link', '--data.link.edge_type',
              '[author, writes, paper]', '--data.num_neighbors', '[5, 5]',
              '--data.progress', 'false', '--trainer.accelerator', 'cpu',
              '--trainer.default_root_dir', str(cache_env / 'runs')]
    cli_succeeds(['fit', *common, '--data.batch_size', '256',
                  '--trainer.max_epochs', '1',
                  '--trainer.limit_train_batches', '2',
                  '--trainer.limit_val_batches', '1'])
    ckpt = next((cache_env / 'runs').rglob('*.ckpt'))
    cli_succeeds(['predict', *common, '--ckpt_path', str(ckpt),
                  '--trainer.callbacks+=pyg_fastload.lightning.'
                  'PredictionWriter', '--trainer.callbacks.out_dir', 'emb'])
    assert ("wrote the embeddings of 742 nodes to 'emb', one subdirectory "
            "per node type: author (300), field_of_study (30), institution "
            "(12), paper (400)") in capsys.readouterr().out
    model = LinkPredictor.load_from_checkpoint(ckpt)
    assert model.edge_type == ('author', 'writes', 'paper')
    graph, full = _hetero_full_batch(model)
    types = sorted(graph.node_types)
    assert model.node_types == types
    written = read_predictions('emb', node_type='paper')  # the layout
    assert written['manifest']['node_type'] == 'paper'
    assert written['manifest']['model'] == 'LinkPredictor'
    assert sorted(p.name for p in (cache_env / 'emb').iterdir()) == \
        sorted([*types, 'predictions.json'])
    for node_type in types:
        table = read_predictions(cache_env / 'emb' / node_type)
        assert table['manifest']['kind'] == 'embeddings'
        assert table['node_ids'].tolist() == list(range(
            graph[node_type].num_nodes))
        assert torch.allclose(table['embeddings'], full[node_type],
                              atol=1e-4), node_type
    h = model.node_embeddings(graph, progress=False)
    assert all(torch.allclose(h[t], full[t], atol=1e-4) for t in types)
    pairs = torch.stack([torch.randint(0, 300, (3000, )),
                         torch.randint(0, 400, (3000, ))])
    with torch.no_grad():
        expected = model.score((full['author'], full['paper']), pairs[0],
                               pairs[1])
    for source in ('emb', h):
        assert torch.allclose(model.score_pairs(source, pairs,
                                                chunk_size=700),
                              expected, atol=1e-4)
    with pytest.raises(IndexError, match="'pairs' row 0 holds node id 300, "
                                         "out of range"):
        model.score_pairs('emb', torch.tensor([[300], [0]]))
    # a homogeneous model's directory to this model, and the reverse
    write_predictions('flat', torch.arange(400), None,
                      embeddings=torch.randn(400, 16))
    with pytest.raises(ValueError, match=r"'flat' holds one table \(a "
                                         r"homogeneous model's"):
        model.score_pairs('flat', pairs)
    flat = LinkPredictor(in_channels=16, hidden_channels=16)
    with pytest.raises(ValueError, match=r"'emb' holds one table per node "
                                         r"type, of node types"):
        flat.score_pairs('emb', pairs)
    with pytest.raises(ConfigError, match="predicts every node type's "
                                          "embeddings layer-wise"):
        model.predict_step(HeteroData(), 0)  # a sampled batch


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
    # the fit's closing line says what predict writes for a link predictor
    assert ("next, every node's embedding (a LinkPredictor writes "
            "embeddings): pyg-fastload predict -c ") in capsys.readouterr().out
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


HOMOGENEOUS = {'dataset': 'tiny', 'task': 'node',
               'evaluation': {'method': 'layerwise'}}
#: task link: the relation comes from the data module (no checkpoint)
HETEROGENEOUS = {'dataset': 'hetero-tiny', 'task': 'link',
                 'link': {'edge_type': ['author', 'writes', 'paper']}}


@pytest.mark.parametrize('data, nodes, tables', [
    (HOMOGENEOUS, '2,000', [None]),
    (HETEROGENEOUS, '742', ['author', 'field_of_study', 'institution',
                            'paper'])], ids=['homogeneous', 'hetero'])
def test_two_ranks_write_the_embeddings_one_rank_writes(tmp_path, data,
                                                        nodes, tables):
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
            'data': {**data, 'num_neighbors': [5, 5], 'progress': False,
                     'dist_timeout': 60}}
        path = tmp_path / f'config-{devices}.yaml'
        path.write_text(yaml.safe_dump(config))
        out = tmp_path / f'emb-{devices}'
        env['MASTER_PORT'] = str(free_port())
        result = command_ranks(
            ['predict', '--config', str(path), '--trainer.callbacks+='
             'pyg_fastload.lightning.PredictionWriter',
             '--trainer.callbacks.out_dir', str(out)], tmp_path, env,
            world_size=devices)
        assert result.returncode == 0, result.stderr[-3000:]
        assert result.stdout.count(f'wrote the embeddings of {nodes} '
                                   f'nodes') == 1  # the first rank only
        written[devices] = {t: read_predictions(out, node_type=t)
                            for t in tables}
    for node_type in tables:  # one file set per type
        two, one = written[2][node_type], written[1][node_type]
        assert two['manifest']['ranks'] == 2
        assert two['manifest']['kind'] == 'embeddings'
        count = one['node_ids'].numel()
        assert two['node_ids'].tolist() == list(range(count))  # each once
        assert torch.allclose(two['embeddings'], one['embeddings'],
                              atol=1e-5)
