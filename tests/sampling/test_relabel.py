import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pyg_fastload.sampling.relabel import DenseRelabeler, SortedRelabeler

ids = st.lists(st.integers(0, 30), max_size=25)


def reference(seeds, hops):
    local = {}
    for i, s in enumerate(seeds):
        local.setdefault(s, i)
    count, out = len(seeds), []
    for hop in hops:
        new = []
        for key in hop:
            if key not in local:
                local[key] = count
                count += 1
                new.append(key)
        out.append(([local[k] for k in hop], new))
    return [local[s] for s in seeds], out


@settings(max_examples=80, deadline=None)
@given(st.lists(st.integers(0, 30), min_size=1, max_size=10),
       st.lists(ids, max_size=3))
def test_relabelers_match_first_appearance_order(seeds, hops):
    seed_ids, expected = reference(seeds, hops)
    dense = DenseRelabeler(31)
    for relabeler in (dense, SortedRelabeler()):
        got = relabeler.insert_seeds(torch.tensor(seeds))
        assert got.tolist() == seed_ids
        for hop, (local, new) in zip(hops, expected):
            got_local, got_new = relabeler.insert(
                torch.tensor(hop, dtype=torch.long))
            assert got_local.tolist() == local
            assert got_new.tolist() == new
        relabeler.reset()
        assert relabeler.num_local == 0
    assert bool((dense.lookup(torch.arange(31)) == -1).all())  # all forgot


def test_dense_relabeler_keeps_int32_arrays_and_hands_out_int64():
    relabeler = DenseRelabeler(100)
    assert relabeler._local.dtype == relabeler._first.dtype == torch.int32
    seeds = relabeler.insert_seeds(torch.tensor([9, 4, 9]))
    local, new = relabeler.insert(torch.tensor([4, 50, 50, 2]))
    assert seeds.dtype == local.dtype == torch.int64
    assert seeds.tolist() == [0, 1, 0] and local.tolist() == [1, 3, 3, 4]
    assert new.tolist() == [50, 2]
