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
    time.sleep(0.2)  # several samples while it is held
    del rows
    peaks = watch.stop()
    # freed before stop: only the thread's samples saw it
    assert peaks['anon'] >= before + (200 << 20)
    assert peaks['rss'] >= peaks['anon']
    assert process_memory()['anon'] < peaks['anon'] - (100 << 20)
