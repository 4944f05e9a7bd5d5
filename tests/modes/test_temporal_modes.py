r"""``data.time_attr`` / ``data.temporal_strategy``: the data module's
loaders sample every seed at its own node time (mode ``replicated`` here;
``dsp``, ``pagraph`` and ``hopgnn``, on homogeneous and heterogeneous
partitions, across two ranks in ``tests/distributed/test_temporal_fit.py``),
and what cannot is refused."""
from pathlib import Path
from typing import Tuple

import pytest
import torch

from pyg_fastload.config import SettingError
from pyg_fastload.lightning import FastLoadDataModule
from pyg_fastload.lightning.errors import ConfigError
from pyg_fastload.modes import DSP, DatasetSource, HopGNN, LoadingSpec


def write_timed_dir(root: Path, cache: Path) -> Tuple[Path, torch.Tensor]:
    r"""``(dataset dir, its node times)``: ``tiny`` (generated under
    :obj:`cache`) with a random ``time`` per node, prepared from a saved
    ``Data`` (``prepare --pyg-data``) into :obj:`root`."""
    from pyg_fastload.datasets import load_synthetic
    from pyg_fastload.datasets.pyg_file import prepare_pyg
    data = load_synthetic('tiny', root=cache, progress=False).to_data()
    data.time = torch.randint(0, 1000, (data.num_nodes, ),
                              generator=torch.Generator().manual_seed(0))
    torch.save(data, root / 'timed.pt')
    return prepare_pyg(root / 'timed.pt', root / 'ds', progress=False).path, \
        data.time


@pytest.fixture(scope='module')
def timed_dir(tmp_path_factory, tiny_dir):
    return write_timed_dir(tmp_path_factory.mktemp('timed'), tiny_dir[1])


def later_neighbours(batch, time: torch.Tensor) -> int:
    r"""The nodes of :obj:`batch` later than their seed: every tree's node
    (``batch.batch``, a temporal batch), else the seeds' sampled in-edges'
    sources."""
    node_time = time[batch.n_id]
    seed_time = node_time[:batch.batch_size]
    if 'batch' in batch:
        return int((node_time > seed_time[batch.batch]).sum())
    src, dst = batch.edge_index
    seeds = dst < batch.batch_size
    return int((node_time[src[seeds]] > seed_time[dst[seeds]]).sum())


def _count_later(dataset, time, split: str, **settings) -> int:
    data = FastLoadDataModule(str(dataset), num_neighbors=[5, 5],
                              batch_size=64, progress=False, **settings)
    data.setup('fit')
    loader = getattr(data, f'{split}_dataloader')()
    return sum(later_neighbours(batch, time) for batch in loader)


@pytest.mark.parametrize('split', ['train', 'val'])
@pytest.mark.parametrize('strategy', ['uniform', 'last'])
def test_replicated_batches_hold_no_neighbour_later_than_their_seed(
        timed_dir, split, strategy):
    dataset, time = timed_dir
    assert _count_later(dataset, time, split, time_attr='time',
                        temporal_strategy=strategy) == 0
    assert _count_later(dataset, time, split) > 0  # without times: some


@pytest.fixture(scope='module')
def partitions(tmp_path_factory, tiny_dir):
    r"""``{kind: (dataset dir, its 2 hash parts)}``: ``tiny`` and the
    heterogeneous ``hetero-tiny``."""
    from pyg_fastload.datasets import prepare_hetero_preset
    from pyg_fastload.partition import partition_dataset
    root = tmp_path_factory.mktemp('timed-parts')
    datasets = {'homogeneous': tiny_dir[0],
                'heterogeneous': prepare_hetero_preset(
                    'hetero-tiny', root / 'mag', progress=False).path}
    for kind, dataset in datasets.items():
        partition_dataset(dataset, root / kind, 2, 'hash', progress=False)
    return {kind: (dataset, root / kind)
            for kind, dataset in datasets.items()}


@pytest.mark.parametrize('settings, key, match', [
    ({'time_attr': ''}, 'time_attr', 'must name a node array'),
    ({'time_attr': 5}, 'time_attr', 'must name a node array'),
    ({'temporal_strategy': 'last'}, 'temporal_strategy', 'set time_attr'),
    ({'time_attr': 'time', 'temporal_strategy': 'first'},
     'temporal_strategy', "'uniform', 'last'"),
    ({'time_attr': 'time', 'evaluation': {'method': 'layerwise'}},
     'evaluation.method', 'method: sampled'),
])
def test_temporal_settings_are_checked(timed_dir, settings, key, match):
    with pytest.raises(ConfigError, match=match) as info:
        FastLoadDataModule(str(timed_dir[0]), progress=False, **settings)
    assert info.value.config_key == f'data.{key}'


def test_a_name_that_is_not_a_node_array_is_refused(timed_dir):
    data = FastLoadDataModule(str(timed_dir[0]), progress=False,
                              time_attr='stamp')
    data.setup('fit')
    with pytest.raises(ConfigError, match="'stamp' is not a node array") \
            as info:
        data.train_dataloader()
    assert info.value.config_key == 'data.time_attr'


@pytest.mark.reliability(
    fault='time_attr with a setting that cannot sample in time '
          "(layer-wise dsp), with layer-wise evaluation, or naming no node "
          'array',
    behaviour='refused at start-up naming data.time_attr '
              '(data.evaluation.method, data.temporal_strategy) and what to '
              'use instead')
def test_partitioned_modes_refuse_times_they_cannot_sample(partitions):
    dataset, parts = partitions['homogeneous']
    with pytest.raises(SettingError, match='sampling: node') as info:
        DSP(LoadingSpec(time_attr='time', mode_options={'sampling': 'layer'}),
            DatasetSource.of(str(dataset)), str(parts))
    assert info.value.key == 'time_attr'


@pytest.mark.parametrize('kind', ['homogeneous', 'heterogeneous'])
def test_partitioned_modes_take_times_on_either_partition(partitions, kind):
    dataset, parts = partitions[kind]
    for mode in (DSP, HopGNN):  # node-wise, root routing: in time (the
        # batches: tests/distributed/test_temporal_fit.py)
        assert mode(LoadingSpec(time_attr='time'),
                    DatasetSource.of(str(dataset)),
                    str(parts)).temporal_refusal is None


def test_a_replicated_hetero_dataset_samples_in_time():
    from pyg_fastload.datasets import generate_hetero
    data = generate_hetero('hetero-tiny')
    generator = torch.Generator().manual_seed(0)
    for node_type in data.node_types:
        data[node_type].time = torch.randint(0, 100, (
            data[node_type].num_nodes, ), generator=generator)
    module = FastLoadDataModule(data, num_neighbors=[4, 4], batch_size=32,
                                progress=False, time_attr='time')
    module.setup('fit')
    target = module.hetero_schema.target
    for batch in module.train_dataloader():
        seeds = batch[target].n_id[:batch[target].batch_size]
        seed_time = data[target].time[seeds]
        for node_type in data.node_types:
            later = data[node_type].time[batch[node_type].n_id] > \
                seed_time[batch[node_type].batch]
            assert not later.any()


@pytest.mark.reliability(
    fault="time_attr with task 'link' naming a node array, no array, an "
          "in-memory Data's times, or with DSP's layer-wise draw",
    behaviour="refused naming data.time_attr, the value and the fix (an "
              "edge array of a dataset directory, 'pyg-fastload prepare "
              "--pyg-data', sampling: node): the layer-wise draw when the "
              "data module is made, the rest when it is set up")
def test_link_times_that_cannot_be_sampled_are_refused(timed_dir,
                                                       partitions):
    from torch_geometric.data import Data
    dataset, _ = timed_dir  # its 'time' is one per node
    for name, match in (('time', r"'time' is no edge array of the dataset "
                         r"\(it holds one time per node\); task 'link' "
                         r"samples by the times of the edges: name an edge "
                         r"array"),
                        ('when', r"'when' is no edge array of the dataset "
                         r"\(.*it holds the edge arrays \[\]\).*or leave "
                         r"time_attr out")):
        data = FastLoadDataModule(str(dataset), task='link', progress=False,
                                  time_attr=name)
        with pytest.raises(ConfigError, match=match) as info:
            data.setup('fit')
        assert info.value.config_key == 'data.time_attr'
    gen = torch.Generator().manual_seed(0)
    graph = Data(x=torch.randn(50, 4, generator=gen),
                 edge_index=torch.randint(50, (2, 400), generator=gen),
                 time=torch.randint(0, 100, (400, ), generator=gen))
    data = FastLoadDataModule(graph, task='link', progress=False,
                              time_attr='time')
    with pytest.raises(ConfigError, match=r"'time': task 'link' samples in "
                       r"time from a dataset directory .*'pyg-fastload "
                       r"prepare --pyg-data FILE\.pt DIR'") as info:
        data.setup('fit')
    assert info.value.config_key == 'data.time_attr'
    homogeneous, parts = partitions['homogeneous']
    with pytest.raises(ConfigError, match=r"'time' with mode 'dsp': DSP's "
                       r"layer-wise draw .*use sampling: node") as info:
        FastLoadDataModule(str(homogeneous), task='link', mode='dsp',
                           partitions=str(parts), progress=False,
                           time_attr='time',
                           mode_options={'sampling': 'layer'})
    assert info.value.config_key == 'data.time_attr'
