r"""The heartbeat thread, with a store in memory: a rank that stops beating
is named after the silence, one that says it is done is not."""
import threading
import time

from pyg_fastload.distributed.heartbeat import Heartbeat, silence_for


class _Store:
    def __init__(self):
        self.data, self.lock = {}, threading.Lock()

    def set(self, key, value):
        with self.lock:
            self.data[key] = value.encode() if isinstance(value, str) \
                else value

    def get(self, key):
        with self.lock:
            return self.data[key]

    def check(self, keys):
        with self.lock:
            return all(k in self.data for k in keys)


def test_a_silent_rank_is_named_and_this_rank_stops():
    store, exits = _Store(), []
    watcher = Heartbeat(store, 0, 2, silence=0.5, grace=0.2,
                        exit=exits.append)
    frozen = Heartbeat(store, 1, 2, silence=0.5)
    frozen.step = 7
    frozen._beat()  # one beat, then nothing: frozen
    watcher.start()
    watcher._thread.join(timeout=10)
    assert watcher.frozen is not None
    assert watcher.frozen.startswith('rank 1: last heard ')
    assert watcher.frozen.endswith('s ago at step 7')
    assert exits == [1]  # its main thread did not stop by itself
    assert store.get('pyg_fastload/failed/1').decode().startswith('frozen:')


def test_beating_or_finished_ranks_are_not_frozen():
    store, exits = _Store(), []
    watcher = Heartbeat(store, 0, 3, silence=0.6, grace=0.1,
                        exit=exits.append)
    alive = Heartbeat(store, 1, 3, silence=0.6)
    done = Heartbeat(store, 2, 3, silence=0.6)
    for beat in (watcher, alive, done):
        beat.start()
    done.stop()  # finished: says so, then beats no more
    time.sleep(2.0)
    assert watcher.frozen is None and exits == []
    assert [line.split(':')[0] for line in watcher.last_heard()] == ['rank 1']
    watcher.stop()
    alive.stop()


def test_silence_follows_the_timeout():
    assert silence_for(300) == 60 and silence_for(120) == 24
    assert silence_for(5) == 10
