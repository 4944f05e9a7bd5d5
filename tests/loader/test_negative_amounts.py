r"""Negative sampling amounts too large for a float or a batch (issue 47,
item 6): an error naming ``neg_sampling.amount`` (or
``neg_sampling_ratio``), never an ``OverflowError``."""
import pytest
import torch
from torch_geometric.data import Data
from torch_geometric.sampler import NegativeSampling

from pyg_fastload import FastLinkNeighborLoader

HUGE = 10**400  # no float holds it: math.isfinite raises OverflowError

CASES = {
    'triplet, an int beyond floats': (
        dict(neg_sampling=dict(mode='triplet', amount=HUGE)),
        r"^'neg_sampling\.amount' is more than 2\*\*1328 negatives per "
        r"label edge: a batch of 8 may draw at most 16,777,216"),
    'binary, an int beyond floats': (
        dict(neg_sampling=dict(mode='binary', amount=HUGE)),
        r"^'neg_sampling\.amount' is more than 2\*\*1328 negatives"),
    'NegativeSampling, an int beyond floats': (
        dict(neg_sampling=NegativeSampling('triplet', HUGE)),
        r"^'neg_sampling\.amount' is more than 2\*\*1328 negatives"),
    'neg_sampling_ratio beyond floats': (
        dict(neg_sampling_ratio=HUGE),
        r"^'neg_sampling_ratio' is more than 2\*\*1328 negatives per label "
        r"edge"),
    'binary, a float whose batch total is inf': (
        dict(neg_sampling=dict(mode='binary', amount=1e308)),
        r"^'neg_sampling\.amount' is 1e\+308 negatives per label edge: a "
        r"batch of 8 may draw at most 16,777,216; give at most 2\.09715e\+06"
        r" per label edge"),
    'triplet, infinite': (
        dict(neg_sampling=dict(mode='triplet', amount=float('inf'))),
        r"^'neg_sampling\.amount' is inf: give a number of negatives"),
    'triplet, fractional': (
        dict(neg_sampling=dict(mode='triplet', amount=1.5)),
        r"^'neg_sampling\.amount' is 1\.5, but triplet negative sampling "
        r"draws a whole number of negatives per label edge: give an int"),
}


@pytest.mark.reliability(
    fault="neg_sampling amount (triplet or binary, dict, NegativeSampling "
          "or neg_sampling_ratio) of 10**400, 1e308, inf or 1.5 for "
          "triplets",
    behaviour="a ValueError naming 'neg_sampling.amount' (or "
              "'neg_sampling_ratio') and the bound (was: OverflowError 'int "
              "too large to convert to float' / 'cannot convert float "
              "infinity to integer', or PyG's message for 1.5)")
@pytest.mark.parametrize('name', list(CASES))
def test_huge_negative_amounts_name_the_argument(name):
    r"""Amounts no float holds, or whose batch total is infinite, are
    refused by name."""
    kwargs, match = CASES[name]
    gen = torch.Generator().manual_seed(0)
    data = Data(x=torch.randn(30, 2), num_nodes=30,
                edge_index=torch.randint(30, (2, 90), generator=gen))
    with pytest.raises(ValueError, match=match):
        FastLinkNeighborLoader(data, [2], batch_size=8, **kwargs)


def test_whole_float_triplet_amount_still_loads():
    r"""A whole float for triplets (2.0) is taken, as PyG takes it."""
    gen = torch.Generator().manual_seed(0)
    data = Data(x=torch.randn(30, 2), num_nodes=30,
                edge_index=torch.randint(30, (2, 90), generator=gen))
    batch = next(iter(FastLinkNeighborLoader(
        data, [2], batch_size=8,
        neg_sampling=dict(mode='triplet', amount=2.0))))
    assert tuple(batch.dst_neg_index.shape) == (8, 2)
