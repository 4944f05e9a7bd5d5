import os
import re
import time
from datetime import timedelta

import pytest
import torch

from pyg_fastload.distributed import (
    Collectives,
    DistContext,
    DistributedError,
)
from pyg_fastload.distributed.rank_part import open_rank_part

from .ranks import run_ranks

pytestmark = pytest.mark.timeout(180)


def _collectives(seconds=30):
    return Collectives(DistContext.current(timedelta(seconds=seconds)))


def _exchange(rank, world):
    coll = _collectives()
    send = [torch.full((rank + r, 2), float(10 * rank + r))
            for r in range(world)]
    got = coll.exchange(send, 'features', 'test exchange')
    return [g.tolist() for g in got], coll.counters.snapshot()['features']


def test_exchange_sends_each_rank_its_rows_and_counts_bytes():
    results = run_ranks(_exchange, 3)
    for rank in range(3):
        status, (got, traffic) = results[rank]
        assert status == 'ok'
        # rank r sent (r + rank) rows of value 10 r + rank to this rank
        assert got == [[[10.0 * r + rank] * 2] * (r + rank)
                       for r in range(3)]
        rows_out = sum(rank + r for r in range(3) if r != rank)
        assert traffic == {'bytes_sent': rows_out * 8,
                           'bytes_received': rows_out * 8,
                           'messages': sum(1 for r in range(3)
                                           if r != rank and rank + r)}


def _exchange_on_gpus(rank, world):
    coll = _collectives()
    assert coll.device == torch.device('cuda', rank)  # NCCL: CUDA tensors
    send = [torch.full((rank + r, 2), float(10 * rank + r))
            for r in range(world)]
    got = coll.exchange(send, 'features', 'test exchange')
    return [g.cpu().tolist() for g in got], coll.max_int(rank, 'max rank')


@pytest.mark.skipif(torch.cuda.device_count() < 2,
                    reason='NCCL needs a GPU per rank: 2 GPUs')
def test_nccl_exchange_moves_rows_between_gpus():
    results = run_ranks(_exchange_on_gpus, 2, backend='nccl')
    for rank in range(2):
        status, (got, top) = results[rank]
        assert status == 'ok' and top == 1
        assert got == [[[10.0 * r + rank] * 2] * (r + rank)
                       for r in range(2)]


def test_stages_run_on_gloo_beside_nccl(monkeypatch):
    # A stage issues collectives from a loader thread while DDP's gradients
    # go over NCCL from the training thread; NCCL documents that as unsafe,
    # so a stage gets a gloo group and CPU tensors.
    import torch.distributed as dist
    made = []
    monkeypatch.setattr(dist, 'is_initialized', lambda: True)
    monkeypatch.setattr(dist, 'new_group',
                        lambda **kwargs: made.append(kwargs) or 'stage group')
    world = Collectives(DistContext(rank=0, world_size=2),
                        device=torch.device('cuda', 0))  # NCCL's world
    stage = world.new_stage()
    assert [kwargs['backend'] for kwargs in made] == ['gloo']
    assert stage.group == 'stage group'
    assert stage.device == torch.device('cpu')


def _skip_collective(rank, world, report, ended):
    r"""Rank 1 stays alive and silent until rank 0's collective has ended
    (the file :obj:`ended`): only the timeout can end it."""
    coll = _collectives(seconds=2)
    if rank == 1:
        if report:
            coll.report_failure('ValueError: bad batch 7')
        while not ended.exists():  # (run_ranks' timeout bounds a hang)
            time.sleep(0.05)
        return 'skipped'
    try:
        coll.max_int(1, 'agree on the steps per epoch')
    except DistributedError as exc:
        return str(exc)
    finally:
        ended.touch()
    return 'completed'


@pytest.mark.reliability(
    fault='a collective that never completes (a rank hangs or takes '
          'another path)',
    behaviour='ended by the timeout with an error naming the operation, '
              'and the rank if it reported its failure')
@pytest.mark.parametrize('report', [False, True])
def test_a_collective_that_never_completes_is_ended_by_the_timeout(
        report, tmp_path):
    results = run_ranks(_skip_collective, 2, report, tmp_path / 'ended')
    assert results[1] == ('ok', 'skipped')  # alive until rank 0 gave up
    message = results[0][1]
    assert "collective 'agree on the steps per epoch' did not complete " \
        "within 2s (RuntimeError: Operation timed out!)" in message
    if report:
        assert 'rank 1: ValueError: bad batch 7' in message
    else:
        assert 'no rank reported a failure' in message


def _killed(rank, world):
    coll = _collectives(seconds=20)
    if rank == 1:
        os._exit(3)  # killed: no report, no goodbye
    try:
        coll.max_int(1, 'agree on the steps per epoch')
    except DistributedError as exc:
        return str(exc)
    return 'completed'


@pytest.mark.reliability(
    fault='a rank killed mid-epoch',
    behaviour='the other ranks stop with an error naming the collective '
              'within the timeout')
def test_a_killed_rank_ends_the_others_within_the_timeout():
    results = run_ranks(_killed, 2)
    assert 1 not in results
    message = results[0][1]
    assert "'agree on the steps per epoch' did not complete" in message
    # ended by the closed connection, not by the 20 s timeout
    assert re.search(r'Connection (closed|reset) by peer', message), message


def _open(rank, world, cases):
    r"""Each case's outcome on this rank (one process group for all: the
    checks fail on every rank alike, so the group stays usable)."""
    coll = _collectives()
    out = []
    for dirs in cases:
        try:
            open_rank_part(dirs[rank], coll)
        except DistributedError as exc:
            out.append(str(exc))
        else:
            out.append('opened')
    return out


@pytest.mark.reliability(
    fault='ranks pointed at different partitionings, a missing part, or a '
          'world size that is not the number of parts',
    behaviour='a clear error on every rank at start-up, not a hang')
def test_start_up_checks_fail_on_every_rank(hash_parts, tmp_path):
    import shutil
    _, root = hash_parts
    broken = tmp_path / 'broken'
    shutil.copytree(root / 'a', broken)
    shutil.rmtree(broken / 'part-1')
    results = run_ranks(_open, 2, [
        [root / 'a', root / 'b'], [root / 'four', root / 'four'],
        [broken, broken], [root / 'a', root / 'a']])
    for rank in range(2):
        mixed, four, missing, fine = results[rank][1]
        assert 'different partitionings' in mixed
        assert 'has 4 parts but there are 2 ranks' in four
        assert 'rank(s) [1] could not open their part' in missing
        assert 'part 1 is not in this directory' in missing
        assert fine == 'opened'  # and the group still works
