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
