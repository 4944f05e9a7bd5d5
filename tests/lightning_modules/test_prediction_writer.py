import json
import re

import pytest
import pytorch_lightning as pl
import torch

from pyg_fastload.inference import read_predictions, write_predictions
from pyg_fastload.lightning import (ConfigError, FastLoadDataModule,
                                    NodeClassifier, PredictionWriter)
from ..distributed.ranks import run_command
from ..helpers import cli_succeeds

pytestmark = [
    pytest.mark.filterwarnings("ignore:LightningCLI's args parameter"),
    pytest.mark.filterwarnings('ignore::DeprecationWarning'),
]


def _trainer(*callbacks):
    return pl.Trainer(callbacks=list(callbacks), accelerator='cpu',
                      logger=False, enable_progress_bar=False,
                      enable_model_summary=False, max_epochs=1,
                      limit_train_batches=2, limit_val_batches=1)


def test_predictions_are_written_sorted_once_per_node(tmp_path):
    path = write_predictions(tmp_path / 'p', torch.tensor([3, 0, 2, 1]),
                             torch.tensor([7, 4, 6, 5]),
                             torch.arange(8.).view(4, 2), node_type='paper')
    out = read_predictions(path)
    assert out['node_ids'].tolist() == [0, 1, 2, 3]
    assert out['predictions'].tolist() == [4, 5, 6, 7]
    assert out['logits'].tolist() == [[2, 3], [6, 7], [4, 5], [0, 1]]
    assert out['manifest']['node_type'] == 'paper'
    with pytest.raises(ValueError, match='node 2 was predicted more than '
                                         'once'):
        write_predictions(tmp_path / 'q', torch.tensor([2, 2]),
                          torch.tensor([0, 1]))
    with pytest.raises(ValueError, match="'predictions' has 1 entries"):
        write_predictions(tmp_path / 'q', torch.tensor([0, 1]),
                          torch.tensor([0]))
    assert not (tmp_path / 'q').exists()  # nothing half-written


@pytest.mark.reliability(
    fault='predictions written over an existing directory; a predictions '
          'file changed after it was written; a manifest that is not JSON, '
          'a list or lists no checksums; an out_dir of 3, logits=\'yes\'',
    behaviour='an existing directory is refused before anything is predicted '
              '(replaced only with overwrite, and only a predictions '
              'directory); a changed file fails its checksum when read; a '
              'bad manifest or argument is an error naming it')
def test_existing_directories_and_changed_files_are_refused(tmp_path):
    path = write_predictions(tmp_path / 'p', torch.tensor([0, 1]),
                             torch.tensor([1, 0]))
    with pytest.raises(FileExistsError, match='already exists'):
        write_predictions(path, torch.tensor([0]), torch.tensor([0]))
    write_predictions(path, torch.tensor([0]), torch.tensor([1]),
                      overwrite=True)
    assert read_predictions(path)['predictions'].tolist() == [1]
    other = tmp_path / 'mine'
    other.mkdir()
    (other / 'notes.txt').write_text('keep')
    with pytest.raises(FileExistsError, match='not a predictions'):
        write_predictions(other, torch.tensor([0]), torch.tensor([0]),
                          overwrite=True)
    for hostile in (b'[1, 2]', b'{"format": "pyg-fastload-predictions", '
                    b'"files": {"x.npy": 3}}', b'not json'):
        bad = tmp_path / 'bad'
        bad.mkdir(exist_ok=True)
        (bad / 'predictions.json').write_bytes(hostile)
        with pytest.raises(ValueError, match='predictions.json'):
            read_predictions(bad)
    for careless in (dict(out_dir=3), dict(out_dir='p', logits='yes'),
                     dict(out_dir='p', overwrite=1)):
        with pytest.raises(ConfigError, match='PredictionWriter'):
            PredictionWriter(**careless)
    (path / 'predictions.npy').write_bytes(b'changed')
    with pytest.raises(ValueError, match='does not match its checksum'):
        read_predictions(path)
    data = FastLoadDataModule('tiny', num_neighbors=[3], batch_size=512,
                              progress=False)
    model = NodeClassifier(in_channels=16, num_classes=4, hidden_channels=8,
                           num_layers=1)
    with pytest.raises(ConfigError, match='already exists'):
        _trainer(PredictionWriter(str(path))).predict(model, data)


@pytest.mark.reliability(
    fault='`write_predictions` given negative node ids; a predictions '
          "manifest whose 'num_nodes' disagrees with its arrays (or is not "
          'a count)',
    behaviour="`ValueError` naming 'node_ids' and the id, before anything "
              "is written; reading names the file, 'num_nodes' and the "
              'shapes (was: written; read as if whole)')
def test_negative_ids_and_a_wrong_node_count_are_refused(tmp_path):
    with pytest.raises(ValueError, match="'node_ids' holds -3: node ids are "
                                         ">= 0"):
        write_predictions(tmp_path / 'neg', torch.tensor([0, -3]),
                          torch.tensor([1, 2]))
    assert not (tmp_path / 'neg').exists()
    path = write_predictions(tmp_path / 'p', torch.tensor([0, 1, 2]),
                             torch.tensor([1, 0, 1]))
    manifest = json.loads((path / 'predictions.json').read_text())
    for count, error in ((5, r"node_ids\.npy' has shape \[3\] but "
                          r"predictions\.json gives 'shape' \[3\] and "
                          r"'num_nodes' 5"),
                         ('3', r"'num_nodes' is '3', not a count")):
        (path / 'predictions.json').write_text(json.dumps(
            {**manifest, 'num_nodes': count}))
        with pytest.raises(ValueError, match=error):
            read_predictions(path)
    (path / 'predictions.json').write_text(json.dumps(manifest))
    assert read_predictions(path)['node_ids'].tolist() == [0, 1, 2]


def test_the_writer_keeps_what_the_model_predicted(cache_env):
    data = FastLoadDataModule('tiny', num_neighbors=[5, 5], batch_size=256,
                              progress=False)
    model = NodeClassifier(hidden_channels=16, num_layers=2)
    _trainer().fit(model, data)
    writer = PredictionWriter('preds', logits=True)
    returned = _trainer(writer).predict(model, data)
    written = read_predictions('preds')
    n_id = torch.cat([out['n_id'] for out in returned])
    pred = torch.cat([out['pred'] for out in returned])
    assert written['node_ids'].tolist() == list(range(2000))  # every node
    assert torch.equal(written['predictions'], pred[torch.argsort(n_id)])
    assert torch.equal(written['logits'].argmax(-1), written['predictions'])
    manifest = json.loads((cache_env / 'preds' / 'predictions.json')
                          .read_text())
    assert manifest['model'] == 'NodeClassifier'
    assert manifest['num_nodes'] == 2000


def test_pyg_fastload_predict_writes_every_node(cache_env, capsys):
    tiny = ['--data.dataset', 'tiny', '--data.num_neighbors', '[5, 5]',
            '--data.batch_size', '512', '--data.progress', 'false',
            '--model.hidden_channels', '16', '--model.num_layers', '2',
            '--trainer.accelerator', 'cpu',
            '--trainer.default_root_dir', str(cache_env / 'runs')]
    cli_succeeds(['fit', *tiny, '--trainer.max_epochs', '1'])
    ckpt = next((cache_env / 'runs').rglob('*.ckpt'))
    cli_succeeds(['predict', *tiny, '--ckpt_path', str(ckpt),
               '--trainer.callbacks+=pyg_fastload.lightning.PredictionWriter',
               '--trainer.callbacks.out_dir', 'preds'])
    out = capsys.readouterr().out
    assert "wrote the predicted classes of 2,000 nodes to '" in out
    assert read_predictions('preds')['node_ids'].tolist() == list(
        range(2000))


def _full_batch_and_its_accuracy(model, trainer):
    r"""The tiny graph's full-batch outputs of :obj:`model`, after checking
    that the validation accuracy :obj:`trainer` logged is theirs."""
    from pyg_fastload.datasets import load_synthetic
    graph = load_synthetic('tiny', progress=False).to_data()
    model.eval()
    with torch.no_grad():
        full = model.net(graph.x, graph.edge_index)
    val = graph.val_mask.nonzero().view(-1)
    expected = (full[val].argmax(-1) == graph.y[val]).float().mean()
    assert trainer.callback_metrics['val_acc'] == pytest.approx(
        float(expected), abs=1e-6)
    return full


def test_layerwise_evaluation_gives_the_full_batch_outputs(cache_env):
    data = FastLoadDataModule('tiny', num_neighbors=[5, 5], batch_size=256,
                              progress=False, eval='layerwise')
    model = NodeClassifier(hidden_channels=16, num_layers=2, dropout=0.0)
    trainer = _trainer()
    trainer.fit(model, data)
    full = _full_batch_and_its_accuracy(model, trainer)
    writer = PredictionWriter('preds', logits=True)
    _trainer(writer).predict(model, data)
    written = read_predictions('preds')
    assert written['node_ids'].tolist() == list(range(full.size(0)))
    assert torch.allclose(written['logits'], full, atol=1e-4)
    assert torch.equal(written['predictions'], full.argmax(-1))


def test_layerwise_evaluation_of_a_hetero_graph_is_the_full_batch_one(
        hetero_graph, cache_env):
    hetero_graph['paper'].val_mask = ~hetero_graph['paper'].train_mask
    data = FastLoadDataModule(hetero_graph, num_neighbors=[4, 4],
                              batch_size=64, progress=False,
                              eval='layerwise')
    model = NodeClassifier(hidden_channels=8, num_layers=2, dropout=0.0)
    trainer = _trainer()
    trainer.fit(model, data)
    whole = hetero_graph.clone()
    for node_type in whole.node_types:
        whole[node_type].n_id = torch.arange(whole[node_type].num_nodes)
    model.eval()
    model.net.trim = False
    with torch.no_grad():
        full = model.net(whole)  # the labelled type's logits
    y = hetero_graph['paper'].y
    val = hetero_graph['paper'].val_mask.nonzero().view(-1)
    expected = (full[val].argmax(-1) == y[val]).float().mean()
    assert trainer.callback_metrics['val_acc'] == pytest.approx(
        float(expected), abs=1e-6)
    writer = PredictionWriter('preds', logits=True)
    _trainer(writer).predict(model, data)
    written = read_predictions('preds')
    assert written['node_ids'].tolist() == list(range(y.numel()))
    assert torch.allclose(written['logits'], full, atol=1e-4)


def test_layerwise_evaluation_refuses_what_it_cannot_walk():
    with pytest.raises(ConfigError, match="is for task 'node'"):
        FastLoadDataModule('tiny', task='link', eval='layerwise',
                           progress=False)
    with pytest.raises(ConfigError, match="'every' is not one of"):
        FastLoadDataModule('tiny', eval='every', progress=False)


@pytest.mark.parametrize('eval', ['sampled', 'layerwise'])
def test_embeddings_are_the_last_hidden_layer(cache_env, eval):
    from pyg_fastload.datasets import load_synthetic
    data = FastLoadDataModule('tiny', num_neighbors=[-1, -1], batch_size=512,
                              progress=False, eval=eval)
    model = NodeClassifier(in_channels=16, num_classes=4, hidden_channels=8,
                           num_layers=2, predict_embeddings=True)
    _trainer(PredictionWriter('preds')).predict(model, data)
    graph = load_synthetic('tiny', progress=False).to_data()
    model.eval()
    with torch.no_grad():  # what the last layer reads, for every node
        hidden = model.net.act(model.net.convs[0](graph.x,
                                                  graph.edge_index))
    written = read_predictions('preds')
    assert written['embeddings'].shape == (2000, 8)
    # all in-neighbours sampled (-1): both ways give every node's exact rows
    assert torch.allclose(written['embeddings'], hidden, atol=1e-5)
    with pytest.raises(ConfigError, match='2 or more layers'):
        NodeClassifier(model='mlp', predict_embeddings=True)


@pytest.mark.parametrize('eval', ['sampled', 'layerwise'])
def test_hetero_embeddings_are_the_last_hidden_layer(hetero_graph,
                                                     cache_env, eval):
    data = FastLoadDataModule(hetero_graph, num_neighbors=[-1, -1],
                              batch_size=64, progress=False, eval=eval)
    model = NodeClassifier(hidden_channels=8, num_layers=2,
                           predict_embeddings=True)
    _trainer(PredictionWriter('preds')).predict(model, data)
    whole = hetero_graph.clone()
    for node_type in whole.node_types:
        whole[node_type].n_id = torch.arange(whole[node_type].num_nodes)
    read = {}
    model.eval()
    model.net.trim = False
    model.net.convs[-1].register_forward_pre_hook(
        lambda module, args: read.update(args[0]))
    with torch.no_grad():
        model.net(whole)
    written = read_predictions('preds')
    papers = hetero_graph['paper'].num_nodes
    assert written['node_ids'].tolist() == list(range(papers))
    assert written['embeddings'].shape == (papers, 8)
    assert torch.allclose(written['embeddings'], read['paper'], atol=1e-5)


def test_layerwise_classes_alone_from_layers_in_files(cache_env, tmp_path):
    work = tmp_path / 'layers'
    # every layer over the budget: in files, in a directory of each
    # inference's own; validation runs twice over the same work_dir
    data = FastLoadDataModule(
        'tiny', num_neighbors=[5, 5], batch_size=256, progress=False,
        eval='layerwise', inference={'memory_budget': 0, 'chunk_size': 300,
                                     'work_dir': str(work), 'stream': True})
    model = NodeClassifier(hidden_channels=16, num_layers=2, dropout=0.0,
                           predict_logits=False)
    trainer = _trainer()
    trainer.fit(model, data)
    trainer.validate(model, data, verbose=False)
    full = _full_batch_and_its_accuracy(model, trainer)
    calls = []
    model.net.convs[-1].register_forward_hook(
        lambda module, args, out: calls.append(out.size(0)))
    _trainer(PredictionWriter('preds')).predict(model, data)
    assert max(calls) <= 300  # the last layer ran chunk by chunk
    written = read_predictions('preds')
    assert torch.equal(written['predictions'], full.argmax(-1))
    assert 'logits' not in written
    assert list(work.iterdir()) == []  # every inference's files removed
    with pytest.raises(ConfigError, match="'logits' is true, but the model "
                       "predicts classes alone"):
        _trainer(PredictionWriter('other', logits=True)).predict(model, data)


@pytest.mark.reliability(
    fault="bad `data.evaluation.inference` options: an unknown key, "
          "chunk_size 0, a memory_budget of 'lots', stream 'yes'",
    behaviour='`ConfigError` naming `evaluation.inference.<key>`, the value '
              'and what to give')
def test_bad_inference_options_are_named():
    for options, key in (
            ({'chunks': 3}, "'evaluation.inference': unknown keys"),
            ({'chunk_size': 0}, "'evaluation.inference.chunk_size'"),
            ({'memory_budget': 'lots'},
             "'evaluation.inference.memory_budget'"),
            ({'stream': 'yes'}, "'evaluation.inference.stream'")):
        with pytest.raises(ConfigError, match=key):
            FastLoadDataModule('tiny', evaluation={
                'method': 'layerwise', 'inference': options}, progress=False)
        with pytest.raises(ConfigError, match=key):  # the Python alias
            FastLoadDataModule('tiny', eval='layerwise', inference=options,
                               progress=False)


def test_streamed_inference_of_a_hetero_dataset_is_refused_at_once(
        hetero_graph):
    with pytest.raises(ConfigError, match="'evaluation.inference.stream': "
                       "streams a homogeneous graph's layers"):
        FastLoadDataModule(hetero_graph, eval='layerwise', progress=False,
                           inference={'stream': True})


@pytest.mark.reliability(
    fault="a heterogeneous model's checkpoint given to a homogeneous dataset, "
          "or the reverse (NodeClassifier, LinkPredictor); a PredictionWriter "
          "`out_dir` under a file",
    behaviour="one line naming `data.dataset` and both kinds of graph, exit "
              "status 2 (was: TypeError: HeteroNet.forward() takes 2 "
              "positional arguments); naming `trainer.callbacks` and the file "
              "in the way, before anything is predicted (was: a raw "
              "FileExistsError)")
def test_a_model_of_the_other_kind_of_graph_is_named(cache_env):
    from pyg_fastload.lightning import LinkPredictor
    hetero = FastLoadDataModule('hetero-tiny', num_neighbors=[3, 3],
                                batch_size=64, progress=False)
    homo = FastLoadDataModule('tiny', num_neighbors=[3, 3], batch_size=512,
                              progress=False)
    schema = hetero.hetero_schema.to_dict()
    for model, data, kinds in (
            (NodeClassifier(schema=schema, hidden_channels=8, num_layers=2),
             homo, ('heterogeneous', 'homogeneous')),
            (NodeClassifier(in_channels=16, num_classes=4, hidden_channels=8,
                            num_layers=2), hetero,
             ('homogeneous', 'heterogeneous (node types paper')),
            (LinkPredictor(schema=schema, hidden_channels=8,
                           edge_type=['author', 'writes', 'paper']), homo,
             ('heterogeneous', 'homogeneous'))):
        with pytest.raises(ConfigError, match=f'the model is {kinds[0]} .* '
                           f'and the dataset {re.escape(kinds[1])}') as info:
            _trainer().predict(model, data)
        assert info.value.config_key == 'data.dataset'
    (cache_env / 'afile').write_text('mine')
    model = NodeClassifier(in_channels=16, num_classes=4, hidden_channels=8,
                           num_layers=2)
    with pytest.raises(ConfigError, match="PredictionWriter: output path "
                       "'afile/preds' lies under 'afile', which is a file"):
        _trainer(PredictionWriter('afile/preds')).predict(model, homo)
    assert (cache_env / 'afile').read_text() == 'mine'
    # the command: one line (a process of its own: the error ends it)
    hetero_model = NodeClassifier(schema=schema, hidden_channels=8,
                                  num_layers=2)
    torch.save({'pytorch-lightning_version': pl.__version__,
                'state_dict': hetero_model.state_dict(),
                'hyper_parameters': dict(hetero_model.hparams)},
               cache_env / 'hetero.ckpt')
    done = run_command(
        ['predict', '--data.dataset', 'tiny', '--data.progress', 'false',
         '--trainer.accelerator', 'cpu', '--ckpt_path', 'hetero.ckpt'])
    assert done.returncode == 2, done.stderr[-3000:]
    assert 'Traceback' not in done.stderr, done.stderr[-3000:]
    assert done.stderr.strip().splitlines()[-1].startswith(
        "pyg-fastload: error: config key 'data.dataset': the model is "
        "heterogeneous"), done.stderr[-3000:]
