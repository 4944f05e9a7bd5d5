import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pyg_fastload.sampling.ops import (
    first_occurrence_mask,
    sample_uniform,
    sample_weighted,
)

degrees = st.lists(st.integers(0, 12), min_size=1, max_size=15)


def frontier(degs):
    deg = torch.tensor(degs, dtype=torch.long)
    start = torch.cumsum(deg, 0) - deg
    return start, deg


@settings(max_examples=60, deadline=None)
@given(degrees, st.integers(0, 8), st.integers(0, 2**31))
def test_uniform_without_replacement(degs, k, seed):
    start, deg = frontier(degs)
    gen = torch.Generator().manual_seed(seed)
    pos, counts = sample_uniform(start, deg, k, False, gen)
    assert counts.tolist() == [min(d, k) for d in degs]
    for s, d, chunk in zip(start.tolist(), degs,
                           pos.split(counts.tolist())):
        assert all(s <= p < s + d for p in chunk.tolist())
        assert chunk.unique().numel() == chunk.numel()  # distinct


@settings(max_examples=60, deadline=None)
@given(degrees, st.integers(1, 8), st.integers(0, 2**31))
def test_uniform_with_replacement(degs, k, seed):
    start, deg = frontier(degs)
    pos, counts = sample_uniform(start, deg, k, True,
                                 torch.Generator().manual_seed(seed))
    assert counts.tolist() == [k if d else 0 for d in degs]
    for s, d, chunk in zip(start.tolist(), degs, pos.split(counts.tolist())):
        assert all(s <= p < s + d for p in chunk.tolist())


@settings(max_examples=60, deadline=None)
@given(degrees, st.integers(1, 6), st.booleans(), st.integers(0, 2**31))
def test_weighted_never_draws_zero_weight_edges(degs, k, replace, seed):
    start, deg = frontier(degs)
    gen = torch.Generator().manual_seed(seed)
    weight = torch.randint(0, 3, (int(deg.sum()), ), generator=gen).double()
    cum = torch.cumsum(weight, 0)
    pos, counts = sample_weighted(start, deg, k, replace, cum, weight, gen)
    assert bool((weight[pos] > 0).all())
    for s, d, chunk in zip(start.tolist(), degs, pos.split(counts.tolist())):
        positive = int((weight[s:s + d] > 0).sum())
        assert chunk.numel() == (k if replace and positive else
                                 min(k, positive))
        if not replace:
            assert chunk.unique().numel() == chunk.numel()


@given(st.lists(st.integers(0, 9), max_size=30))
def test_first_occurrence_mask(values):
    mask = first_occurrence_mask(torch.tensor(values, dtype=torch.long))
    seen, expected = set(), []
    for v in values:
        expected.append(v not in seen)
        seen.add(v)
    assert mask.tolist() == expected


@pytest.mark.reliability(
    fault='fan-out `-1` with weights that include zeros',
    behaviour=('the same edges as a fan-out at or above the degree: the '
               'positive-weight ones'))
@settings(max_examples=40, deadline=None)
@given(degrees, st.integers(0, 2**31))
def test_weighted_minus_one_takes_exactly_the_positive_edges(degs, seed):
    start, deg = frontier(degs)
    gen = torch.Generator().manual_seed(seed)
    weight = torch.randint(0, 3, (int(deg.sum()), ), generator=gen).double()
    cum = torch.cumsum(weight, 0)
    all_pos, all_counts = sample_weighted(start, deg, -1, False, cum, weight)
    assert all_pos.tolist() == (weight > 0).nonzero().view(-1).tolist()
    # the same edges as a fan-out at least the degree draws
    big = max(degs) + 1
    pos, counts = sample_weighted(start, deg, big, False, cum, weight, gen)
    assert counts.tolist() == all_counts.tolist()
    assert sorted(pos.tolist()) == all_pos.tolist()
