import dataclasses

import pytest
import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import ModelCheckpoint
from torch_geometric.data import Data

from pyg_fastload.lightning import (
    ConfigError,
    EvalSettings,
    FastLoadDataModule,
    FeatureCache,
    NodeClassifier,
    PipelineSettings,
)
from pyg_fastload import TieredFeatureStore
from pyg_fastload.datasets import load_synthetic, prepare_synthetic
from pyg_fastload.inference import InferenceOptions

from ..helpers import requires_torch_sparse, timed_links


@pytest.fixture(scope='module')
def cache_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp('synthetic'))


@pytest.fixture(scope='module')
def tiny_dir(tmp_path_factory, cache_dir):
    out = tmp_path_factory.mktemp('datasets') / 'tiny'
    prepare_synthetic('tiny', out, cache_root=cache_dir, progress=False)
    return out


def module(cache_dir, **kwargs) -> FastLoadDataModule:
    kwargs.setdefault('dataset', 'tiny')
    kwargs.setdefault('num_neighbors', [5, 5])
    kwargs.setdefault('batch_size', 128)
    kwargs.setdefault('pipeline', False)
    return FastLoadDataModule(cache_dir=cache_dir, progress=False, **kwargs)


def trainer(tmp_path, epochs=1, callbacks=(), **kwargs) -> pl.Trainer:
    return pl.Trainer(max_epochs=epochs, accelerator='cpu', logger=False,
                      enable_progress_bar=False, enable_model_summary=False,
                      default_root_dir=tmp_path, callbacks=list(callbacks),
                      **kwargs)


def test_preset_metadata_before_setup(cache_dir):
    dm = module(cache_dir)
    assert (dm.num_features, dm.num_classes) == (16, 4)
    assert dm.data is None  # nothing loaded yet


@pytest.mark.parametrize('cache', [None, FeatureCache(host_budget=0.1,
                                                      device_budget='5%')])
def test_preset_loaders(cache_dir, cache):
    dm = module(cache_dir, feature_cache=cache, eval_batch_size=300)
    dm.setup('fit')
    assert (dm.feature_store is not None) == (cache is not None)
    train = next(iter(dm.train_dataloader()))
    assert train.batch_size == 128
    assert train.x.size(1) == 16 and train.y.numel() == train.num_nodes
    assert bool(train.train_mask[:train.batch_size].all())
    val = next(iter(dm.val_dataloader()))
    assert val.batch_size == 300 and bool(val.val_mask[:300].all())
    graph = load_synthetic('tiny', root=cache_dir, progress=False)
    assert torch.equal(train.x, graph.x[train.n_id])
    if cache is not None:
        stats = dm.feature_store.stats()['x']
        assert stats['device']['requests'] > 0


@requires_torch_sparse
def test_sparse_adjacency(cache_dir):
    dm = module(cache_dir, adjacency='sparse')
    batch = next(iter(dm.train_dataloader()))
    assert batch.adj_t.sizes() == [batch.num_nodes, batch.num_nodes]
    model = NodeClassifier('gcn', in_channels=16, num_classes=4,
                           hidden_channels=8, num_layers=2)
    assert model(batch).shape == (batch.num_nodes, 4)


def test_dataset_directory_reads_features_from_disk(cache_dir, tiny_dir):
    dm = module(cache_dir, dataset=str(tiny_dir),
                feature_cache={'host_budget': '10%'})
    assert (dm.num_features, dm.num_classes) == (16, 4)
    dm.setup('fit')
    assert isinstance(dm.feature_store, TieredFeatureStore)
    assert 'MmapStorage' in repr(dm.feature_store)
    batch = next(iter(dm.test_dataloader()))
    graph = load_synthetic('tiny', root=cache_dir, progress=False)
    assert torch.equal(batch.x, graph.x[batch.n_id])
    assert bool(batch.test_mask[:batch.batch_size].all())


def test_data_object_and_saved_file(cache_dir, tmp_path):
    data = load_synthetic('tiny', root=cache_dir, progress=False).to_data()
    dm = FastLoadDataModule(data, num_neighbors=[3], batch_size=64,
                            progress=False)
    assert (dm.num_features, dm.num_classes) == (16, 4)
    assert 'dataset' not in dm.hparams  # a Data is not a hyper-parameter
    assert next(iter(dm.train_dataloader())).x.size(1) == 16
    assert dm.train_dataloader().run_ahead == 'adaptive'
    dm = FastLoadDataModule(data, num_neighbors=[3], batch_size=64,
                            run_ahead='trainer_first', progress=False)
    assert dm.train_dataloader().run_ahead == 'trainer_first'
    path = tmp_path / 'graph.pt'
    torch.save(Data(x=data.x, y=data.y, edge_index=data.edge_index,
                    train_mask=data.train_mask), path)
    dm = FastLoadDataModule(str(path), num_neighbors=[3], batch_size=64)
    assert dm.num_classes == 4
    with pytest.raises(ConfigError, match="no 'val_mask'"):
        dm.val_dataloader()


@pytest.mark.parametrize('kwargs, key', [
    (dict(dataset='no/such/dir'), 'dataset'),
    (dict(num_neighbors=[5, -3]), 'num_neighbors'),
    (dict(batch_size=0), 'batch_size'),
    (dict(pipeline='sometimes'), 'pipeline'),
    (dict(run_ahead='eager'), 'run_ahead'),
    (dict(pipeline_settings={'run_ahead': 'eager'}),
     'pipeline_settings.run_ahead'),
    (dict(adjacency='dense'), 'adjacency'),
    (dict(feature_cache={'host_budget': '150%'}),
     'feature_cache.host_budget'),
    (dict(feature_cache={'device_budget': '64TiB'}),
     'feature_cache.device_budget'),
    (dict(feature_cache={'host_budget': 'lots'}),
     'feature_cache.host_budget'),
    (dict(feature_cache={'colour': 'red'}), 'feature_cache'),
    (dict(feature_cache={'window': 0}), 'feature_cache.window'),
])
def test_bad_arguments_name_their_key(cache_dir, kwargs, key):
    with pytest.raises(ConfigError) as info:
        module(cache_dir, **kwargs)
    assert info.value.key == key
    assert info.value.config_key == f'data.{key}'


@pytest.mark.skipif(torch.cuda.is_available(), reason='the run is on CUDA')
def test_gds_storage_on_a_cpu_run_names_the_fix(cache_dir):
    dm = module(cache_dir, feature_cache={'storage': 'gds'})
    with pytest.raises(ConfigError, match="device is cpu: use storage: "
                                          "direct") as info:
        dm.setup('fit')
    assert info.value.config_key == 'data.feature_cache.storage'


@pytest.mark.skipif(torch.cuda.is_available(), reason='the run is on CUDA')
def test_gpu_sampling_on_a_cpu_run_names_the_fix(cache_dir):
    dm = module(cache_dir, sampling_device='cuda')
    with pytest.raises(ConfigError, match="device is cpu: use "
                                          "sampling_device: cpu") as info:
        dm.setup('fit')
    assert info.value.config_key == 'data.pipeline_settings.sampling_device'


def test_pipeline_settings_come_as_one_object_or_as_keywords(cache_dir):
    given = PipelineSettings(pipeline=True, queue_capacity=3,
                             sampling_workers=1, run_ahead=2)
    dm = FastLoadDataModule('tiny', cache_dir=cache_dir, progress=False,
                            pipeline_settings=given)
    assert dm.spec.pipeline_settings == dataclasses.replace(
        given, sampling_device='cpu')  # the run's default
    flat = FastLoadDataModule('tiny', cache_dir=cache_dir, progress=False,
                              pipeline=True, queue_capacity=3, run_ahead=2)
    assert flat.spec == dm.spec
    # a checkpoint's hyper-parameters hold the keywords, as plain values
    assert flat.hparams['pipeline_settings'] == dataclasses.asdict(given)
    # a keyword of its own replaces the field of the object
    assert module(cache_dir, pipeline_settings=given,
                  pipeline=False).spec.pipeline_settings.pipeline is False
    loader = flat.train_dataloader()
    assert (loader.pipeline, loader.queue_capacity, loader.run_ahead) == (
        True, 3, 2)
    with pytest.raises(TypeError, match=r"unexpected keyword arguments "
                       r"\['queue'\]"):
        module(cache_dir, queue=3)


def test_evaluation_and_launch_order_come_as_objects_or_keywords(cache_dir):
    grouped = module(cache_dir, evaluation=EvalSettings([3], 200),
                     mode_options={'launch_order': 'coordinator'})
    flat = module(cache_dir, eval_num_neighbors=[3], eval_batch_size=200,
                  launch_order='coordinator')
    assert flat.spec == grouped.spec
    assert flat.spec.evaluation == EvalSettings([3], 200)
    assert flat.spec.mode_options.launch_order == 'coordinator'
    assert flat.hparams['evaluation'] == {
        'num_neighbors': [3], 'batch_size': 200, 'method': 'sampled',
        'inference': dataclasses.asdict(InferenceOptions())}
    assert flat.hparams['mode_options']['launch_order'] == 'coordinator'
    # unset fields take the training values; a keyword replaces a field
    both = module(cache_dir, evaluation={'num_neighbors': [3]},
                  eval_batch_size=50)
    assert both.spec.evaluation == EvalSettings([3], 50)
    assert module(cache_dir).spec.evaluation == EvalSettings([5, 5], 128)
    loader = flat.val_dataloader()
    assert loader.batch_size == 200
    assert list(loader.node_sampler.num_neighbors) == [3]
    with pytest.raises(ConfigError) as info:
        module(cache_dir, eval_batch_size=0)
    assert info.value.config_key == 'data.evaluation.batch_size'


def test_the_evaluation_method_and_inference_options_are_evaluation_fields(
        cache_dir):
    grouped = module(cache_dir, evaluation=EvalSettings(
        method='layerwise', inference=InferenceOptions(chunk_size=300)))
    flat = module(cache_dir, eval='layerwise',
                  inference={'chunk_size': 300})
    assert flat.spec == grouped.spec
    assert flat.spec.evaluation.method == 'layerwise'
    assert flat.spec.evaluation.inference == InferenceOptions(chunk_size=300)
    assert flat.hparams['evaluation']['inference']['chunk_size'] == 300
    # an alias replaces its field of the object given
    both = module(cache_dir, evaluation={'method': 'layerwise'},
                  eval='sampled')
    assert both.spec.evaluation.method == 'sampled'
    assert module(cache_dir).spec.evaluation.inference == InferenceOptions()
    with pytest.raises(ConfigError) as info:
        module(cache_dir, evaluation={'method': 'every'})
    assert info.value.config_key == 'data.evaluation.method'


@pytest.mark.skipif(not torch.cuda.is_available(), reason='needs CUDA')
@pytest.mark.parametrize('sampling_device', ['cpu', 'cuda'])
def test_fit_on_a_gpu_samples_where_asked(cache_dir, sampling_device):
    seen = []

    class Where(pl.Callback):
        def on_train_batch_start(self, trainer, pl_module, batch, idx):
            seen.append((batch.n_id.device.type, batch.x.device.type))

    dm = module(cache_dir, sampling_device=sampling_device)
    model = NodeClassifier('sage', hidden_channels=32, num_layers=2,
                           dropout=0.0, lr=0.01)
    trainer = pl.Trainer(accelerator='gpu', devices=1, max_epochs=3,
                         logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, callbacks=[Where()])
    trainer.fit(model, dm)
    assert seen and all(x == 'cuda' for _, x in seen)
    assert all(n == 'cuda' for n, _ in seen)  # moved or sampled there
    loader = dm.train_dataloader()
    assert loader.node_sampler.device.type == sampling_device
    # 4 classes: chance is about 0.25 (the CPU run reaches 0.6 in 3 epochs)
    assert float(trainer.callback_metrics['val_acc']) > 0.4


def test_fit_beats_chance_and_resume_gives_same_next_batch(cache_dir,
                                                           tmp_path):
    class Record(pl.Callback):
        def __init__(self):
            self.first = {}

        def on_train_batch_start(self, trainer, pl_module, batch, idx):
            self.first.setdefault(trainer.current_epoch, batch.n_id.clone())

    def run(epochs, record, ckpt_path=None, checkpoint=None):
        pl.seed_everything(0)
        dm = module(cache_dir)
        model = NodeClassifier('sage', hidden_channels=32, num_layers=2,
                               dropout=0.0, lr=0.01)
        callbacks = [record] + ([checkpoint] if checkpoint else [])
        fit = trainer(tmp_path, epochs, callbacks,
                      enable_checkpointing=checkpoint is not None)
        fit.fit(model, datamodule=dm, ckpt_path=ckpt_path)
        return fit

    checkpoint = ModelCheckpoint(dirpath=tmp_path / 'ckpt',
                                 save_top_k=-1, every_n_epochs=1)
    straight = Record()
    fit = run(3, straight, checkpoint=checkpoint)
    # 4 classes: chance is about 0.25.
    assert float(fit.callback_metrics['val_acc']) > 0.6
    resumed = Record()
    run(3, resumed, ckpt_path=str(tmp_path / 'ckpt' /
                                  'epoch=0-step=8.ckpt'))
    assert sorted(resumed.first) == [1, 2]
    for epoch in (1, 2):
        assert torch.equal(resumed.first[epoch], straight.first[epoch])


def test_distributed_settings_are_checked(tiny_dir):
    dataset_dir = tiny_dir
    with pytest.raises(ConfigError, match="mode 'pagraph' needs a partition"):
        FastLoadDataModule(dataset=str(dataset_dir), mode='pagraph')
    with pytest.raises(ConfigError, match="only used by the partitioned "
                       "modes"):
        FastLoadDataModule(dataset=str(dataset_dir), partitions='parts')
    with pytest.raises(ConfigError, match="'ring' is not one of"):
        FastLoadDataModule(dataset=str(dataset_dir), mode='ring')
    with pytest.raises(ConfigError, match="'dist_timeout': 0 must be"):
        FastLoadDataModule(dataset=str(dataset_dir), dist_timeout=0)


@pytest.mark.parametrize('mode, options, key, text', [
    ('replicated', {'merges': 1}, 'mode_options', "of mode 'hopgnn'"),
    ('pagraph', {'sampling': 'layer'}, 'mode_options', "of mode 'dsp'"),
    ('dsp', {'sampling': 'edge'}, 'mode_options.sampling', "'edge'"),
    ('hopgnn', {'merges': -1}, 'mode_options.merges', 'int >= 0'),
])
def test_mode_options_a_mode_would_ignore_or_cannot_take_are_refused(
        mode, options, key, text):
    with pytest.raises(ConfigError, match=text) as info:
        FastLoadDataModule(dataset='tiny', mode=mode, mode_options=options,
                           partitions=None if mode == 'replicated'
                           else 'parts')
    assert info.value.key == key



@pytest.mark.reliability(
    fault="Lightning's limit_train_batches / limit_val_batches ending a "
          "collective mode's epoch early (dsp, hopgnn)",
    behaviour="every rank's loaders sample and fetch exactly the batches the "
              "loop takes (was: some ranks' stages a collective ahead of the "
              "others', a gloo size mismatch at the end of a 4-rank "
              "papers-like epoch)")
def test_a_collective_mode_samples_only_the_batches_the_loop_takes(
        tiny_dir, tmp_path):
    from pyg_fastload.partition import partition_dataset
    dataset_dir = tiny_dir
    parts = tmp_path / 'one'
    partition_dataset(dataset_dir, parts, 1, 'metis', progress=False)
    dm = FastLoadDataModule(partitions=str(parts), mode='dsp',
                            num_neighbors=[3], batch_size=32, progress=False)
    dm.trainer = pl.Trainer(limit_train_batches=3, limit_val_batches=0.5,
                            logger=False, enable_checkpointing=False,
                            enable_progress_bar=False)
    # (a loop that stopped early would leave a rank's stages a collective
    # ahead of the others')
    assert len(dm.train_dataloader()) == 3
    assert sum(1 for _ in dm.train_dataloader()) == 3
    val = len(dm.val_dataloader())
    dm.trainer = pl.Trainer(logger=False, enable_checkpointing=False,
                            enable_progress_bar=False)
    assert val == len(dm.val_dataloader()) // 2 > 0


@pytest.fixture(scope='module')
def temporal_links(tmp_path_factory):
    r"""``(dataset dir, Data)``: a random directed graph whose edges carry
    a ``time`` (repeated links at other times too), prepared from the saved
    ``Data`` (``prepare --pyg-data``: the times become an edge array)."""
    return timed_links(tmp_path_factory.mktemp('temporal-links'),
                       labelled=True)


def _original_order(graph_store) -> torch.Tensor:
    r"""The edge times of a graph store (CSC order) by edge id, as a
    batch's ``e_id`` names the edges."""
    time = graph_store.edge_array('time')
    edge_id = graph_store.topology.edge_id
    if edge_id is None:
        return time
    out = torch.empty_like(time)
    out[edge_id] = time
    return out


@pytest.mark.reliability(
    fault="a temporal link batch of the data module (task 'link', "
          "time_attr naming an edge array of the dataset) holding an edge "
          "later than its label edge, or label edges at other times than "
          "their edges'",
    behaviour="every label edge carries its edge's time, every negative its "
              "positive's; every sampled edge is an edge of the dataset at "
              "its own time, not later than its tree's label edge (training, "
              "validation and test; uniform and last)")
@pytest.mark.parametrize('strategy', ['uniform', 'last'])
def test_link_batches_in_time_hold_no_edge_later_than_their_label(
        tmp_path, temporal_links, strategy):
    from pyg_fastload.lightning import LinkOptions, LinkPredictor
    path, data = temporal_links
    dm = FastLoadDataModule(str(path), task='link', time_attr='time',
                            temporal_strategy=strategy, num_neighbors=[4, 4],
                            batch_size=128, eval_batch_size=220,
                            pipeline=False, progress=False,
                            link=LinkOptions(eval_edges=60, eval_negatives=10))
    if strategy == 'uniform':  # a short fit and validation go through
        trainer(tmp_path, limit_train_batches=3, limit_val_batches=2,
                enable_checkpointing=False).fit(
            LinkPredictor(hidden_channels=16), dm)
    dm.setup('fit')
    timed = set(zip(data.edge_index[0].tolist(), data.edge_index[1].tolist(),
                    data.time.tolist()))
    split = dm.loading.task.split
    for name in ('train', 'val', 'test'):
        loader = getattr(dm, f'{name}_dataloader')()
        assert loader.link_sampler.temporal_strategy == strategy
        edge_time = _original_order(dm.loading.task.graphs[
            'test' if name == 'test' else 'train'][1])
        sampled = 0
        for batch in loader:
            num_pos = batch.input_id.numel()
            label_time = batch.edge_label_time
            assert torch.equal(label_time[:num_pos],
                               split.label_time(name)[batch.input_id])
            # negatives (binary, training) at their positive's time
            assert torch.equal(label_time[num_pos:], label_time[
                torch.arange(num_pos, label_time.numel()) % num_pos])
            src, dst = batch.n_id[batch.edge_label_index]
            positive = batch.edge_label == 1
            assert all(edge in timed for edge in zip(
                src[positive].tolist(), dst[positive].tolist(),
                label_time[positive].tolist()))
            # every sampled edge: a dataset edge at its time, not later
            # than the label edge whose tree it is in
            time = edge_time[batch.e_id]
            tree = batch.batch[batch.edge_index[1]]
            assert bool((time <= label_time[tree]).all())
            src, dst = batch.n_id[batch.edge_index]
            assert all(edge in timed for edge in zip(
                src.tolist(), dst.tolist(), time.tolist()))
            sampled += time.numel()
        assert sampled >= 1000, name  # the check saw many edges


def test_a_link_dataset_without_labels_has_features_and_no_classes(
        tmp_path):
    from pyg_fastload.datasets import prepare_pyg
    from pyg_fastload.lightning import LinkPredictor
    gen = torch.Generator().manual_seed(0)
    path = tmp_path / 'graph.pt'
    torch.save(Data(x=torch.randn(100, 6, generator=gen),
                    edge_index=torch.randint(0, 100, (2, 600),
                                             generator=gen)), path)
    for dataset in (str(path), str(prepare_pyg(path, tmp_path / 'dir',
                                               progress=False).path)):
        dm = FastLoadDataModule(dataset, task='link', num_neighbors=[3],
                                batch_size=32, progress=False,
                                link={'eval_negatives': 20})
        assert (dm.num_features, dm.num_classes) == (6, 0)
        model = LinkPredictor(hidden_channels=8, num_layers=1)
        pl.Trainer(accelerator='cpu', max_steps=2, logger=False,
                   enable_progress_bar=False, enable_model_summary=False,
                   enable_checkpointing=False, limit_val_batches=1
                   ).fit(model, dm)
        assert model.encoder is not None  # built for the 6 features
        # a node task still needs the labels
        with pytest.raises(ConfigError, match="has no node labels 'y'"):
            FastLoadDataModule(dataset, num_neighbors=[3],
                               progress=False).num_classes
