r"""Graphs generated chunk by chunk to disk, both kinds: ``papers-like``
and ``mag240m-like`` (MAG240M's shape at a scale) deterministic, valid and
sampled by the loaders; bad scales and configurations named."""
import argparse
import json

import pytest
import torch

from pyg_fastload import FastNeighborLoader
from pyg_fastload.caching.open import open_dataset
from pyg_fastload.datasets import disk_synthetic
from pyg_fastload.datasets.disk_synthetic import (
    DISK_PRESETS,
    DiskGraphConfig,
    HeteroDiskConfig,
    prepare_disk_synthetic,
)
from pyg_fastload.datasets.prepare import add_arguments, run
from pyg_fastload.io import open_dataset_dir


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


# ------------------------------------------------------- mag240m-like --
SCALE = 0.0002  # 24K papers, 24K authors, 5 institutions, 0.7M edges
MAG240M = DISK_PRESETS['mag240m-like']


def parse(argv):
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(argv)


def arrays(path):
    return {p.name: p.read_bytes() for p in sorted(path.iterdir())
            if p.suffix == '.bin'}


@pytest.fixture(scope='module')
def small(tmp_path_factory):
    root = tmp_path_factory.mktemp('mag240m')
    with pytest.MonkeyPatch.context() as patch:  # several chunks of each
        patch.setattr(disk_synthetic, 'CHUNK_EDGES', 100_000)
        patch.setattr(disk_synthetic, 'TYPED_CHUNK_NODES', 5_000)
        first = prepare_disk_synthetic('mag240m-like', root / 'a',
                                       scale=SCALE, progress=False)
        again = prepare_disk_synthetic('mag240m-like', root / 'b',
                                       scale=SCALE, progress=False)
        other = prepare_disk_synthetic('mag240m-like', root / 'c', seed=1,
                                       scale=SCALE, progress=False)
    return first, again, other


def test_the_preset_has_mag240ms_shape_at_the_scale(small):
    ds = open_dataset_dir(small[0].path, verify='checksum')
    cfg = MAG240M.scaled(SCALE)
    assert ds.num_nodes == cfg.num_nodes
    assert ds.num_nodes['paper'] == round(121_751_666 * SCALE)
    assert ds.target == 'paper' and ds.num_classes == 153
    assert {t: list(a) for t, a in ds.arrays.items()} == {
        'paper': ['x', 'y', 'train_mask', 'val_mask', 'test_mask'],
        'author': [], 'institution': []}
    x = ds.arrays['paper']['x']
    assert x.dtype == torch.float16 and x.shape[1] == 768
    assert ds.edge_types == [
        ('author', 'affiliated_with', 'institution'),
        ('institution', 'rev_affiliated_with', 'author'),
        ('author', 'writes', 'paper'), ('paper', 'rev_writes', 'author'),
        ('paper', 'cites', 'paper'), ('paper', 'rev_cites', 'paper')]
    data = ds.to_hetero_data()
    for (src, rel, dst), count in cfg.num_edges.items():
        edge_index = data[src, rel, dst].edge_index
        assert edge_index.size(1) == count
        assert torch.equal(data[dst, f'rev_{rel}', src].edge_index,
                           edge_index.flip(0))
    y, cites = data['paper'].y, data['paper', 'cites', 'paper'].edge_index
    same = float((y[cites[0]] == y[cites[1]]).float().mean())
    assert 0.65 < same < 0.75  # homophily 0.7 (and 1/153 by chance)
    train = int(data['paper'].train_mask.sum())
    assert 0.5 * 0.0091 < train / y.numel() < 1.5 * 0.0091
    assert (cfg.nbytes() == sum(
        spec['bytes'] for spec in ds.meta['arrays'].values()))


def test_the_same_seed_gives_the_same_files(small):
    first, again, other = small
    assert arrays(first.path) == arrays(again.path)
    assert arrays(first.path)['indices.bin'] != \
        arrays(other.path)['indices.bin']


def test_a_loader_samples_and_a_model_trains_on_it(small):
    features, graph = open_dataset(small[0].path)
    train = small[0].arrays['paper']['train_mask'].nonzero().view(-1)
    loader = FastNeighborLoader(
        (features, graph), [5, 3], input_nodes=('paper', train),
        batch_size=32, shuffle=True, generator=torch.Generator().manual_seed(0))
    batch = next(iter(loader))
    paper = batch['paper']
    assert paper.batch_size == 32 and paper.x.shape[1] == 768
    assert batch['author', 'writes', 'paper'].edge_index.size(1) > 0
    from torch_geometric.nn import HeteroConv, SAGEConv
    cites = [('paper', 'cites', 'paper'), ('paper', 'rev_cites', 'paper')]
    model = HeteroConv({e: SAGEConv(768, 153) for e in cites})
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    losses = []
    for _ in range(5):  # a few steps on the batch: the loss goes down
        out = model({'paper': paper.x.float()},
                    {e: batch[e].edge_index for e in cites})['paper']
        loss = torch.nn.functional.cross_entropy(out[:32], paper.y[:32])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]


def test_the_cli_writes_it_with_a_default_scale(tmp_path, capsys,
                                                monkeypatch):
    # not 0.01 in a test
    monkeypatch.setattr(disk_synthetic, 'DEFAULT_SCALE', SCALE)
    out = tmp_path / 'mag240m'
    ds = run(parse(['--preset', 'mag240m-like', '--no-progress', str(out)]))
    assert '3 node types, 6 edge types' in capsys.readouterr().out
    assert ds.num_nodes['paper'] == round(121_751_666 * SCALE)
    meta = json.loads((out / 'meta.json').read_text())
    assert f'--scale {SCALE:g}' in meta['command']
    assert meta['synthetic']['config']['num_edges'][
        'paper__cites__paper'] == round(1_297_748_926 * SCALE)


@pytest.mark.parametrize('scale, match', [
    ('0', r"invalid 'scale' = 0\.0 \(--scale\): pass a number > 0"),
    ('-1', r"invalid 'scale' = -1\.0 \(--scale\): pass a number > 0"),
    ('nan', r"invalid 'scale' = nan"),
    ('1e6', r"invalid 'scale' = 1e\+06 \(--scale\): it writes about .* more "
            r"than the .* free in .*; pass a scale of at most about"),
])
def test_bad_scales_are_named_and_nothing_is_written(tmp_path, scale, match):
    with pytest.raises(SystemExit, match=match):
        run(parse(['--preset', 'mag240m-like', '--scale', scale,
                   '--no-progress', str(tmp_path / 'bad')]))
    assert not list(tmp_path.iterdir())


def test_bad_typed_configs_name_the_field():
    with pytest.raises(ValueError, match=r"invalid 'num_edges' of "
                       r"HeteroDiskConfig: edge type \('author', 'writes', "
                       r"'venue'\) names node type 'venue', which is not in "
                       r"'num_nodes' \(paper, author\); add it"):
        HeteroDiskConfig(num_nodes={'paper': 10, 'author': 10},
                         num_edges={('author', 'writes', 'venue'): 5})
    with pytest.raises(ValueError, match="invalid 'feature_dtype' = 'int8'"):
        HeteroDiskConfig(num_nodes={'paper': 10}, num_edges={},
                         feature_dtype='int8')
    with pytest.raises(ValueError, match="invalid 'labelled' = 'venue'"):
        HeteroDiskConfig(num_nodes={'paper': 10}, num_edges={},
                         labelled='venue')
