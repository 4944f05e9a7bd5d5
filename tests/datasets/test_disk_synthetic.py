import json

import pytest
import torch

from pyg_fastload.datasets import disk_synthetic
from pyg_fastload.datasets.disk_synthetic import (
    DISK_PRESETS,
    DiskGraphConfig,
    prepare_disk_synthetic,
)
from pyg_fastload.datasets.prepare import add_arguments, run

CFG = DiskGraphConfig(num_nodes=30_000, mean_degree=8.0, num_features=12,
                      num_classes=5, train_fraction=0.1, val_fraction=0.05,
                      test_fraction=0.05)


@pytest.fixture(scope='module')
def generated(tmp_path_factory):
    with pytest.MonkeyPatch.context() as patch:  # several chunks
        patch.setattr(disk_synthetic, 'CHUNK_NODES', 4096)
        root = tmp_path_factory.mktemp('disk')
        first = prepare_disk_synthetic(CFG, root / 'a', progress=False)
        again = prepare_disk_synthetic(CFG, root / 'b', progress=False)
    return first, again


def test_generation_is_deterministic_and_a_valid_csc(generated):
    ds, again = generated
    specs = {k: s['sha256'] for k, s in ds.meta['arrays'].items()}
    assert specs == {k: s['sha256'] for k, s in
                     again.meta['arrays'].items()}
    topo = ds.topology
    n = ds.num_nodes
    indptr, indices = topo.indptr, topo.indices.long()
    assert indptr[0] == 0 and indptr[-1] == indices.numel() == ds.num_edges
    degree = indptr[1:] - indptr[:-1]
    assert bool((degree >= 0).all())
    dst = torch.repeat_interleave(torch.arange(n), degree)
    assert bool((indices >= 0).all()) and bool((indices < n).all())
    assert not bool((indices == dst).any())  # no self loops
    keys = dst * n + indices  # sorted, distinct neighbour lists
    assert bool((keys[1:] > keys[:-1]).all())
    assert 6.0 <= ds.num_edges / n <= 9.0


def test_labels_follow_communities_and_masks_are_disjoint(generated):
    ds, _ = generated
    arrays = ds.arrays
    y = arrays['y']
    assert int(y.min()) >= 0 and int(y.max()) < CFG.num_classes
    topo = ds.topology
    dst = torch.repeat_interleave(torch.arange(ds.num_nodes),
                                  topo.indptr[1:] - topo.indptr[:-1])
    same = (y[topo.indices.long()] == y[dst]).double().mean()
    assert same > 0.6  # homophily 0.7 plus chance
    masks = torch.stack([arrays[k] for k in ('train_mask', 'val_mask',
                                             'test_mask')])
    assert int(masks.sum(0).max()) == 1
    assert abs(float(masks[0].double().mean()) - 0.1) < 0.01
    # features carry the class: class means are far apart
    x = arrays['x']
    means = torch.stack([x[y == c].mean(0) for c in range(CFG.num_classes)])
    assert float(torch.cdist(means, means).fill_diagonal_(9).min()) > 1.0


def test_popular_sources_are_spread_over_the_file(generated):
    ds, _ = generated
    n = ds.num_nodes
    out = torch.bincount(ds.topology.indices.long(), minlength=n)
    hot = torch.argsort(out, descending=True)[:n // 10]
    assert out[hot].sum() > 0.25 * out.sum()  # skewed
    # hot nodes are not clustered at the start of the id range
    assert 0.3 * n < float(hot.double().mean()) < 0.7 * n


def test_the_cli_scales_the_preset_and_refuses_scale_elsewhere(tmp_path,
                                                               capsys):
    import argparse
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    out = tmp_path / 'papers'
    ds = run(parser.parse_args(['--preset', 'papers-like', '--scale',
                                '0.0002', '--no-progress', str(out)]))
    assert ds.num_nodes == round(DISK_PRESETS['papers-like'].num_nodes
                                 * 0.0002)
    assert ds.arrays['x'].shape[1] == 128
    meta = json.loads((out / 'meta.json').read_text())
    assert '--scale 0.0002' in meta['command']
    with pytest.raises(SystemExit, match='--scale only applies'):
        run(parser.parse_args(['--preset', 'tiny', '--scale', '2',
                               str(tmp_path / 'x')]))


def test_bad_configs_name_the_field():
    with pytest.raises(ValueError, match="'degree_exponent'"):
        DiskGraphConfig(num_nodes=100, mean_degree=3, num_features=4,
                        num_classes=2, degree_exponent=1.5)
    with pytest.raises(ValueError, match="'scale'"):
        CFG.scaled(0)
