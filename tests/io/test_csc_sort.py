
import numpy as np
import pytest
import torch

from pyg_fastload.graph.topology import CSCTopology
from pyg_fastload.io import (
    csc_from_edge_chunks,
)


# --------------------------------------------------------- external sort --
def test_csc_from_edge_chunks_matches_from_edge_index(tmp_path):
    rng = np.random.default_rng(1)
    n, e = 300, 5_000
    src, dst = rng.integers(0, n, e), rng.integers(0, n, e)
    bounds = [0, 1, 1, 700, 2_345, 2_346, 4_000, e]  # uneven, empty chunks

    def chunks():
        for a, b in zip(bounds[:-1], bounds[1:]):
            # Mixed inputs: numpy int64 and torch int32.
            if a % 2:
                yield torch.from_numpy(src[a:b]).int(), torch.from_numpy(
                    dst[a:b]).int()
            else:
                yield src[a:b], dst[a:b]

    indptr_file, indices_file = csc_from_edge_chunks(chunks, n, tmp_path,
                                                     progress=False)
    assert indptr_file == tmp_path / 'indptr.bin'
    expected = CSCTopology.from_edge_index(
        torch.from_numpy(np.stack([src, dst])), num_nodes=n)
    assert np.array_equal(np.fromfile(indptr_file, dtype=np.int64),
                          expected.indptr.numpy())
    # Same stable order within every destination as one global stable sort.
    assert np.array_equal(np.fromfile(indices_file, dtype=np.int32),
                          expected.indices.numpy())
    assert not list(tmp_path.glob('*.tmp'))


def test_csc_from_edge_chunks_errors(tmp_path):
    with pytest.raises(ValueError, match=r'chunk 1 holds source node id 9, '
                       r'outside \[0, num_nodes=5\)'):
        csc_from_edge_chunks(lambda: [(np.array([0]), np.array([1])),
                                      (np.array([9]), np.array([1]))],
                             5, tmp_path, progress=False)
    calls = []

    def changing():
        calls.append(1)
        yield np.array([0, 1]), np.array([1, len(calls) % 2 + 1])

    with pytest.raises(ValueError, match='second call'):
        csc_from_edge_chunks(changing, 5, tmp_path, progress=False)
    assert not list(tmp_path.glob('*.tmp'))
