from datetime import timedelta

import pytest
import torch

from pyg_fastload import FastNeighborLoader
from pyg_fastload.config import SettingError
from pyg_fastload.distributed import Collectives, DistContext
from pyg_fastload.modes import (
    DSP,
    MODES,
    DatasetSource,
    HopGNN,
    LoadingSpec,
    PaGraph,
    Replicated,
)
from pyg_fastload.modes.contract import seed_loss, time_steps

from ..conftest import random_graph


@pytest.mark.parametrize('settings, key', [
    ({'num_neighbors': []}, 'num_neighbors'),
    ({'eval_num_neighbors': [-5]}, 'eval_num_neighbors'),
    ({'batch_size': 0}, 'batch_size'),
    ({'batch_size': True}, 'batch_size'),
    ({'queue_capacity': 0}, 'queue_capacity'),
    ({'num_workers': -1}, 'num_workers'),
    ({'pipeline': 'sometimes'}, 'pipeline'),
    ({'feature_cache': {'host_budget': '150%'}}, 'feature_cache.host_budget'),
    ({'feature_cache': {'hots_budget': 1}}, 'feature_cache'),
    ({'adjacency': 'dense'}, 'adjacency'),
    ({'verify': 'md5'}, 'verify'),
    ({'launch_order': 'random'}, 'launch_order'),
    ({'mode_options': {'sampling': 'edge'}}, 'mode_options.sampling'),
    ({'dist_timeout': 0}, 'dist_timeout'),
    ({'mode_options': {'merge': 1}}, 'mode_options'),
    ({'seed': '0'}, 'seed'),
    ({'drop_last': 'yes'}, 'drop_last'),
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
    with pytest.raises(Exception):  # frozen: callers cannot change it
        spec.batch_size = 1
    with pytest.raises(SettingError, match="'gds' reads rows"):
        LoadingSpec(feature_cache={'storage': 'gds'}).check_device(
            torch.device('cpu'))


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
])
def test_a_mode_refuses_what_it_would_ignore(mode, partitions, options, key):
    source = DatasetSource(random_graph())
    with pytest.raises(SettingError) as info:
        mode(LoadingSpec(mode_options=options), source, partitions)
    assert info.value.key == key


def test_one_process_replicated_is_the_plain_loader():
    data = random_graph(num_nodes=300, num_edges=3000)
    spec = LoadingSpec(num_neighbors=[4, 3], batch_size=32)
    mode = Replicated(spec, DatasetSource(data))
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
