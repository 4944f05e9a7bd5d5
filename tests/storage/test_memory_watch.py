import sys
import time

import pytest
import torch

from pyg_fastload.storage import MemoryWatch, process_memory

pytestmark = pytest.mark.skipif(not sys.platform.startswith('linux'),
                                reason='reads /proc/self/status')


def test_the_watch_sees_memory_freed_before_it_stops():
    before = process_memory()['anon']
    watch = MemoryWatch(0.01).start()
    rows = torch.ones(64 << 20)  # 256 MiB, touched
    # the thread's samples see it while it is held (on busy cores it may
    # take longer than a fixed pause; the deadline bounds a thread that
    # never samples)
    deadline = time.monotonic() + 60
    while watch.peaks.get('anon', 0) < before + (200 << 20):
        assert time.monotonic() < deadline, 'the watch took no sample'
        time.sleep(0.01)
    del rows
    peaks = watch.stop()
    # freed before stop: only the thread's samples saw it
    assert peaks['anon'] >= before + (200 << 20)
    assert peaks['rss'] >= peaks['anon']
    assert process_memory()['anon'] < peaks['anon'] - (100 << 20)


@pytest.mark.reliability(
    fault='a memory watch asked to sample every 0 s, -1 s or "often"',
    behaviour="`ValueError` naming 'interval' (was: a thread spinning "
              "without pause)")
def test_an_interval_that_is_no_pause_is_refused():
    for interval in (0, -1, 'often', True):
        with pytest.raises(ValueError, match="'interval' must be a "
                           "positive number of seconds"):
            MemoryWatch(interval)
