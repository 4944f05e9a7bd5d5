r"""``data.time_attr`` across two ranks: ``dsp``'s collective sampler and
``pagraph``'s part-local sampler draw every seed's tree in time, and a
2-rank Lightning fit in ``dsp`` trains with temporal neighbourhoods."""
import pytest
import torch

from pyg_fastload.io import open_dataset_dir
from pyg_fastload.partition import partition_dataset

from ..modes.test_temporal_modes import later_neighbours, write_timed_dir
from .ranks import run_ranks
from .test_lightning_ddp import _config, _fit, _stats

pytestmark = pytest.mark.timeout(420)


@pytest.fixture(scope='module')
def timed_dir(tmp_path_factory, tiny_dir):
    return write_timed_dir(tmp_path_factory.mktemp('timed'), tiny_dir[1])


@pytest.fixture(scope='module')
def timed_parts(timed_dir):
    r"""``{mode: parts dir}``: the timed ``tiny`` in 2 METIS parts (dsp)
    and in PaGraph's 2 self-reliant parts."""
    dataset, _ = timed_dir
    parts = {'dsp': dataset.parent / 'metis',
             'pagraph': dataset.parent / 'pagraph'}
    for mode, out in parts.items():
        partition_dataset(dataset, out, 2, 'metis' if mode == 'dsp'
                          else 'pagraph', progress=False)
    return parts


class _Batch(dict):
    r"""What :func:`later_neighbours` reads of a batch (sent back as
    lists: a rank's tensors do not outlive it)."""
    __getattr__ = dict.__getitem__

    @classmethod
    def of(cls, lists: dict) -> '_Batch':
        return cls({k: torch.tensor(v) if isinstance(v, list) else v
                    for k, v in lists.items()})


def _train_batches(rank, world, mode, dataset, parts, time_attr):
    from pyg_fastload.lightning import ConfigError, FastLoadDataModule
    data = FastLoadDataModule(str(dataset), mode=mode, partitions=str(parts),
                              num_neighbors=[4, 4], batch_size=32,
                              time_attr=time_attr, progress=False)
    try:
        data.setup('fit')
    except ConfigError as error:  # refused alike on both ranks
        return error.config_key, str(error)
    sampler = type(data.loading.neighbor_sampler(True)).__name__
    batches = [dict({k: b[k].tolist() for k in ('n_id', 'batch',
                                                'edge_index') if k in b},
                    batch_size=b.batch_size)
               for b in data.train_dataloader()]
    data.teardown('fit')
    return sampler, batches


def _part_times(parts, mode: str, rank: int) -> torch.Tensor:
    r"""The times of the ids a rank's batches hold: DSP's new ids (the
    parts' rows end to end), PaGraph's part-local ids."""
    def times(part: int) -> torch.Tensor:
        return open_dataset_dir(parts / f'part-{part}').arrays['time']
    if mode == 'pagraph':
        return times(rank)
    return torch.cat([times(part) for part in range(2)])


@pytest.mark.parametrize('mode, sampler', [('dsp', 'CollectiveSampler'),
                                           ('pagraph', 'NoneType')])
def test_two_ranks_sample_every_seed_in_time(timed_dir,
                                             timed_parts, mode, sampler):
    dataset, _ = timed_dir
    parts = timed_parts[mode]
    results = run_ranks(_train_batches, 2, mode, dataset, parts, 'time')
    for rank in range(2):
        status, value = results[rank]
        assert status == 'ok', value
        kind, batches = value
        batches = [_Batch.of(b) for b in batches]
        assert kind == sampler  # dsp: the collective sampler, in time
        time = _part_times(parts, mode, rank)
        assert sum(later_neighbours(b, time) for b in batches) == 0
        assert batches and all('batch' in b for b in batches)  # trees
        assert sum(b.n_id.numel() for b in batches) > 2 * sum(
            b.batch_size for b in batches)  # neighbours were drawn


def test_a_dsp_part_without_the_times_is_refused(timed_dir,
                                                 timed_parts):
    results = run_ranks(_train_batches, 2, 'dsp', timed_dir[0],
                        timed_parts['dsp'], 'stamp')
    for rank in range(2):
        status, value = results[rank]
        assert status == 'ok', value
        key, message = value
        assert key == 'data.time_attr'
        assert "'stamp' is not a node array of part" in message


def test_a_two_rank_dsp_fit_trains_in_time(timed_dir,
                                           timed_parts, tmp_path):
    config = _config(tmp_path, {
        'dataset': str(timed_dir[0]), 'partitions': str(timed_parts['dsp']),
        'mode': 'dsp', 'time_attr': 'time', 'temporal_strategy': 'last'})
    result = _fit(['--config', str(config)], tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    ranks = _stats(tmp_path)['epochs'][0]['ranks']
    assert ranks[0]['steps'] == ranks[1]['steps'] > 0
    for rank in ranks:  # frontiers (with their seed times) pushed
        assert rank['sampling']['bytes_received'] > 0
