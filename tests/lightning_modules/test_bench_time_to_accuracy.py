import argparse
import json

import pytest

from pyg_fastload.datasets import PRESETS
from pyg_fastload.lightning.bench import time_to_accuracy as bench

from ..helpers import requires_torch_sparse


def _run(tmp_path, *extra):
    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    return bench.run(parser.parse_args([
        '--preset', 'tiny', '--nodes', '0', '--fanout', '4', '3',
        '--layers', '2', '--hidden', '16', '--batch-size', '64',
        '--batches', '3', '--epochs', '2', '--val-nodes', '100',
        '--cache-dir', str(tmp_path), '--out', str(tmp_path / 'out'),
        *extra]))


def test_time_to_target_is_the_first_epoch_at_the_target():
    assert bench.time_to_target([10.0, 20.0, 30.0], [50.0, 71.0, 70.0],
                                70.0) == 20.0
    assert bench.time_to_target([10.0], [50.0], 70.0) is None


def test_a_shrunk_preset_keeps_its_mean_degree_and_fractions():
    cfg = bench.shrunk('products-like', 200_000)
    full = PRESETS['products-like']
    assert cfg.num_nodes == 200_000
    assert cfg.num_edges / cfg.num_nodes == pytest.approx(
        full.num_edges / full.num_nodes, rel=1e-4)
    assert (cfg.train_fraction, cfg.num_classes, cfg.num_features) == (
        full.train_fraction, full.num_classes, full.num_features)
    assert bench.shrunk('tiny', 0) is PRESETS['tiny']


@requires_torch_sparse
def test_every_side_reports_its_accuracy_time_and_work(tmp_path, capsys):
    summary = _run(tmp_path, '--pyg-workers', '0', '--target', '0')
    out = capsys.readouterr().out
    written = json.loads((tmp_path / 'out' /
                          'time_to_accuracy.json').read_text())
    results = written['results']
    assert set(results) == {'neighbor', 'labor-0', 'labor-1',
                            'graphsaint-rw',
                            'PyG NeighborLoader(num_workers=0)'}
    for result in results.values():
        assert len(result['accuracy']) == len(result['seconds']) == 2
        assert result['steps'] == [3, 6]  # after each epoch of 3 steps
        assert result['seconds'][0] < result['seconds'][1]
        assert result['batches'] == 6 and result['nodes_per_batch'] > 64
    # a target of 0% is reached after the first epoch by every side
    for side in ('neighbor', 'labor-0', 'labor-1', 'graphsaint-rw'):
        assert summary[f'{side} speedup'] == pytest.approx(
            results['PyG NeighborLoader(num_workers=0)']['seconds'][0] /
            results[side]['seconds'][0])
    assert summary['labor-0 fewer nodes'] == pytest.approx(
        results['neighbor']['nodes_per_batch'] /
        results['labor-0']['nodes_per_batch'])
    assert 'LABOR-0 samples' in out
    assert (tmp_path / 'out' / 'time_to_accuracy.png').stat().st_size > 1000


def test_evaluations_every_few_steps_and_at_the_end(tmp_path):
    _run(tmp_path, '--pyg-workers', '--sides', 'neighbor', '--eval-every',
         '2')
    result = json.loads((tmp_path / 'out' / 'time_to_accuracy.json')
                        .read_text())['results']['neighbor']
    # steps 2, 4, 6 of two epochs of 3 (6 is also the end)
    assert result['steps'] == [2, 4, 6]
    assert len(result['accuracy']) == len(result['seconds']) == 3
    assert result['seconds'] == sorted(result['seconds'])


def test_a_heterogeneous_graph_skips_the_homogeneous_samplers(tmp_path,
                                                               capsys):
    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    bench.run(parser.parse_args([
        '--preset', 'mag-like', '--scale', '0.002', '--fanout', '4', '3',
        '--layers', '2', '--hidden', '16', '--batch-size', '64',
        '--batches', '2', '--epochs', '1', '--val-nodes', '50',
        '--pyg-workers', '--sides', 'labor-0', 'graphsaint-rw',
        '--cache-dir', str(tmp_path), '--out', str(tmp_path / 'out')]))
    assert 'graphsaint-rw skipped: it samples homogeneous graphs only' in \
        capsys.readouterr().out
    results = json.loads((tmp_path / 'out' / 'time_to_accuracy.json')
                         .read_text())['results']
    assert set(results) == {'labor-0'}
    assert results['labor-0']['batches'] == 2
