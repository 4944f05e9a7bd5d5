import threading
import time
from datetime import timedelta

import pytest
import torch
import torch.distributed as dist

from pyg_fastload.distributed import Collectives, DistContext
from pyg_fastload.distributed.launch_order import LaunchCoordinator

from .ranks import run_ranks

pytestmark = pytest.mark.timeout(120)


def _two_stages(rank, world, coordinated):
    coll = Collectives(DistContext.current(timedelta(seconds=10)))
    data = coll.new_stage()
    coordinator = LaunchCoordinator(coll.new_stage()) if coordinated \
        else None
    results = {}

    def stage(s):
        if (rank == 0) == (s == 0):  # the ranks reach the stages in
            time.sleep(0.3)          # opposite orders
        for batch in range(4):
            value = torch.full((4, ), float(1000 * s + 10 * batch + rank))

            def reduce(value=value):
                dist.all_reduce(value, group=data.group)
                return value
            out = coordinator.run((batch, s, 0, 0), reduce) \
                if coordinator else reduce()
            results[(batch, s)] = float(out[0])

    threads = [threading.Thread(target=stage, args=(s, )) for s in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    if coordinator is not None:
        coordinator.close()
    return results


def _expected():
    return {(b, s): 2.0 * (1000 * s + 10 * b) + 1
            for b in range(4) for s in (0, 1)}


def test_concurrent_stages_mix_their_collectives_without_the_coordinator():
    results = run_ranks(_two_stages, 2, False)
    # each rank paired its first stage's collectives with the other
    # rank's other stage: every result is some other collective's sum
    for rank in range(2):
        status, value = results[rank]
        assert status == 'ok', value
        assert value != _expected()
        # every collective completed, most of them with another one's sum
        assert set(value) == set(_expected())
        wrong = sum(value[k] != v for k, v in _expected().items())
        assert wrong >= 4


def test_the_coordinator_launches_them_in_one_order():
    results = run_ranks(_two_stages, 2, True)
    for rank in range(2):
        status, value = results[rank]
        assert status == 'ok', value
        assert value == _expected()


def _opposite_orders(rank, world, coordinated):
    r"""Stage 'reduce' all-reduces, stage 'leader' receives a broadcast
    from rank 0, both on one process group; without the coordinator each
    rank issues them in its own order (rank 0: reduce first, rank 1:
    broadcast first), with it in the leader's."""
    coll = Collectives(DistContext.current(timedelta(seconds=20)))
    data = coll.new_stage()
    coordinator = LaunchCoordinator(coll.new_stage()) if coordinated \
        else None
    results, errors = {}, []
    mine = ['reduce', 'leader'] if rank == 0 else ['leader', 'reduce']
    turn = threading.Condition()
    done = []

    def op(stage):
        value = torch.full((4, ), float(rank + 1))
        if stage == 'reduce':
            work = dist.all_reduce(value, group=data.group, async_op=True)
        else:
            work = dist.broadcast(value, 0, group=data.group, async_op=True)
        work.wait(timeout=timedelta(seconds=3))
        return float(value[0])

    def stage(name):
        try:
            if coordinator is not None:
                cid = (0, ('reduce', 'leader').index(name), 0, 0)
                results[name] = coordinator.run(cid, lambda: op(name))
                return
            with turn:  # this rank's own order
                turn.wait_for(lambda: mine[len(done)] == name, timeout=10)
            try:
                results[name] = op(name)
            finally:
                with turn:
                    done.append(name)
                    turn.notify_all()
        except Exception as error:  # noqa: BLE001 - reported to the test
            errors.append(f'{name}: {type(error).__name__}: {error}')

    threads = [threading.Thread(target=stage, args=(name, ))
               for name in reversed(mine)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    if coordinator is not None:
        coordinator.close()
    return results, errors


@pytest.mark.reliability(
    fault='two pipelined stages launch their collectives in different '
          'orders on different ranks (one process group)',
    behaviour='without the launch coordinator every rank hangs until the '
              'timeout ends it; with it both complete')
@pytest.mark.parametrize('coordinated', [False, True])
def test_opposite_launch_orders_hang_without_the_coordinator(coordinated):
    results = run_ranks(_opposite_orders, 2, coordinated)
    for rank in range(2):
        status, value = results[rank]
        assert status == 'ok', value
        got, errors = value
        if coordinated:
            assert errors == []
            assert got == {'reduce': 3.0, 'leader': 1.0}
        else:  # the first collectives pair an all-reduce with a broadcast
            assert errors and all('timed out' in e for e in errors), errors


def _overlapped_exchanges(rank, world):
    coll = Collectives(DistContext.current(timedelta(seconds=20)))
    data = coll.new_stage()
    coordinator = LaunchCoordinator(coll.new_stage())
    launched, order = [], []
    run = coordinator.run

    def recording(cid, fn, timeout=None):
        def start():
            order.append(cid)  # in the coordinator's thread: launch order
            return fn()
        result = run(cid, start, timeout)
        launched.append((cid, isinstance(result, dist.Work)))
        return result

    coordinator.run = recording
    results, errors = {}, []

    def stage(s):
        mine = Collectives(data.context, data.counters, data.device,
                           data.group, coordinator, stage=s)
        try:
            for batch in range(3):
                mine.begin_batch()
                send = [torch.full((r + 1, 2), float(100 * s + 10 * batch
                                                    + rank))
                        for r in range(world)]
                got = mine.exchange(send, 'features', f'stage {s}')
                results[(batch, s)] = [g[:, 0].tolist() for g in got]
        except Exception as error:  # noqa: BLE001 - reported to the test
            errors.append(f'{s}: {type(error).__name__}: {error}')

    threads = [threading.Thread(target=stage, args=(s, )) for s in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    coordinator.close()
    return results, errors, launched, order


def test_exchanges_launch_in_order_and_are_awaited_by_their_stage():
    results = run_ranks(_overlapped_exchanges, 2)
    orders = []
    for rank in range(2):
        status, value = results[rank]
        assert status == 'ok', value
        got, errors, launched, order = value
        assert errors == []
        # rank r sent (rank + 1) rows of 100 s + 10 b + r to this rank
        assert got == {(b, s): [[100.0 * s + 10 * b + r] * (rank + 1)
                                for r in range(2)]
                       for b in range(3) for s in (0, 1)}
        # each exchange: the counts, then the rows, as two launches that
        # hand back work handles (the coordinator does not wait for them)
        assert sorted(cid for cid, _ in launched) == sorted(
            (b, s, 0, p) for b in range(3) for s in (0, 1) for p in (0, 1))
        assert all(handle for _, handle in launched)
        orders.append(order)
    assert orders[0] == orders[1]  # one launch order on both ranks
