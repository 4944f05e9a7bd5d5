from datetime import timedelta

import pytest
import torch

from pyg_fastload import FastNeighborLoader
from pyg_fastload.config import (PipelineSettings, SettingError,
                                 folded_setting)
from pyg_fastload.distributed import Collectives, DistContext
from pyg_fastload.modes import (
    DSP,
    MODES,
    DatasetSource,
    EvalSettings,
    HopGNN,
    LoadingSpec,
    ModeOptions,
    PaGraph,
    Replicated,
)
from pyg_fastload.modes import partitioned
from pyg_fastload.modes.contract import seed_loss, time_steps

from ..helpers import random_graph

#: A run sampling on the trainer's GPU.
ON_GPU = LoadingSpec(pipeline_settings={'sampling_device': 'cuda'})


@pytest.mark.parametrize('settings, key', [
    ({'num_neighbors': []}, 'num_neighbors'),
    ({'evaluation': {'num_neighbors': [-5]}}, 'evaluation.num_neighbors'),
    ({'evaluation': {'batch_size': 0}}, 'evaluation.batch_size'),
    ({'evaluation': {'fanouts': [5]}}, 'evaluation'),
    ({'batch_size': 0}, 'batch_size'),
    ({'batch_size': True}, 'batch_size'),
    ({'pipeline_settings': {'queue_capacity': 0}},
     'pipeline_settings.queue_capacity'),
    ({'pipeline_settings': {'run_ahead': 'eager'}},
     'pipeline_settings.run_ahead'),
    ({'pipeline_settings': {'sampling_workers': 0}},
     'pipeline_settings.sampling_workers'),
    ({'num_workers': -1}, 'num_workers'),
    ({'pipeline_settings': {'pipeline': 'sometimes'}},
     'pipeline_settings.pipeline'),
    ({'pipeline_settings': {'pipelin': True}}, 'pipeline_settings'),
    ({'feature_cache': {'host_budget': '150%'}}, 'feature_cache.host_budget'),
    ({'feature_cache': {'hots_budget': 1}}, 'feature_cache'),
    ({'adjacency': 'dense'}, 'adjacency'),
    ({'verify': 'md5'}, 'verify'),
    ({'mode_options': {'launch_order': 'random'}},
     'mode_options.launch_order'),
    ({'mode_options': {'sampling': 'edge'}}, 'mode_options.sampling'),
    ({'dist_timeout': 0}, 'dist_timeout'),
    ({'mode_options': {'merge': 1}}, 'mode_options'),
    ({'mode_options': {'cold_rows': 'direct'}}, 'mode_options.cold_rows'),
    ({'mode_options': {'cold_rows': None}}, 'mode_options.cold_rows'),
    ({'seed': '0'}, 'seed'),
    ({'drop_last': 'yes'}, 'drop_last'),
    ({'pipeline_settings': {'sampling_device': 'gpu'}},
     'pipeline_settings.sampling_device'),
    ({'pipeline_settings': {'sampling_device': ['cuda']}},
     'pipeline_settings.sampling_device'),
    ({'pipeline_settings': {'sampling_device': 'cuda'}, 'num_workers': 2},
     'pipeline_settings.sampling_device'),
])
def test_the_spec_names_the_setting_at_fault(settings, key):
    with pytest.raises(SettingError) as info:
        LoadingSpec(**settings)
    assert info.value.key == key


def test_the_spec_fills_evaluation_defaults_once():
    spec = LoadingSpec(num_neighbors=[4, 3], batch_size=64,
                       feature_cache={'host_budget': '10%'})
    assert spec.fanouts(False) == [4, 3] and spec.batch(False) == 64
    assert spec.feature_cache.host_budget == '10%'
    settings = spec.loader_kwargs(True)['pipeline_settings']
    assert (settings.sampling_workers, settings.run_ahead) == (1, 'adaptive')
    assert spec.pipeline_settings.sampling_device == 'cpu'  # the run's
    # the loaders get the placement's device instead of the run's setting
    assert settings.sampling_device is None
    given = PipelineSettings(sampling_workers=2, run_ahead='trainer_first')
    settings = LoadingSpec(pipeline_settings=given).loader_kwargs(False)[
        'pipeline_settings']
    assert (settings.sampling_workers, settings.run_ahead) == (
        2, 'trainer_first')
    with pytest.raises(Exception):  # frozen: callers cannot change it
        spec.batch_size = 1
    with pytest.raises(SettingError, match="'gds' reads rows"):
        LoadingSpec(feature_cache={'storage': 'gds'}).placement(
            torch.device('cpu'))
    with pytest.raises(SettingError, match="'cuda' samples on the trainer's "
                       "GPU, but this run's device is cpu") as info:
        ON_GPU.placement(torch.device('cpu'))
    assert info.value.key == 'pipeline_settings.sampling_device'
    gpu = torch.device('cuda', 0)
    assert ON_GPU.placement(gpu).sampling == gpu
    assert LoadingSpec().placement(gpu).sampling is None


def test_every_mode_is_one_registered_class():
    assert MODES == {'replicated': Replicated, 'pagraph': PaGraph,
                     'dsp': DSP, 'hopgnn': HopGNN}
    assert PaGraph.accepts_partition('pagraph')
    assert not PaGraph.accepts_partition('metis')
    assert DSP.accepts_partition('hash') and HopGNN.accepts_partition('metis')
    assert not DSP.accepts_partition('pagraph')
    assert not Replicated.accepts_partition('metis')


@pytest.mark.parametrize('mode, partitions, options, key', [
    (Replicated, 'parts', {}, 'partitions'),
    (PaGraph, None, {}, 'partitions'),
    (Replicated, None, {'merges': 1}, 'mode_options'),
    (DSP, 'parts', {'merge_search': True}, 'mode_options'),
    (HopGNN, 'parts', {'seeds': 'global'}, 'mode_options'),
    (PaGraph, 'parts', {'cold_rows': 'owner'}, 'mode_options'),
    (Replicated, None, {'cold_rows': 'owner'}, 'mode_options'),
    (DSP, 'parts', {'sampling_device': 'cuda'},
     'pipeline_settings.sampling_device'),
    (PaGraph, 'parts', {'sampling_device': 'cuda'},
     'pipeline_settings.sampling_device'),
])
def test_a_mode_refuses_what_it_would_ignore(mode, partitions, options, key):
    source = DatasetSource.of(random_graph())
    spec = LoadingSpec(pipeline_settings={'sampling_device': options.pop(
        'sampling_device', 'cpu')}, mode_options=options)
    with pytest.raises(SettingError) as info:
        mode(spec, source, partitions)
    assert info.value.key == key


def test_heterogeneous_data_may_be_sampled_on_the_gpu():
    from torch_geometric.data import HeteroData
    data = HeteroData()
    data['a'].x = torch.randn(4, 2)
    data['a'].y = torch.tensor([0, 1, 0, 1])
    data['a', 'to', 'a'].edge_index = torch.tensor([[0, 1], [1, 2]])
    gpu = ON_GPU
    Replicated(gpu, DatasetSource.of(data))  # the whole graph: anywhere
    with pytest.raises(SettingError, match="needs a GPU|trainer's GPU") as \
            info:  # a run on the CPU, though, has no GPU to sample on
        gpu.placement(torch.device('cpu'))
    assert info.value.key == 'pipeline_settings.sampling_device'


@pytest.fixture(scope='module')
def hetero_partition(tmp_path_factory, tiny_dir):
    r"""``(hetero dataset dir, its 2 hash parts, tiny's dir, its parts)``:
    a heterogeneous and a homogeneous partition."""
    from pyg_fastload.datasets import prepare_hetero_preset
    from pyg_fastload.partition import partition_dataset
    root = tmp_path_factory.mktemp('kinds')
    dataset = prepare_hetero_preset('hetero-tiny', root / 'mag',
                                    progress=False)
    partition_dataset(dataset.path, root / 'mag-parts', 2, 'hash',
                      progress=False)
    partition_dataset(tiny_dir[0], root / 'tiny-parts', 2, 'hash',
                      progress=False)
    return dataset.path, root / 'mag-parts', tiny_dir[0], root / 'tiny-parts'


@pytest.mark.reliability(
    fault='a heterogeneous partition in a setting that cannot take it '
          '(layer-wise sampling, no dataset), or a partition of '
          'the other kind of graph than the dataset',
    behaviour="refused at start-up naming the config key (data.mode, "
              "data.mode_options, data.dataset, data.partitions) and what "
              "to use (sampling: node, the dataset that was partitioned)")
@pytest.mark.parametrize('mode, case, settings, key, match', [
    (DSP, 'no dataset', {}, 'dataset', "give 'dataset' too"),
    (DSP, 'hetero', {'mode_options': {'sampling': 'layer'}},
     'mode_options', 'sampling: layer'),
    (DSP, 'hetero parts, homogeneous dataset', {}, 'partitions',
     "partitions a heterogeneous graph, while 'dataset' is homogeneous"),
    (DSP, 'homogeneous parts, hetero dataset', {}, 'partitions',
     "partitions a homogeneous graph, while 'dataset' is heterogeneous"),
])
def test_partitioned_modes_on_heterogeneous_partitions(
        hetero_partition, mode, case, settings, key, match):
    mag, mag_parts, tiny, tiny_parts = hetero_partition
    dataset, parts = {
        'hetero': (mag, mag_parts), 'no dataset': (None, mag_parts),
        'hetero parts, homogeneous dataset': (tiny, mag_parts),
        'homogeneous parts, hetero dataset': (mag, tiny_parts)}[case]
    source = None if dataset is None else DatasetSource.of(str(dataset))
    with pytest.raises(SettingError, match=match) as info:
        mode(LoadingSpec(**settings), source, str(parts))
    assert info.value.key == key
    if case == 'hetero':  # the same partition, both tasks in dsp
        for task in ('node', 'link'):
            DSP(LoadingSpec(task=task), source, str(parts))
        HopGNN(LoadingSpec(), source, str(parts))  # node classification


def test_one_process_replicated_is_the_plain_loader():
    data = random_graph(num_nodes=300, num_edges=3000)
    spec = LoadingSpec(num_neighbors=[4, 3], batch_size=32)
    mode = Replicated(spec, DatasetSource.of(data))
    mode.open(Collectives(DistContext(), None), torch.device('cpu'))
    ours = list(mode.loader('train', torch.Generator().manual_seed(5)))
    plain = FastNeighborLoader(data, [4, 3], batch_size=32, shuffle=True,
                               input_nodes=data.train_mask,
                               generator=torch.Generator().manual_seed(5))
    assert len(ours) == len(plain)
    for a, b in zip(ours, plain):
        assert torch.equal(a.n_id, b.n_id)
        assert torch.equal(a.edge_index, b.edge_index)
    with pytest.raises(SettingError, match="no 'val_mask'") as info:
        mode.loader('val', torch.Generator())
    assert info.value.key == 'dataset'


def test_the_batch_contract():
    logits = torch.randn(6, 3)
    y = torch.tensor([0, 1, 2, 0, 1, 2])
    batch = random_graph()
    assert torch.allclose(seed_loss(logits, y, batch),
                          torch.nn.functional.cross_entropy(logits, y))
    batch.loss_norm = 4  # HopGNN: the sum over the seeds / per-rank batch
    assert torch.allclose(seed_loss(logits, y, batch),
                          torch.nn.functional.cross_entropy(
                              logits, y, reduction='sum') / 4)
    assert time_steps(batch) == [batch]


def _samplers(rank, world):
    from torch.utils.data import DistributedSampler
    data = random_graph(num_nodes=300, num_edges=3000)
    data.val_mask = ~data.train_mask
    mode = Replicated(LoadingSpec(num_neighbors=[4], batch_size=16),
                      DatasetSource.of(data))
    mode.open(Collectives(DistContext.current(timedelta(seconds=30))),
              torch.device('cpu'))
    kept, seeds = {}, {}
    for split in ('train', 'val', 'predict'):
        loader = mode.loader(split, torch.Generator().manual_seed(1))
        kept[split] = isinstance(loader.sampler, DistributedSampler)
        seeds[split] = torch.cat([b.n_id[:b.batch_size] for b in loader])
    return kept, {split: s.tolist() for split, s in seeds.items()}, {
        split: getattr(data, f'{split}_mask').nonzero().view(-1).tolist()
        for split in ('train', 'val')}


@pytest.mark.timeout(120)
def test_lightning_keeps_the_ranks_samplers():
    # Lightning's use_distributed_sampler replaces any sampler that is not
    # a DistributedSampler (splitting the rank's share again)
    from ..distributed.ranks import run_ranks
    results = run_ranks(_samplers, 2)
    assert results[0][0] == results[1][0] == 'ok', results
    (k0, s0, masks), (k1, s1, _) = results[0][1], results[1][1]
    assert all(k0.values()) and all(k1.values())
    assert sorted(s0['val'] + s1['val']) == masks['val']  # each seed once
    assert sorted(s0['predict'] + s1['predict']) == list(range(300))
    share = -(-len(masks['train']) // 2)  # one pass, then wrapping
    first = set(s0['train'][:share]), set(s1['train'][:share])
    assert sorted(first[0] | first[1]) == masks['train']
    assert len(first[0] & first[1]) <= 1  # the padding


def test_the_task_is_one_object_named_by_the_spec():
    from pyg_fastload.modes import TASKS, LinkOptions, LinkTask, NodeTask
    from pyg_fastload.modes.spec import TASK_NAMES
    assert list(TASKS) == list(TASK_NAMES)  # the spec checks these names
    assert type(TASKS['node'].of(LoadingSpec())) is NodeTask
    spec = LoadingSpec(task='link', link={'neg_ratio': 2.0}, seed=5)
    task = TASKS[spec.task].of(spec)
    assert type(task) is LinkTask and not task.labelled
    assert (task.options, task.seed) == (LinkOptions(neg_ratio=2.0), 5)
    assert LoadingSpec(task='link').link == LinkOptions()  # the defaults
    for settings, key, match in (
            (dict(task='edge'), 'task', "'edge' is not one of 'node', "
                                        "'link'"),
            (dict(link={'neg_ratio': 2.0}), 'link', 'set task: link'),
            (dict(task='link', link={'ratio': 2}), 'link',
             r"unknown keys \['ratio'\]"),
            (dict(task='link', link=[1]), 'link', 'got list')):
        with pytest.raises(SettingError, match=match) as info:
            LoadingSpec(**settings)
        assert info.value.key == key


@pytest.mark.reliability(
    fault="a careless or hostile mode_options.remote ('fast', True, None) "
          "or pipeline_settings of the wrong type (a list, a string, 3)",
    behaviour='a SettingError naming mode_options.remote and its values, '
              'or pipeline_settings and the types it takes')
def test_remote_and_pipeline_settings_values_are_named():
    for bad in ('fast', True, None):
        with pytest.raises(SettingError,
                           match=r"mode_options\.remote.*'async', 'sync'"):
            ModeOptions(remote=bad)
    assert ModeOptions(remote='sync').remote == 'sync'
    for bad in (['x'], 'pipeline', 3):
        with pytest.raises(SettingError, match='pipeline_settings.*'
                           'PipelineSettings or a dict'):
            PipelineSettings.of(bad, {})


@pytest.mark.reliability(
    fault="careless or hostile evaluation settings (method 'fast' or True, "
          "batch_size -1, 'x' or True, num_neighbors 'abc' or [-2], "
          "inference a list, a negative chunk_size or an unknown key, "
          "evaluation itself a list, a string or 3) or "
          "mode_options.launch_order ('x', True, None)",
    behaviour='a SettingError naming the key (evaluation.method, '
              'evaluation.inference.chunk_size, ...), the value and what '
              'it takes')
def test_evaluation_and_launch_order_values_are_named():
    cases = [({'method': 'fast'}, r"evaluation\.method.*'sampled', "
              r"'layerwise'"),
             ({'method': True}, r'evaluation\.method.*True'),
             ({'batch_size': -1}, r'evaluation\.batch_size.*-1.*positive'),
             ({'batch_size': 'x'}, r"evaluation\.batch_size.*'x'"),
             ({'batch_size': True}, r'evaluation\.batch_size.*True'),
             ({'num_neighbors': 'abc'}, r'evaluation\.num_neighbors.*'
              r'\[15, 10, 5\]'),
             ({'num_neighbors': [-2]}, r'evaluation\.num_neighbors.*-2'),
             ({'inference': [1]}, r'evaluation\.inference.*dict, got list'),
             ({'inference': {'chunk_size': -3}},
              r'evaluation\.inference\.chunk_size.*-3'),
             ({'inference': {'bogus': 1}},
              r"evaluation\.inference.*unknown keys \['bogus'\]")]
    for given, message in cases:
        with pytest.raises(SettingError, match=message):
            EvalSettings(**given)
    for bad in ([3], 'layerwise', 3):
        with pytest.raises(SettingError, match=r"'evaluation'.*EvalSettings "
                           f'or a dict, got {type(bad).__name__}'):
            folded_setting('evaluation', EvalSettings, bad, {}, {})
    for bad in ('x', True, None):
        with pytest.raises(SettingError, match=r"mode_options\.launch_order"
                           r".*'groups', 'coordinator'"):
            ModeOptions(launch_order=bad)
    assert EvalSettings(method='layerwise', batch_size=7).batch_size == 7


def test_dsp_opens_its_rank_with_the_mode_options_launch_order(
        hetero_partition, monkeypatch):
    mag, mag_parts, _, _ = hetero_partition
    given = {}

    def open_dsp_rank(*args, **kwargs):
        given.update(kwargs)
        raise ValueError('stopped here')
    monkeypatch.setattr(partitioned, 'open_dsp_rank', open_dsp_rank)
    for order in ('coordinator', 'groups'):
        mode = DSP(LoadingSpec(mode_options={'launch_order': order}),
                   DatasetSource.of(str(mag)), str(mag_parts))
        with pytest.raises(SettingError, match='stopped here'):
            mode._open_parts(torch.device('cpu'))
        assert given['launch_order'] == order
