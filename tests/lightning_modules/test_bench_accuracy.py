import argparse
import os

import pytest
import torch
from torch_geometric.nn import GCN

from pyg_fastload.lightning.bench import accuracy as bench_accuracy
from pyg_fastload import FastNeighborLoader

from ..helpers import WITH_TORCH_SPARSE, random_graph

ROOT = bench_accuracy.default_root()

requires_planetoid = pytest.mark.skipif(
    not os.path.isdir(os.path.join(ROOT, 'Cora', 'raw')),
    reason=f"the Planetoid raw files are not at '{ROOT}' (../shared is "
    f"absent on a user's machine; set ${bench_accuracy.ROOT_ENV})")


def parse(*argv):
    parser = argparse.ArgumentParser()
    bench_accuracy.add_arguments(parser)
    return parser.parse_args(list(argv))


@requires_planetoid
def test_accuracy_bench_on_cora_reaches_parity(capsys):
    # The bench's own schedule (200 epochs), one seed: about 5 s.
    args = parse('--datasets', 'Cora', '--seeds', '1')
    data = bench_accuracy.load_planetoid(args.root, 'Cora')
    summary = bench_accuracy.compare(data, 'Cora', args)
    out = capsys.readouterr().out
    sides = ['fastload', 'pyg'] if WITH_TORCH_SPARSE else ['fastload']
    assert list(summary['runs']) == sides
    for side in sides:
        (result, ) = summary['runs'][side]
        assert set(result) == {'val_acc', 'test_acc', 'seconds'}
        # GCN on Cora: 81.5% published; a wrong batch would fall well short
        assert result['test_acc'] > 77.0
    assert summary['published'] == 81.5 and '81.5%' in out
    if WITH_TORCH_SPARSE:
        # parity with PyG's LightningNodeData on the same schedule
        assert abs(summary['difference']) <= bench_accuracy.TOLERANCE
        assert summary['passed'] is True and 'PASS' in out
    else:
        assert summary['passed'] is None and 'skipped' in out


def test_default_fanouts_make_gcn_batches_exact():
    data = random_graph(num_nodes=100, num_edges=400, num_features=8)
    torch.manual_seed(0)
    model = GCN(8, 16, num_layers=2, out_channels=4).eval()
    full = model(data.x, data.edge_index)
    fanouts = bench_accuracy.default_fanouts('gcn', 2)
    assert fanouts == [-1, -1, -1]
    assert bench_accuracy.default_fanouts('sage', 2) == [-1, -1]
    seeds = torch.arange(0, 100, 7)
    batch = next(iter(FastNeighborLoader(data, fanouts, input_nodes=seeds,
                                         batch_size=seeds.numel())))
    out = model(batch.x, batch.edge_index)[:batch.batch_size]
    assert torch.allclose(out, full[seeds], atol=1e-5)


def test_missing_planetoid_root_names_the_argument(tmp_path):
    with pytest.raises(FileNotFoundError, match="'--root .*Cora/raw"):
        bench_accuracy.load_planetoid(str(tmp_path), 'Cora')
