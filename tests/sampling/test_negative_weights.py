r"""Negatives drawn by PyG's ``NegativeSampling`` weights: in proportion to
them, never a node of weight 0, on graphs past ``torch.multinomial``'s
2^24 categories."""
import torch
from torch_geometric.sampler import NegativeSampling

from pyg_fastload.sampling.link import negative_nodes


def test_negatives_follow_their_weights():
    weight = torch.tensor([0.0, 1.0, 0.0, 3.0, 0.0])
    neg = NegativeSampling('binary', dst_weight=weight)
    gen = torch.Generator().manual_seed(0)
    drawn = negative_nodes(40_000, 5, neg, 'dst', gen)
    counts = torch.bincount(drawn, minlength=5)
    assert counts[[0, 2, 4]].tolist() == [0, 0, 0]
    assert abs(counts[3] / counts[1] - 3) < 0.15  # 3:1, within noise
    again = negative_nodes(40_000, 5, neg, 'dst',
                           torch.Generator().manual_seed(0))
    assert torch.equal(drawn, again)  # the generator's draws


def test_weights_of_more_nodes_than_multinomial_takes():
    num_nodes = 2**24 + 10
    weight = torch.zeros(num_nodes)
    weight[-3:] = 1  # only the last nodes, past 2^24
    neg = NegativeSampling('binary', src_weight=weight)
    drawn = negative_nodes(1000, num_nodes, neg, 'src',
                           torch.Generator().manual_seed(0))
    assert set(drawn.tolist()) == {num_nodes - 3, num_nodes - 2,
                                   num_nodes - 1}
