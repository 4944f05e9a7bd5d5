r"""``pyg-fastload bench hetero-accuracy``: both loaders train the same
heterogeneous model on the same data."""
import argparse
import importlib.util

import pytest
import torch

from pyg_fastload.lightning.bench import hetero_accuracy


def test_the_fake_hetero_graph_is_the_same_for_a_seed():
    a, b = hetero_accuracy.fake_hetero(3), hetero_accuracy.fake_hetero(3)
    assert a.edge_types == b.edge_types
    for t in a.node_types:
        assert torch.equal(a[t].x, b[t].x)
    assert torch.equal(a['v0'].y, b['v0'].y)
    masks = [a['v0'][f'{s}_mask'] for s in ('train', 'val', 'test')]
    assert bool(sum(m.long() for m in masks).eq(1).all())  # a partition
    assert hetero_accuracy.fake_hetero(4).edge_types != a.edge_types or \
        not torch.equal(hetero_accuracy.fake_hetero(4)['v0'].x, a['v0'].x)


@pytest.mark.skipif(importlib.util.find_spec('torch_sparse') is None,
                    reason="PyG's NeighborLoader needs torch_sparse here")
def test_both_loaders_train_the_same_model(capsys):
    parser = argparse.ArgumentParser()
    hetero_accuracy.add_arguments(parser)
    args = parser.parse_args(['--datasets', 'fake-hetero', '--seeds', '2',
                              '--epochs', '10', '--hidden', '16',
                              '--batch-size', '512', '--lr', '0.01'])
    result = hetero_accuracy.run(args)['fake-hetero']
    out = capsys.readouterr().out
    assert 'FastLoadDataModule' in out and 'PyG LightningNodeData' in out
    assert set(result['runs']) == {'fastload', 'pyg'}
    for side, runs in result['runs'].items():
        assert len(runs) == 2
        for run in runs:  # 8 classes: chance is 12.5%
            assert run['test_acc'] > 25.0, (side, run)
    assert result['difference'] == pytest.approx(
        result['test_mean']['fastload'] - result['test_mean']['pyg'])
