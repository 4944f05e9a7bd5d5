import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pyg_fastload.storage import (
    MemoryStorage,
    MmapStorage,
    StaticCache,
    WindowBufferedCache,
)

ROWS, COLS = 40, 3
TABLE = torch.arange(ROWS * COLS, dtype=torch.float32).view(ROWS, COLS)
row_ids = st.lists(st.integers(0, ROWS - 1), max_size=30)


def mmap_storage(tmp_path):
    path = tmp_path / 'x.bin'
    TABLE.numpy().tofile(path)
    return MmapStorage(str(path), torch.float32, TABLE.shape)


@settings(max_examples=40, deadline=None)
@given(row_ids)
def test_storages_return_their_rows(tmp_path_factory, ids):
    ids = torch.tensor(ids, dtype=torch.long)
    distinct = ids.unique().numel()
    # memory serves every requested row; the file is read once per row
    for storage, served in ((MemoryStorage(TABLE), ids.numel()),
                            (mmap_storage(tmp_path_factory.mktemp('s')),
                             distinct)):
        out = torch.empty(ids.numel(), COLS)
        storage.gather(ids, out)
        assert torch.equal(out, TABLE[ids])
        assert storage.counters.requests == ids.numel()
        assert storage.counters.hits == served
        assert storage.counters.bytes == served * COLS * 4


def test_mmap_reads_sorted_rows_and_counts_pages(tmp_path):
    storage = mmap_storage(tmp_path)
    rows = torch.tensor([2, 7, 30])
    out = torch.empty(3, COLS)
    storage.read_sorted(rows, out)
    assert torch.equal(out, TABLE[rows])
    assert storage.pages_of(rows) == 1  # 480 bytes: one 4 KiB page
    assert np.array_equal(storage.full().numpy(), TABLE.numpy())


@given(row_ids, row_ids)
def test_static_cache_holds_exactly_its_rows(held, asked):
    held = torch.tensor(sorted(set(held)), dtype=torch.long)
    cache = StaticCache(MemoryStorage(TABLE), held, TABLE[held])
    asked = torch.tensor(asked, dtype=torch.long)
    slot = cache.lookup(asked)
    is_held = torch.isin(asked, held)
    assert torch.equal(slot >= 0, is_held)
    assert torch.equal(cache.read_slots(slot[is_held]),
                       TABLE[asked[is_held]])


def test_slot_maps_take_four_bytes_per_node():
    # The per-node slot map is a cache's fixed overhead on big graphs.
    held = torch.tensor([3, 7])
    cache = StaticCache(MemoryStorage(TABLE), held, TABLE[held])
    assert cache.slot.dtype == torch.int32
    window = WindowBufferedCache(MemoryStorage(TABLE), 4,
                                 torch.device('cpu'))
    assert window.slot.dtype == torch.int32
    ids = torch.tensor([5, 9])
    window.announce(ids)
    window.admit(ids, TABLE[ids])
    assert torch.equal(window.read_slots(window.lookup(ids)), TABLE[ids])


def test_window_cache_never_evicts_a_pending_row():
    cache = WindowBufferedCache(MemoryStorage(TABLE), 4, torch.device('cpu'),
                                seed=0)
    first = torch.tensor([0, 1, 2, 3])
    cache.announce(first)           # a batch still to come needs 0..3
    cache.admit(first, TABLE[first])
    later = torch.tensor([10, 11])
    cache.admit(later, TABLE[later])  # no idle slot: nothing evicted
    assert torch.equal(cache.lookup(first) >= 0, torch.ones(4, dtype=bool))
    assert cache.evictions == 0
    cache.retire(first)             # that batch was consumed
    cache.admit(later, TABLE[later])  # no batch needs them: no eviction
    assert cache.evictions == 0 and bool((cache.lookup(later) < 0).all())
    cache.announce(later)           # now a coming batch needs them
    cache.admit(later, TABLE[later])
    assert cache.evictions == 2
    held = cache.lookup(later)
    assert bool((held >= 0).all())
    assert torch.equal(cache.read_slots(held), TABLE[later])


@pytest.mark.reliability(
    fault="`x.bin` truncated while the default memory-mapped tier reads it",
    behaviour="`OSError` naming the file and both sizes (was: the process "
              "killed by SIGBUS, no file named)")
def test_a_feature_file_truncated_while_mapped_is_an_error(tmp_path):
    import textwrap

    from ..distributed.ranks import run_code
    path = tmp_path / 'x.bin'
    torch.randn(4096, 16).numpy().tofile(path)
    script = textwrap.dedent(f'''
        import os, torch
        from pyg_fastload.storage import MmapStorage
        storage = MmapStorage({str(path)!r}, torch.float32, (4096, 16))
        out = torch.empty(10, 16)
        storage.gather(torch.arange(10), out)
        os.truncate({str(path)!r}, 4096)  # another process shortens it
        try:
            storage.gather(torch.arange(4000, 4010), out)
        except OSError as error:
            print('refused:', error)
    ''')
    done = run_code(script)  # a process of its own: SIGBUS would end it
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert f"refused: '{path}' was truncated while in use: it holds 4096 " \
           f"bytes, its rows need 262144" in done.stdout
