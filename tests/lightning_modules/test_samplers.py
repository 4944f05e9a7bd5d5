r"""The data module's ``sampler`` (the sampler seam in configs): by name or
``{class_path, init_args}``, through every model, and the weighted SAGE
layers LABOR-*'s batches need."""
import pytest
import pytorch_lightning as pl
import torch
from torch_geometric.nn import SAGEConv

from pyg_fastload.config import SettingError
from pyg_fastload.lightning import (ConfigError, FastLoadDataModule,
                                    LinkPredictor, NodeClassifier)
from pyg_fastload.lightning import node_classifier
from pyg_fastload.lightning.command import main
from pyg_fastload.lightning.sage import WeightedGraphSAGE, WeightedSAGEConv
from pyg_fastload.modes import LoadingSpec
from pyg_fastload.partition import partition_dataset
from pyg_fastload.sampling import FastNeighborSampler, LaborSampler
from pyg_fastload.sampling.saint import SaintRandomWalkSampler

from ..helpers import requires_torch_sparse


pytestmark = [
    pytest.mark.filterwarnings("ignore:LightningCLI's args parameter"),
    pytest.mark.filterwarnings('ignore::DeprecationWarning'),
]

IMPORTANCE = {'class_path': 'labor', 'init_args': {'importance_sampling': 1}}
SAINT = {'class_path': 'saint_rw', 'init_args': {'sample_coverage': 20}}


def _trainer(steps=2):
    return pl.Trainer(max_steps=steps, limit_val_batches=1, logger=False,
                      accelerator='cpu', enable_checkpointing=False,
                      enable_progress_bar=False, enable_model_summary=False,
                      num_sanity_val_steps=0)


def test_a_weighted_sage_layer_sums_the_weighted_rows():
    torch.manual_seed(0)
    conv = WeightedSAGEConv(4, 3)
    plain = SAGEConv(4, 3)
    plain.load_state_dict(conv.state_dict())  # the same parameters
    x = torch.randn(6, 4)
    edge_index = torch.tensor([[1, 2, 3, 4, 5, 1], [0, 0, 0, 1, 1, 2]])
    torch.testing.assert_close(conv(x, edge_index), plain(x, edge_index))
    weight = torch.tensor([0.5, 0.25, 0.25, 2.0, 1.0, 3.0])
    aggregate = torch.zeros(6, 4).index_add_(
        0, edge_index[1], x[edge_index[0]] * weight.view(-1, 1))
    want = conv.lin_l(aggregate) + conv.lin_r(x)
    torch.testing.assert_close(conv(x, edge_index, edge_weight=weight), want)
    net = WeightedGraphSAGE(4, 8, num_layers=2, out_channels=3)
    assert isinstance(net.convs[0], WeightedSAGEConv)
    assert not torch.allclose(net(x, edge_index, edge_weight=weight),
                              net(x, edge_index))


def test_the_data_module_builds_the_named_sampler_for_every_loader():
    data = FastLoadDataModule('tiny', num_neighbors=[5, 5], batch_size=256,
                              progress=False, sampler='labor')
    data.setup('fit')
    for loader in (data.train_dataloader(), data.val_dataloader()):
        assert type(loader.node_sampler) is LaborSampler
    assert data.edge_weights is False
    default = FastLoadDataModule('tiny', progress=False).spec.sampler
    assert default.kind is FastNeighborSampler and not default.options


@pytest.mark.parametrize('hetero', [False, True])
def test_importance_weights_reach_the_model(hetero, monkeypatch):
    dataset = 'hetero-tiny' if hetero else 'tiny'
    data = FastLoadDataModule(dataset, num_neighbors=[4, 3], batch_size=64,
                              progress=False, sampler=IMPORTANCE)
    assert data.edge_weights is True
    seen = []
    real = WeightedSAGEConv.forward

    def spy(self, x, edge_index, size=None, edge_weight=None):
        seen.append(edge_weight is not None)
        return real(self, x, edge_index, size, edge_weight)
    monkeypatch.setattr(WeightedSAGEConv, 'forward', spy)
    model = NodeClassifier(hidden_channels=16, num_layers=2)
    _trainer().fit(model, data)
    assert model.edge_weights is True
    assert seen and all(seen)  # every layer, every step aggregated weighted


def test_a_node_classifier_trains_on_graphsaint_subgraphs(monkeypatch):
    r"""``data.sampler: saint_rw`` trains on subgraphs: each step's loss
    over the subgraph's training nodes (its seeds) weighed by
    ``node_norm`` (the batch contract's), every layer aggregating with
    GraphSAINT's weights; validation on sampled neighbourhoods; accuracy
    well above chance (4 classes) after 4 epochs."""
    pl.seed_everything(0, verbose=False)
    data = FastLoadDataModule('tiny', num_neighbors=[5, 5], batch_size=128,
                              progress=False, sampler=SAINT)
    assert data.edge_weights is True
    losses, weighed = [], []
    real_loss, real_conv = node_classifier.seed_loss, WeightedSAGEConv.forward

    def loss_spy(logits, y, batch):
        seeds = batch.train_mask[:batch.batch_size]
        losses.append('node_norm' in batch and bool(seeds.all()))
        return real_loss(logits, y, batch)

    def conv_spy(self, x, edge_index, size=None, edge_weight=None):
        if self.training:
            weighed.append(edge_weight is not None)
        return real_conv(self, x, edge_index, size, edge_weight)
    monkeypatch.setattr(node_classifier, 'seed_loss', loss_spy)
    monkeypatch.setattr(WeightedSAGEConv, 'forward', conv_spy)
    model = NodeClassifier(hidden_channels=32, num_layers=2)
    trainer = pl.Trainer(max_epochs=4, logger=False, accelerator='cpu',
                         enable_checkpointing=False,
                         enable_progress_bar=False,
                         enable_model_summary=False, num_sanity_val_steps=0)
    trainer.fit(model, data)
    assert losses and all(losses)
    assert weighed and all(weighed)
    assert type(data.train_dataloader().node_sampler) is \
        SaintRandomWalkSampler
    assert type(data.val_dataloader().node_sampler) is FastNeighborSampler
    assert float(trainer.callback_metrics['val_acc']) > 0.6


def test_models_that_cannot_weigh_are_refused():
    data = FastLoadDataModule('tiny', num_neighbors=[4, 3], batch_size=64,
                              progress=False, sampler=IMPORTANCE)
    with pytest.raises(ConfigError, match=r"data\.sampler.*model 'gat' "
                       r"cannot aggregate"):
        _trainer().fit(NodeClassifier(model='gat', hidden_channels=16,
                                      num_layers=2), data)
    links = FastLoadDataModule('tiny', num_neighbors=[4, 3], batch_size=64,
                               progress=False, sampler=IMPORTANCE,
                               task='link')
    with pytest.raises(ConfigError, match="encoder 'gcn' cannot"):
        _trainer().fit(LinkPredictor(encoder='gcn', hidden_channels=16,
                                     num_layers=2), links)


@requires_torch_sparse
@pytest.mark.parametrize('sampler', [IMPORTANCE, SAINT])
def test_a_sparse_adjacency_of_weighted_batches_is_refused(sampler):
    r"""PyG's layers aggregate over a sparse ``adj_t`` without its values:
    LABOR-1's and GraphSAINT's weights would be dropped (they were), so
    the combination is refused before the first step."""
    data = FastLoadDataModule('tiny', num_neighbors=[4, 3], batch_size=64,
                              progress=False, sampler=sampler,
                              adjacency='sparse')
    with pytest.raises(ConfigError, match=r"'data\.adjacency': 'sparse' "
                       r"with data\.sampler '(labor|saint_rw)'.*use "
                       r"data\.adjacency: edge_index"):
        _trainer().fit(NodeClassifier(hidden_channels=16, num_layers=2),
                       data)
    # LABOR-0's batches weigh nothing: its sparse adj_t is the graph's
    data = FastLoadDataModule('tiny', num_neighbors=[4, 3], batch_size=64,
                              progress=False, sampler='labor',
                              adjacency='sparse')
    model = NodeClassifier(hidden_channels=16, num_layers=2)
    _trainer().fit(model, data)
    assert model.global_step == 2


@requires_torch_sparse
def test_a_link_model_refuses_a_sparse_adjacency_of_weighted_batches():
    r"""A link encoder aggregates over a sparse ``adj_t`` as a node model
    does (without its values): LABOR-1's weights are refused with it,
    LABOR-0's unweighed batches train."""
    links = FastLoadDataModule('tiny', num_neighbors=[4, 3], batch_size=64,
                               progress=False, sampler=IMPORTANCE,
                               task='link', adjacency='sparse')
    with pytest.raises(ConfigError, match=r"'data\.adjacency': 'sparse' "
                       r"with data\.sampler 'labor'.*use "
                       r"data\.adjacency: edge_index"):
        _trainer().fit(LinkPredictor(hidden_channels=16, num_layers=2),
                       links)
    links = FastLoadDataModule('tiny', num_neighbors=[4, 3], batch_size=64,
                               progress=False, sampler='labor', task='link',
                               adjacency='sparse')
    model = LinkPredictor(hidden_channels=16, num_layers=2)
    _trainer().fit(model, links)
    assert model.global_step == 2 and model.edge_weights is False


def test_a_link_predictor_trains_on_labor_batches():
    links = FastLoadDataModule('tiny', num_neighbors=[4, 3], batch_size=64,
                               progress=False, sampler=IMPORTANCE,
                               task='link')
    model = LinkPredictor(hidden_channels=16, num_layers=2)
    _trainer().fit(model, links)
    assert model.edge_weights is True
    batch = next(iter(links.train_dataloader()))
    assert batch.edge_weight.numel() == batch.edge_index.size(1)


@pytest.mark.reliability(
    fault='`data.sampler` naming no sampler, a class of a package a config '
          'may not import, or LABOR-* (`importance_sampling`) in mode dsp',
    behaviour="one line naming `data.sampler` (or `SettingError('sampler')`"
              ") and the fix, before anything trains")
def test_bad_sampler_settings_are_named(cache_env, capsys, tiny_dir):
    metis_parts = cache_env / 'parts'
    partition_dataset(tiny_dir[0], metis_parts, 2, 'metis', progress=False)
    with pytest.raises(SettingError, match="'sampler' = 'labour' is not a "
                       "sampler"):
        LoadingSpec(sampler='labour')
    with pytest.raises(SystemExit):
        main(['fit', '--data.dataset', 'tiny', '--data.sampler',
              'os.path.join', '--trainer.max_steps', '1'])
    err = capsys.readouterr().err
    assert "config key 'data.sampler': 'os.path.join' is neither a sampler" \
        in err
    assert 'Traceback' not in err and [
        line for line in err.splitlines() if line.startswith('error')] == [
        line for line in err.splitlines() if 'data.sampler' in line], err
    with pytest.raises(ConfigError, match="sampler.*mode 'dsp'.*LABOR-\\*"):
        FastLoadDataModule(partitions=str(metis_parts), mode='dsp',
                           sampler=IMPORTANCE, progress=False)
    with pytest.raises(ConfigError, match="sampling: layer draws DSP's"):
        FastLoadDataModule(partitions=str(metis_parts), mode='dsp',
                           sampler='labor', progress=False,
                           mode_options={'sampling': 'layer'})


@pytest.mark.reliability(
    fault='`data.sampler` a GraphSAINT or random-walk sampler where it '
          'cannot run: modes dsp and hopgnn (subgraphs), hopgnn (walks), '
          'pagraph (nodes drawn anywhere, or walks deeper than the parts), '
          'task link, a heterogeneous dataset, or a model that cannot weigh '
          'edges',
    behaviour="`ConfigError` naming `sampler` with the reason and what to "
              "use instead, before anything trains")
def test_samplers_a_mode_cannot_run_are_refused(cache_env, tiny_dir):
    dataset = str(tiny_dir[0])
    metis, pagraph = cache_env / 'metis', cache_env / 'pagraph'
    partition_dataset(dataset, metis, 2, 'metis', progress=False)
    partition_dataset(dataset, pagraph, 2, 'pagraph', progress=False,
                      num_hops=2)
    refused = [
        ('dsp', metis, 'saint_rw', "sampler.*mode 'dsp'.*not hop-wise.*"
         "use mode 'replicated' or 'pagraph', or sampler: random_walk"),
        ('hopgnn', metis, 'saint_node', "mode 'hopgnn'.*use mode "
         "'replicated', or sampler: random_walk"),
        ('hopgnn', metis, 'random_walk', "HopGNN's time steps split a "
         "batch by its per-hop node counts"),
        ('pagraph', pagraph, 'saint_node', "mode 'pagraph': it draws its "
         "batches anywhere in the graph"),
        ('pagraph', pagraph, 'saint_rw', r"sampler.*3 hops sampled from the "
         r"PaGraph parts.*saint_rw: a walk's steps and the in-edges of its "
         r"last node.*--num-hops 3"),
    ]
    for mode, parts, sampler, message in refused:
        with pytest.raises(ConfigError, match=message):
            FastLoadDataModule(dataset, partitions=str(parts), mode=mode,
                               num_neighbors=[1, 1], sampler=sampler,
                               progress=False)
    with pytest.raises(ConfigError, match="sampler.*task 'link'.*use "
                       "sampler: neighbor, labor or random_walk"):
        FastLoadDataModule('tiny', task='link', sampler='saint_rw',
                           progress=False)
    with pytest.raises(ConfigError, match="random_walk with mode "
                       "'replicated': it samples homogeneous graphs"):
        FastLoadDataModule('hetero-tiny', sampler='random_walk',
                           progress=False)
    with pytest.raises(ConfigError, match=r"data\.sampler.*GraphSAINT's "
                       r"edge_norm\), which model 'gcn' cannot aggregate"):
        _trainer().fit(NodeClassifier(model='gcn', hidden_channels=16,
                                      num_layers=2), FastLoadDataModule(
            'tiny', num_neighbors=[4, 3], batch_size=64, progress=False,
            sampler=SAINT))


def test_a_config_names_the_sampler(cache_env):
    config = cache_env / 'labor.yaml'
    config.write_text(
        'data:\n  dataset: tiny\n  num_neighbors: [4, 3]\n  batch_size: 256\n'
        '  progress: false\n  sampler:\n    class_path: labor\n'
        '    init_args:\n      importance_sampling: 1\n'
        '      layer_dependency: true\n'
        'model:\n  hidden_channels: 16\n  num_layers: 2\n'
        'trainer:\n  max_steps: 2\n  limit_val_batches: 1\n'
        '  accelerator: cpu\n  logger: false\n'
        '  enable_checkpointing: false\n')
    main(['fit', '-c', str(config)])
