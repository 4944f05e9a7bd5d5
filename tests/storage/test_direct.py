import errno
import os

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pyg_fastload.caching import open_dataset
from pyg_fastload.storage import DirectStorage, process_read_bytes
from pyg_fastload.storage import direct as direct_module
from pyg_fastload.storage.direct import DirectStorageError

# Row sizes: 400 B (several rows per 4 KiB block, some straddling two),
# 42 B, and 6000 B (every row spans two or three blocks).
SHAPES = [((1001, 100), torch.float32), ((777, 3, 7), torch.int16),
          ((65, 1500), torch.float32)]


@pytest.fixture(scope='module', params=range(len(SHAPES)))
def table(request, tmp_path_factory):
    shape, dtype = SHAPES[request.param]
    gen = torch.Generator().manual_seed(request.param)
    x = (torch.randn(shape, generator=gen) * 1000).to(dtype)
    path = tmp_path_factory.mktemp('direct') / 'x.bin'
    x.numpy().tofile(path)
    return x, str(path)


@pytest.mark.parametrize('direct', [None, False])
@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_direct_reads_return_exactly_the_files_rows(table, direct, data):
    x, path = table
    n = x.size(0)
    ids = torch.tensor(data.draw(st.lists(st.integers(0, n - 1), max_size=300)
                                 ) + [n - 1], dtype=torch.long)  # last row
    merge_gap = data.draw(st.integers(0, 2))
    storage = DirectStorage(path, x.dtype, x.shape, in_flight=data.draw(
        st.integers(1, 8)), merge_gap=merge_gap, direct=direct)
    out = torch.empty((ids.numel(), *x.shape[1:]), dtype=x.dtype)
    storage.gather(ids, out)
    assert torch.equal(out, x[ids])
    distinct = torch.unique(ids)
    counters = storage.counters
    assert counters.requests == ids.numel()
    assert counters.hits == distinct.numel()
    # whole blocks: at least the rows' bytes; at most, per row, the blocks
    # its ends share with others and the gap merged up to the next row
    row_bytes = x[0].numel() * x.element_size()
    assert distinct.numel() * row_bytes <= counters.disk_bytes <= \
        distinct.numel() * (row_bytes + (2 + merge_gap) * 4096)


def test_merging_touching_rows_makes_one_read(tmp_path):
    x = torch.arange(4096 * 4, dtype=torch.int32).view(-1, 256)  # 1 KiB rows
    path = tmp_path / 'x.bin'
    x.numpy().tofile(path)
    storage = DirectStorage(str(path), torch.int32, x.shape)
    begins, blocks, extent = storage.extents(torch.tensor([0, 1, 5, 40]))
    # rows 0-1 share block 0, row 5 is in block 1 (touching), row 40 in 10
    assert begins.tolist() == [0, 10] and blocks.tolist() == [2, 1]
    assert extent.tolist() == [0, 0, 0, 1]
    out = torch.empty(4, 256, dtype=torch.int32)
    storage.read_sorted(torch.tensor([0, 1, 5, 40]), out)
    assert storage.read_calls == 2
    assert torch.equal(out, x[[0, 1, 5, 40]])


@pytest.mark.reliability(
    fault='direct reads on a file system that refuses O_DIRECT',
    behaviour="a warning naming the file and the reason, then page-cache "
              "reads dropped after use; with direct=True an error naming "
              "storage='mmap' as the fix")
def test_without_o_direct_it_falls_back_and_says_so(table, monkeypatch):
    x, path = table
    real = os.preadv

    def refusing(fd, buffers, offset):  # a file system refusing O_DIRECT
        if os.get_blocking(fd) and fcntl_direct(fd):
            raise OSError(errno.EINVAL, 'Invalid argument')
        return real(fd, buffers, offset)

    def fcntl_direct(fd):
        import fcntl
        return bool(fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_DIRECT)

    monkeypatch.setattr(os, 'preadv', refusing)
    with pytest.warns(UserWarning, match='refuses O_DIRECT'):
        storage = DirectStorage(path, x.dtype, x.shape)
    assert not storage.reads.direct
    ids = torch.tensor([x.size(0) - 1, 0, 3])
    out = torch.empty((3, *x.shape[1:]), dtype=x.dtype)
    storage.gather(ids, out)
    assert torch.equal(out, x[ids])
    with pytest.raises(OSError, match="use storage='mmap'"):
        DirectStorage(path, x.dtype, x.shape, direct=True)


@pytest.mark.reliability(
    fault='a feature file truncated before or while the direct tier reads it',
    behaviour='an error naming the file, the bytes read and the rows it '
              'should hold; never a partial row')
def test_a_shortened_file_is_an_error_never_a_partial_row(tmp_path):
    x = torch.randn(100, 300)  # 1200 B rows
    path = tmp_path / 'x.bin'
    x.numpy().tofile(path)
    with open(path, 'r+b') as handle:  # shorter before opening
        handle.truncate(99 * 1200 + 600)
    with pytest.raises(ValueError, match='truncated'):
        DirectStorage(str(path), torch.float32, x.shape)
    x.numpy().tofile(path)
    storage = DirectStorage(str(path), torch.float32, x.shape)
    with open(path, 'r+b') as handle:  # shortened while open
        handle.truncate(99 * 1200 + 600)
    out = torch.full((1, 300), -1.0)
    with pytest.raises(DirectStorageError, match='shorter than'):
        storage.gather(torch.tensor([99]), out)
    storage.gather(torch.tensor([3]), out)  # whole rows still read
    assert torch.equal(out, x[[3]])


def test_bad_settings_name_the_argument(table):
    x, path = table
    with pytest.raises(ValueError, match="'in_flight'"):
        DirectStorage(path, x.dtype, x.shape, in_flight=0)
    with pytest.raises(ValueError, match="'offset' = 2"):
        DirectStorage(path, torch.float32, (10, 4), offset=2)


@pytest.mark.skipif(process_read_bytes() is None, reason='no /proc/self/io')
def test_measured_io_covers_every_row_that_missed_the_caches(tiny_dir):
    features, _ = open_dataset(tiny_dir[0], storage='direct',
                               host_budget='20%')
    ids = torch.randperm(features.get_tensor_size(
        group_name=None, attr_name='x', index=None)[0])[:500]
    before = process_read_bytes()
    features.reset_counters()
    rows = features.gather('x', ids)
    measured = process_read_bytes() - before
    stats = features.stats('x')['x']
    missed = stats['host']['requests'] - stats['host']['hits']
    row_bytes = rows[0].numel() * rows.element_size()
    assert missed > 0 and stats['storage']['requests'] == missed
    assert measured >= missed * row_bytes
    assert stats['storage']['disk_bytes'] >= missed * row_bytes
    assert measured >= stats['storage']['disk_bytes']
    x = np.fromfile(os.path.join(tiny_dir[0], 'x.bin'), dtype=np.float32)
    assert torch.equal(rows, torch.from_numpy(x.reshape(-1, rows.size(1)))[
        ids])


def test_large_gathers_are_read_in_bounded_waves(table, monkeypatch):
    x, path = table
    monkeypatch.setattr(direct_module, 'WAVE_BYTES', 3 * 4096)
    storage = DirectStorage(path, x.dtype, x.shape, in_flight=3)
    ids = torch.randperm(x.size(0))[:200]
    out = torch.empty((ids.numel(), *x.shape[1:]), dtype=x.dtype)
    storage.gather(ids, out)
    assert torch.equal(out, x[ids])
    assert storage.counters.requests == ids.numel()
    # never the whole gather:
    assert len(storage.reads._buffer._map) <= 8 * 4096


def test_the_tuner_doubles_reads_in_flight_while_it_pays():
    from pyg_fastload.storage.direct import InFlightTuner
    tuner = InFlightTuner(start=4, limit=128, waves=2, min_reads=10)
    # a device that saturates at 16 reads in flight
    rate = {4: 100.0, 8: 190.0, 16: 300.0, 32: 305.0}
    depths = []
    for _ in range(20):
        depth = tuner.depth
        depths.append(depth)
        tuner.observe(reads=50, blocks=int(rate[depth]), seconds=1.0)
    assert tuner.settled and tuner.depth == 16  # 32 gained < 5%
    assert depths[:8] == [4, 4, 8, 8, 16, 16, 32, 32]
    assert tuner.observe(reads=5, blocks=1, seconds=1.0) == 16  # ignored


def test_auto_reads_in_flight_returns_the_same_rows(table):
    x, path = table
    storage = DirectStorage(path, x.dtype, x.shape, in_flight='auto')
    storage.tuner.min_reads = 1
    storage.tuner.waves = 1
    for seed in range(12):
        ids = torch.randperm(x.size(0), generator=torch.Generator(
        ).manual_seed(seed))[:40]
        out = torch.empty((40, *x.shape[1:]), dtype=x.dtype)[:ids.numel()]
        storage.gather(ids, out)
        assert torch.equal(out, x[ids])
    assert storage.in_flight == storage.tuner.depth >= 1
    with pytest.raises(ValueError, match="or 'auto'"):
        DirectStorage(path, x.dtype, x.shape, in_flight='fast')


def test_long_merged_reads_are_cut_into_parallel_pieces(table, monkeypatch):
    x, path = table
    monkeypatch.setattr(direct_module, 'READ_BYTES', 2 * 4096)
    storage = DirectStorage(path, x.dtype, x.shape, in_flight=4)
    rows = torch.arange(x.size(0))  # every row: one long merged extent
    out = torch.empty_like(x)
    storage.read_sorted(rows, out)
    assert torch.equal(out, x)
    blocks = storage.counters.pages
    assert storage.read_calls == -(-blocks // 2)  # pieces of 2 blocks


def test_the_block_devices_counters_see_direct_reads(tmp_path):
    from pyg_fastload.storage import device_read_bytes
    x = torch.randn(4000, 256)  # 4 MB, one 1 KiB row per read
    path = tmp_path / 'x.bin'
    x.numpy().tofile(path)
    before = device_read_bytes(str(path))
    if before is None:
        pytest.skip('no block device statistics for this file system')
    storage = DirectStorage(str(path), x.dtype, x.shape, direct=True)
    out = torch.empty_like(x)
    storage.read_sorted(torch.arange(4000), out)
    assert torch.equal(out, x)
    # other processes may read too, so only a lower bound holds
    assert device_read_bytes(str(path)) - before >= x.numel() * 4
