import pytest
import torch

from pyg_fastload.datasets import HETERO_PRESETS, generate_hetero

CITES = ('paper', 'cites', 'paper')


def test_hetero_tiny_has_its_counts_and_is_seeded():
    config = HETERO_PRESETS['hetero-tiny']
    data = generate_hetero('hetero-tiny', seed=1)
    again = generate_hetero('hetero-tiny', seed=1)
    other = generate_hetero('hetero-tiny', seed=2)
    for node_type, count in config.num_nodes.items():
        assert data[node_type].num_nodes == count
    for edge_type, count in config.num_edges.items():
        src, rel, dst = edge_type
        ei = data[edge_type].edge_index
        assert ei.size(1) == count
        assert int(ei[0].max()) < config.num_nodes[src]
        assert int(ei[1].max()) < config.num_nodes[dst]
        assert torch.equal(data[dst, f'rev_{rel}', src].edge_index,
                           ei.flip(0))
        assert torch.equal(again[edge_type].edge_index, ei)
    assert not torch.equal(other[CITES].edge_index, data[CITES].edge_index)
    # features, labels and masks on papers only: other types are declared
    assert data['paper'].x.shape == (400, config.num_features)
    assert set(data['author'].keys()) == {'num_nodes'}
    masks = [data['paper'][f'{s}_mask'] for s in ('train', 'val', 'test')]
    assert int(sum(m.long() for m in masks).max()) == 1  # disjoint
    assert [int(m.sum()) for m in masks] == [240, 80, 80]


def test_citations_are_homophilous():
    data = generate_hetero('hetero-tiny')
    y = data['paper'].y
    src, dst = data[CITES].edge_index
    same = float((y[src] == y[dst]).float().mean())
    # homophily 0.8 plus chance (1 / 4 classes) on the rest
    assert same == pytest.approx(0.8 + 0.2 / 4, abs=0.05)


def test_scale_shrinks_every_count_and_bad_values_are_named():
    data = generate_hetero('mag-like', scale=0.001)
    assert data['paper'].num_nodes == 736
    assert data[CITES].edge_index.size(1) == 5416
    assert int(data['paper'].y.max()) < 349
    with pytest.raises(ValueError, match=r"'scale' = 2 must be in \(0, 1\]"):
        generate_hetero('mag-like', scale=2)
    with pytest.raises(ValueError, match="unknown heterogeneous preset "
                       "'mag'"):
        generate_hetero('mag')
