r"""A fit killed mid-epoch and restarted from its last checkpoint
(``ModelCheckpoint(every_n_train_steps=3, save_last=True)``, ``ckpt_path:
last``) trains on the batches, and ends with the weights, of a run never
interrupted: in one process with the pipeline on, and on two ``dsp``
ranks restarted by ``torchrun --max-restarts 1``; the data module of every
mode resumes its training loader where rank 0's state says."""
import itertools
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Tuple

import pytest
import torch
import yaml

from .faults import batch_digest
from .ranks import command_ranks, free_port, run_ranks

pytestmark = pytest.mark.timeout(420)

ROOT = str(Path(__file__).resolve().parents[2])
#: The test callbacks the fits import.
ENV = {'PYTHONPATH': ROOT,
       'PYG_FASTLOAD_ALLOW_IMPORTS': 'tests.distributed.faults'}
#: 2 epochs of 4 steps, a checkpoint every 3: the run is killed as step 7
#: starts (epoch 1) and resumes at step 6, mid-epoch 1.
KILLED_AT, RESUMED_AT = 7, 6


def _config(run: Path, data: dict, devices: int) -> Path:
    r"""A deterministic fit (dropout 0.5, CPU) of 2 epochs in :obj:`run`,
    checkpointed every 3 steps into ``run/checkpoints``, resumed from the
    last checkpoint there if any; rank ``devices - 1`` is killed as step 7
    starts unless ``run/killed`` exists; batches and weights recorded."""
    config = {
        'seed_everything': 0,
        'ckpt_path': 'last',
        'trainer': {
            'accelerator': 'cpu', 'devices': devices, 'max_epochs': 2,
            'enable_progress_bar': False, 'enable_model_summary': False,
            'logger': False,
            'callbacks': [
                {'class_path': 'pytorch_lightning.callbacks.ModelCheckpoint',
                 'init_args': {'dirpath': str(run / 'checkpoints'),
                               'every_n_train_steps': 3,
                               'save_last': True}},
                {'class_path': 'tests.distributed.faults.RecordRun',
                 'init_args': {'prefix': str(run / 'record')}},
                {'class_path': 'tests.distributed.faults.KillOnce',
                 'init_args': {'marker': str(run / 'killed'),
                               'rank': devices - 1, 'step': KILLED_AT}}],
        },
        'model': {'model': 'sage', 'hidden_channels': 16, 'num_layers': 2,
                  'dropout': 0.5},
        'data': dict({'num_neighbors': [5, 5], 'progress': False,
                      'pipeline_settings': {'pipeline': True},
                      'dist_timeout': 60}, **data),
    }
    if devices > 1:
        config['trainer']['strategy'] = {
            'class_path': 'pytorch_lightning.strategies.DDPStrategy',
            'init_args': {'process_group_backend': 'gloo',
                          'timeout': '0:01:00'}}
    run.mkdir()
    path = run / 'config.yaml'
    path.write_text(yaml.safe_dump(config))
    return path


def _forked(run: Path, world_size: int, attempt: int = 0
            ) -> subprocess.CompletedProcess:
    r"""``pyg-fastload fit`` of :obj:`run`'s config on forked ranks, as
    a launcher's :obj:`attempt`-th start would run it."""
    env = dict(os.environ, MASTER_PORT=str(free_port()),
               TORCHELASTIC_RESTART_COUNT=str(attempt), **ENV)
    return command_ranks(['fit', '--config', str(run / 'config.yaml')], run,
                         env, world_size=world_size, timeout=200)


def _batches(run: Path, rank: int) -> Dict[int, List[Tuple[int, str]]]:
    r"""``{attempt: [(global step, digest)]}`` of the batches rank
    :obj:`rank` trained on, in order."""
    lines = (run / f'record.{rank}.batches').read_text().split()
    out: Dict[int, List[Tuple[int, str]]] = {}
    for attempt, step, digest in zip(*[iter(lines)] * 3):
        out.setdefault(int(attempt), []).append((int(step), digest))
    return out


def _resumed_as_uninterrupted(straight: Path, killed: Path,
                              world_size: int) -> None:
    r"""The killed run's ranks were killed after the checkpoint of step
    :data:`RESUMED_AT`, resumed there and trained on the uninterrupted
    run's batches from there, to its weights."""
    assert (killed / 'killed').exists()  # the kill happened
    for rank in range(world_size):
        [expected] = _batches(straight, rank).values()
        assert [s for s, _ in expected] == list(range(8))
        attempts = _batches(killed, rank)
        assert sorted(attempts) == [0, 1]
        steps = [s for s, _ in attempts[0]]  # up to the kill
        assert steps == list(range(len(steps))) and len(steps) > RESUMED_AT
        if rank == world_size - 1:
            assert len(steps) == KILLED_AT + 1  # killed as step 7 started
        assert [s for s, _ in attempts[1]] == list(range(RESUMED_AT, 8))
        for step, digest in attempts[0] + attempts[1]:
            assert digest == expected[step][1], (rank, step)
    weights: Dict[str, torch.Tensor] = torch.load(straight / 'record.pt')
    resumed = torch.load(killed / 'record.pt')
    assert weights.keys() == resumed.keys()
    for key, value in weights.items():
        assert torch.equal(value, resumed[key]), key


@pytest.mark.reliability(
    fault='a one-process fit with the pipeline on, killed (SIGKILL) '
          'mid-epoch, started again with `ckpt_path: last`',
    behaviour='it resumes from the last checkpoint (every 3 steps), '
              'mid-epoch, and trains on the uninterrupted run\'s batches '
              '(those the pipeline had sampled ahead drawn again) to its '
              'weights (was: resumed only at an epoch boundary)')
def test_a_killed_pipelined_fit_resumes_as_if_uninterrupted(tiny_dir,
                                                             tmp_path):
    data = {'dataset': str(tiny_dir[0]), 'batch_size': 256}
    straight, killed = tmp_path / 'straight', tmp_path / 'killed'
    for run in (straight, killed):
        _config(run, data, devices=1)
    (straight / 'killed').touch()  # never killed
    result = _forked(straight, 1)
    assert result.returncode == 0, result.stderr[-3000:]
    result = _forked(killed, 1)
    assert result.returncode == -9, result.stderr[-3000:]  # SIGKILL
    assert (killed / 'checkpoints' / 'last.ckpt').exists()
    result = _forked(killed, 1, attempt=1)  # again: from last.ckpt
    assert result.returncode == 0, result.stderr[-3000:]
    _resumed_as_uninterrupted(straight, killed, 1)


@pytest.mark.reliability(
    fault='rank 1 of a 2-rank `dsp` fit under `torchrun --max-restarts 1` '
          'killed (SIGKILL) mid-epoch, the config holding `ckpt_path: last`',
    behaviour='torchrun restarts both ranks, which resume from the last '
              'checkpoint (every 3 steps), mid-epoch, with nobody acting, '
              'and train on the uninterrupted run\'s batches on each rank '
              'to its weights (was: a failed rank ended the job)')
def test_torchrun_restarts_a_killed_dsp_rank_where_it_stopped(
        tiny_dir, metis_parts, tmp_path):
    data = {'dataset': str(tiny_dir[0]), 'mode': 'dsp',
            'partitions': str(metis_parts), 'batch_size': 128}
    straight, killed = tmp_path / 'straight', tmp_path / 'killed'
    for run in (straight, killed):
        _config(run, data, devices=2)
    (straight / 'killed').touch()
    result = _forked(straight, 2)
    assert result.returncode == 0, result.stderr[-3000:]
    launcher = subprocess.Popen(
        [sys.executable, '-m', 'torch.distributed.run', '--nproc_per_node',
         '2', '--max-restarts', '1', '--master_addr', '127.0.0.1',
         '--master_port', str(free_port()), '-m', 'pyg_fastload', 'fit',
         '--config', str(killed / 'config.yaml')],
        cwd=killed, env=dict(os.environ, **ENV), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        _, err = launcher.communicate(timeout=300)
    finally:  # the launcher and its ranks
        if launcher.poll() is None:
            os.killpg(launcher.pid, signal.SIGKILL)
            launcher.communicate()
    assert launcher.returncode == 0, err[-5000:]
    _resumed_as_uninterrupted(straight, killed, 2)


def _resumed_modes(rank, world, dataset, modes):
    r"""Per mode, whether a data module given rank 0's state 2 batches into
    epoch 1 (as a checkpoint holds it) draws this rank's rest of epoch 1
    as the uninterrupted one does."""
    import torch.distributed as dist
    from pyg_fastload.lightning import FastLoadDataModule
    out = {}
    for mode, partitions in modes:
        def module():
            data = FastLoadDataModule(
                dataset, mode=mode, partitions=partitions,
                num_neighbors=[4, 4], batch_size=64, pipeline=True,
                progress=False, dist_timeout=60)
            data.setup('fit')
            return data

        def digests(batches):
            return [batch_digest(batch) for batch in batches]

        data = module()
        loader = data.train_dataloader()
        digests(loader)  # epoch 0
        iterator = iter(loader)
        digests(itertools.islice(iterator, 2))
        state = [data.state_dict()]
        rest = digests(iterator)
        data.teardown('fit')
        dist.broadcast_object_list(state, src=0)  # rank 0's checkpoint
        resumed = module()
        resumed.load_state_dict(state[0])
        out[mode] = (digests(resumed.train_dataloader()) == rest, len(rest))
        resumed.teardown('fit')
    return out


def test_every_modes_data_module_resumes_each_rank_mid_epoch(
        tiny_dir, pagraph_parts, metis_parts):
    modes = [('replicated', None), ('pagraph', str(pagraph_parts[1])),
             ('dsp', str(metis_parts)), ('hopgnn', str(metis_parts))]
    results = run_ranks(_resumed_modes, 2, str(tiny_dir[0]), modes,
                        timeout=300)
    for rank in range(2):
        status, value = results[rank]
        assert status == 'ok', value
        assert value == {mode: (True, value[mode][1]) for mode, _ in modes}
        assert all(left > 0 for _, left in value.values())
