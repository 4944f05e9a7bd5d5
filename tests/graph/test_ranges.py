import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pyg_fastload.graph import expand_ranges


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 6)),
                max_size=20))
def test_expand_ranges_concatenates_aranges(pairs):
    starts = torch.tensor([s for s, _ in pairs], dtype=torch.long)
    counts = torch.tensor([c for _, c in pairs], dtype=torch.long)
    expected = [v for s, c in pairs for v in range(s, s + c)]
    assert expand_ranges(starts, counts).tolist() == expected
    total = sum(c for _, c in pairs)
    assert expand_ranges(starts, counts, total).tolist() == expected
