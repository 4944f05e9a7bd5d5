import argparse

import pytest
import torch

from pyg_fastload.bench import train as bench_train

from ..helpers import requires_torch_sparse

FAST = 'FastNeighborLoader'


def run(tmp_path, *extra):
    parser = argparse.ArgumentParser()
    bench_train.add_arguments(parser)
    args = parser.parse_args([
        '--preset', 'tiny', '--fanout', '4', '2', '--batch-size', '32',
        '--hidden', '16', '--batches', '3', '--cache-dir', str(tmp_path),
        *extra
    ])
    return bench_train.run(args)


def test_every_fast_loader_trains_the_same_model(tmp_path, capsys):
    result = run(tmp_path, '--pyg-workers', '--disk', '--trim')
    out = capsys.readouterr().out
    assert 'pipelined / sequential' in out and 'hidden' in out
    # Pipelined or not, features in memory or on disk, trimmed or not: the
    # same batches and the same seed outputs, so the same losses.
    reference = result[f'{FAST} loss']
    for name in (f'{FAST}(pipeline=False)', f'{FAST} + trim_to_layer',
                 f'{FAST}, features on disk'):
        assert result[f'{name} loss'] == pytest.approx(reference, rel=1e-5)
    assert 'speedup' not in result  # no PyG row, no ratio to it
    # the hot rows in the host buffer served some of the rows on disk
    disk = f'{FAST}, features on disk'
    assert 0 < result[f'{disk} host_hit_ratio'] <= 1
    assert 0 <= result[f'{disk} device_hit_ratio'] <= 1
    assert 0 <= result[f'{disk} hidden'] <= 1


@requires_torch_sparse
def test_train_bench_reports_ratio_to_pyg(tmp_path, capsys):
    result = run(tmp_path, '--pyg-workers', '0')
    assert 'best PyG' in capsys.readouterr().out
    pyg = result['PyG NeighborLoader(num_workers=0) loss']
    # the same model on other samples of the same graph: a comparable loss
    assert pyg == pytest.approx(result[f'{FAST} loss'], rel=0.2)
    assert set(result) >= {'speedup', 'pipelined_vs_sequential'}


def test_sampling_device_row_trains_on_the_same_batches(tmp_path, capsys):
    result = run(tmp_path, '--pyg-workers', '--device', 'cpu',
                 '--sampling-device', 'cpu')
    out = capsys.readouterr().out
    assert 'device=cpu sampling_device=cpu' in out
    assert "the model waited for data" in out
    # Sampled on the CPU named explicitly: the default loader's batches.
    assert result[f'{FAST}, sampled on cpu loss'] == pytest.approx(
        result[f'{FAST} loss'], rel=1e-5)
    assert set(result) >= {f'{FAST}, sampled on cpu waiting_share',
                           f'{FAST}(pipeline=False) waiting_share'}


def test_waiting_is_the_time_spent_getting_batches():
    import time

    from torch_geometric.data import Data

    class SlowBatches:
        r"""Three batches, each 50 ms late."""
        def __init__(self):
            self.left = 3

        def __iter__(self):
            return self

        def __next__(self):
            if not self.left:
                raise StopIteration
            self.left -= 1
            time.sleep(0.05)
            return Data(x=torch.randn(4, 3), edge_index=torch.tensor(
                [[0, 1], [1, 2]]), y=torch.tensor([0, 1, 0, 1]),
                batch_size=2)
    model = torch.nn.Module()
    model.lin = torch.nn.Linear(3, 2)
    model.forward = lambda x, edge_index: model.lin(x)
    seconds, _, waiting = bench_train._train(
        model, SlowBatches(), 5, torch.device('cpu'))
    assert 3 * 0.05 <= waiting <= seconds  # the sleeps, within the loop


@pytest.mark.parametrize('extra, match', [
    (('--sampling-device', 'cuda', '--device', 'cpu'),
     "--sampling-device cuda' returns batches there"),
    (('--device', 'meta'), "'--device=meta' is not supported"),
])
def test_bad_devices_are_named(tmp_path, extra, match):
    with pytest.raises(ValueError, match=match):
        run(tmp_path, '--pyg-workers', *extra)
