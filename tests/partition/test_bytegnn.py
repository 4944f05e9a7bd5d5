import numpy as np
import pytest
import torch

from pyg_fastload.graph import CSCTopology
from pyg_fastload.io import open_dataset_dir
from pyg_fastload.partition import assign_parts
from pyg_fastload.partition.bytegnn import gnnp_assign, gnnp_blocks


def _topology(edges, n):
    return CSCTopology.from_edge_index(torch.tensor(edges).t(), n)


def test_blocks_follow_the_first_come_rule():
    # centres 0 and 4; edges are (src, dst): a block grows along in-edges
    edges = [(1, 0), (2, 1),          # 1: hop 1 of 0; 2: hop 2 of 0
             (3, 4), (2, 3),          # 2: also hop 2 of 4 -> smaller id 0
             (9, 4), (9, 1),          # 9: hop 1 of 4 before hop 2 of 0
             (7, 2),                  # 7: hop 3 of 0 -> unreached
             (5, 6)]                  # 5, 6: far from every centre
    topo = _topology(edges, 10)
    block = gnnp_blocks(topo, torch.tensor([0, 4]), num_hops=2)
    expected = {0: 0, 1: 0, 2: 0, 3: 4, 4: 4, 9: 4,
                7: 7, 5: 5, 6: 6, 8: 8}  # unreached: blocks of their own
    assert {v: int(block[v]) for v in range(10)} == expected


def test_blocks_stop_at_num_hops():
    topo = _topology([(1, 0), (2, 1), (3, 2)], 4)
    assert gnnp_blocks(topo, torch.tensor([0]), 1).tolist() == [0, 0, 2, 3]
    assert gnnp_blocks(topo, torch.tensor([0]), 3).tolist() == [0, 0, 0, 0]


def _interleaved_cliques():
    # two 4-cliques, {0, 2, 4, 6} and {1, 3, 5, 7}: ids say nothing
    edges = [(a, b) for group in ([0, 2, 4, 6], [1, 3, 5, 7])
             for a in group for b in group if a != b]
    return _topology(edges, 8)


def test_assignment_follows_edges_and_balances():
    train = torch.ones(8, dtype=torch.bool)
    owner = gnnp_assign(_interleaved_cliques(), (train, None, None), 2, 1,
                        batch=1, progress=False)
    assert owner.tolist() == [0, 1, 0, 1, 0, 1, 0, 1]


def test_the_balance_term_overrides_locality_at_capacity():
    # one 8-clique: locality alone would put it all in one part
    edges = [(a, b) for a in range(8) for b in range(8) if a != b]
    train = torch.ones(8, dtype=torch.bool)
    owner = gnnp_assign(_topology(edges, 8), (train, None, None), 2, 1,
                        batch=1, progress=False)
    assert np.bincount(owner, minlength=2).tolist() == [4, 4]


def test_gnnp_balances_splits_and_beats_hash(tiny_dir):
    dataset = open_dataset_dir(tiny_dir[0])
    topo = dataset.topology
    masks = [dataset.arrays[f'{s}_mask'].bool()
             for s in ('train', 'val', 'test')]
    owner = assign_parts(topo, 4, 'bytegnn', masks)
    again = assign_parts(topo, 4, 'bytegnn', masks)
    assert np.array_equal(owner, again)  # deterministic
    for mask in masks:
        count = np.bincount(owner[mask.numpy()], minlength=4)
        assert count.max() / count.mean() <= 1.05 + 4 / count.mean()

    def cut(o):
        o = torch.from_numpy(o)
        return float((o[topo.indices.long()] !=
                      o[topo.destinations()]).float().mean())
    assert cut(owner) < 0.8 * cut(assign_parts(topo, 4, 'hash'))


def test_gnnp_needs_masks_and_sane_settings():
    topo = _topology([(0, 1)], 2)
    with pytest.raises(ValueError, match="'bytegnn'.*pass 'masks'"):
        assign_parts(topo, 2, 'bytegnn')
    with pytest.raises(ValueError, match="'slack' = -1"):
        gnnp_assign(topo, (torch.ones(2, dtype=torch.bool), None, None), 2,
                    1, slack=-1)
