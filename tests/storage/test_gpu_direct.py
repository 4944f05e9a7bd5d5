import os
import sys
import threading
import types

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pyg_fastload.caching import open_dataset
from pyg_fastload.storage import GpuDirectStorage, TieredFeatureStore
from pyg_fastload.storage import direct
from pyg_fastload.storage.direct import DirectStorageError
from pyg_fastload.storage.gpu_direct import load_kvikio


class FakeKvikio:
    r"""kvikio's calls as GpuDirectStorage makes them, served by os.pread
    into host (numpy) buffers, recording every read and thread setting."""
    def __init__(self, shorten_by: int = 0):
        self.reads = []
        self.threads = []
        self.shorten_by = shorten_by
        fake = self

        class Future:
            def __init__(self, got):
                self.got = got

            def get(self):
                return self.got

        class CuFile:
            def __init__(self, path, flags):
                assert flags == 'r'
                self.fd = os.open(path, os.O_RDONLY)

            def pread(self, buf, size, file_offset):
                assert isinstance(buf, np.ndarray) and buf.nbytes == size
                data = os.pread(self.fd, size, file_offset)
                data = data[:max(0, len(data) - fake.shorten_by)]
                buf[:len(data)] = np.frombuffer(data, dtype=np.uint8)
                fake.reads.append((file_offset, size))
                return Future(len(data))

            def close(self):
                os.close(self.fd)

        self.CuFile = CuFile
        self.defaults = types.SimpleNamespace(
            set=lambda key, value: fake.threads.append((key, value)))


@pytest.fixture(scope='module')
def table(tmp_path_factory):
    # 400 B rows: several per 4 KiB block, some straddling two; 1001 rows,
    # so the file ends inside a block.
    x = torch.randn(1001, 100, generator=torch.Generator().manual_seed(0))
    path = tmp_path_factory.mktemp('gds') / 'x.bin'
    x.numpy().tofile(path)
    return x, str(path)


@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_kvikio_reads_return_exactly_the_files_rows(table, data):
    x, path = table
    ids = torch.tensor(data.draw(st.lists(st.integers(0, 1000), max_size=200))
                       + [1000], dtype=torch.long)  # and the last row
    fake = FakeKvikio()
    storage = GpuDirectStorage(path, x.dtype, x.shape, in_flight=8,
                               merge_gap=data.draw(st.integers(0, 2)),
                               kvikio=fake)
    out = torch.empty((ids.numel(), 100))
    storage.gather(ids, out)
    assert torch.equal(out, x[ids])
    assert fake.threads == [('num_threads', 8)]
    file_bytes = os.path.getsize(path)
    for offset, size in fake.reads:  # GPUDirect wants 4 KiB-aligned reads
        assert offset % 4096 == 0
        assert size % 4096 == 0 or offset + size == file_bytes
        assert size <= 2**20
    assert storage.counters.requests == ids.numel()
    assert storage.counters.hits == torch.unique(ids).numel()


class LateStream:
    r"""A CUDA stream as late as CUDA may be: queued work runs, in order,
    only when an event recorded after it is waited on, or at :meth:`drain`
    (where the batch's consumer reads it on the stream); :attr:`queued` is
    set each time work is queued."""
    def __init__(self):
        self.pending = []
        self.queued = threading.Event()

    def queue(self, work, device):
        self.pending.append(work)
        self.queued.set()
        upto = len(self.pending)
        stream = self

        class Done:
            def synchronize(self):
                stream.run(upto)
        return Done()

    def run(self, upto):
        for i in range(upto):
            work, self.pending[i] = self.pending[i], None
            if work is not None:
                work()

    def drain(self):
        self.run(len(self.pending))


@pytest.mark.reliability(
    fault="`storage='gds'`: a second gather's kvikio reads write the read "
          "buffer while the first gather's copy out of it is still queued "
          "on the GPU",
    behaviour="every row is the file's: a wave's reads wait for the event "
              "recorded after the previous gather (was: the queued copy "
              "could read the next reads' bytes)")
def test_a_buffer_is_written_again_only_after_its_gather_ran(table):
    x, path = table
    stream = LateStream()
    storage = GpuDirectStorage(path, x.dtype, x.shape, in_flight=2,
                               kvikio=FakeKvikio(), stream=stream)
    # the second's 30 blocks fit in the first's 40: one buffer
    ids = [torch.arange(0, 400, 7), torch.arange(500, 800, 5)]
    outs = [torch.zeros(i.numel(), 100) for i in ids]
    errors = []

    def second():  # its reads start as soon as the first frees the lock
        try:
            assert stream.queued.wait(timeout=60)
            storage.gather(ids[1], outs[1])
        except Exception as error:  # reported below, not lost in a thread
            errors.append(error)

    thread = threading.Thread(target=second)
    thread.start()
    storage.gather(ids[0], outs[0])
    thread.join(timeout=60)
    assert not thread.is_alive() and not errors, errors
    stream.drain()
    for rows, out in zip(ids, outs):
        assert torch.equal(out, x[rows])


def test_the_waves_of_one_gather_wait_for_each_others_gathers(
        table, monkeypatch):
    x, path = table
    monkeypatch.setattr(direct, 'WAVE_BYTES', 8 * 2 * 4096)  # 8 rows a wave
    stream = LateStream()
    storage = GpuDirectStorage(path, x.dtype, x.shape, in_flight=2,
                               kvikio=FakeKvikio(), stream=stream)
    ids = torch.arange(3, 1001, 11)
    out = torch.zeros(ids.numel(), 100)
    storage.gather(ids, out)
    stream.drain()
    assert len(stream.pending) == -(-ids.numel() // 8)  # a gather a wave
    assert torch.equal(out, x[ids])


def test_auto_reads_in_flight_set_kvikio_threads(table):
    x, path = table
    fake = FakeKvikio()
    storage = GpuDirectStorage(path, x.dtype, x.shape, in_flight='auto',
                               kvikio=fake)
    assert fake.threads == [('num_threads', storage.tuner.depth)]
    storage._set_in_flight(16)  # what the tuner does after a doubling
    assert fake.threads[-1] == ('num_threads', 16)
    assert storage.in_flight == 16


def test_a_short_kvikio_read_is_an_error_never_a_partial_row(table):
    x, path = table
    storage = GpuDirectStorage(path, x.dtype, x.shape, in_flight=2,
                               kvikio=FakeKvikio(shorten_by=1))
    out = torch.empty((2, 100))
    with pytest.raises(DirectStorageError, match='truncated'):
        storage.gather(torch.tensor([3, 900]), out)


def test_missing_kvikio_says_how_to_get_it(monkeypatch):
    monkeypatch.setitem(sys.modules, 'kvikio', None)  # import fails
    with pytest.raises(ImportError, match="pip install kvikio-cu12.*"
                                          "storage='direct'"):
        load_kvikio()


def test_gds_on_a_cpu_feature_store_is_refused(table):
    x, path = table
    store = TieredFeatureStore()
    with pytest.raises(ValueError, match="use storage='mmap' or 'direct' "
                                         "on CPU"):
        store.put_mmap_tensor(path, x.dtype, x.shape, 'x', storage='gds')
    with pytest.raises(ValueError, match="'storage': 'nvme' is not one of"):
        store.put_mmap_tensor(path, x.dtype, x.shape, 'x', storage='nvme')


def _real_kvikio():
    try:
        load_kvikio()
        return torch.cuda.is_available()
    except ImportError:
        return False


@pytest.mark.skipif(not _real_kvikio(), reason='needs CUDA and kvikio')
def test_gds_reads_land_in_gpu_memory_through_the_tiers(tiny_dir):
    features, _ = open_dataset(tiny_dir[0], device='cuda', storage='gds',
                               host_budget='20%')
    ids = torch.randperm(features.get_tensor_size(
        group_name=None, attr_name='x', index=None)[0])[:500]
    rows = features.gather('x', ids)
    assert rows.device.type == 'cuda'
    x = np.fromfile(os.path.join(tiny_dir[0], 'x.bin'), dtype=np.float32)
    assert torch.equal(rows.cpu(), torch.from_numpy(
        x.reshape(-1, rows.size(1)))[ids])
    stats = features.stats('x')['x']
    missed = stats['host']['requests'] - stats['host']['hits']
    assert stats['storage']['requests'] == missed > 0
    assert stats['storage']['disk_bytes'] >= missed * rows[0].nbytes
