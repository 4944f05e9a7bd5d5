r"""``pyg-fastload bench link-accuracy``: both loaders train the same link
predictor on the same split and rank the same evaluation edges."""
import argparse
import importlib.util

import pytest
import torch
from torch_geometric.data import Data

from pyg_fastload.lightning.bench import link_accuracy


def _graph():
    gen = torch.Generator().manual_seed(0)
    # two communities: links are predictable from the features
    x = torch.randn(400, 16, generator=gen)
    side = torch.arange(400) % 2
    x[:, 0] += 3 * side
    src = torch.randint(400, (3000, ), generator=gen)
    dst = torch.randint(200, (3000, ), generator=gen) * 2 + side[src]
    edge_index = torch.cat([torch.stack([src, dst]),
                            torch.stack([dst, src])], dim=1)
    return Data(x=x, edge_index=torch.unique(edge_index, dim=1),
                num_nodes=400)


@pytest.mark.skipif(importlib.util.find_spec('torch_sparse') is None,
                    reason="PyG's LinkNeighborLoader needs torch_sparse here")
def test_both_loaders_train_the_same_link_model(capsys):
    parser = argparse.ArgumentParser()
    link_accuracy.add_arguments(parser)
    args = parser.parse_args(['--seeds', '2', '--epochs', '4', '--hidden',
                              '16', '--batch-size', '512', '--lr', '0.01',
                              '--eval-edges', '100', '--eval-negatives',
                              '20'])
    result = link_accuracy.compare(_graph(), 'two-communities', args)
    out = capsys.readouterr().out
    assert 'FastLoadDataModule' in out and 'PyG LinkNeighborLoader' in out
    assert set(result['runs']) == {'fastload', 'pyg'}
    for side, runs in result['runs'].items():
        assert len(runs) == 2
        # 20 negatives: chance MRR is 17.3%; knowing the parity, about 27%
        for run in runs:
            assert run['val_mrr'] > 22.0, (side, run)
    assert result['difference'] == pytest.approx(
        result['val_mean']['fastload'] - result['val_mean']['pyg'])
