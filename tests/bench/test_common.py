import time

from pyg_fastload import FastNeighborLoader
from pyg_fastload.bench.common import time_loader

from ..helpers import random_graph, stage_threads


def _slow(batch):
    time.sleep(0.2)  # the loading stage is busy when timing ends
    return batch


def test_timing_returns_once_the_loader_threads_have_stopped():
    before = set(stage_threads())  # earlier tests' loaders may still stop
    loader = FastNeighborLoader(random_graph(), [3, 2], batch_size=10,
                                pipeline=True, sampling_workers=2,
                                transform=_slow)
    time_loader(loader, 1, 2)
    assert set(stage_threads()) - before == set()  # the next side runs alone
