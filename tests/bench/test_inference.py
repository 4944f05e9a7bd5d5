import argparse
import importlib.util

import pytest
import torch

from pyg_fastload.bench import inference

pytestmark = pytest.mark.timeout(300)


def _args(*extra):
    parser = argparse.ArgumentParser()
    inference.add_arguments(parser)
    return parser.parse_args(['--preset', 'tiny', '--batch-size', '256',
                              '--layers', '2', '--fanout', '5', '5',
                              '--hidden', '16', *extra])


def test_the_layerwise_sides_compute_the_same_outputs(tmp_path, capsys):
    has_pyg = any(importlib.util.find_spec(name)
                  for name in ('pyg_lib', 'torch_sparse'))
    result = inference.run(_args('--cache-dir', str(tmp_path)))
    out = capsys.readouterr().out
    assert set(result['seconds']) == (
        {'ours', 'streamed', 'pyg', 'sampled'} if has_pyg else
        {'ours', 'streamed', 'sampled'})
    assert result['streamed_difference'] < 1e-4  # the same rows
    assert set(result['peak_rss_bytes']) == set(result['seconds'])
    assert 'layerwise_inference' in out
    if has_pyg:  # PyG's loop and ours: the same rows of every node
        assert result['max_difference'] < 1e-4
        assert f"{result['ratio']:.2f}x" in out
    else:
        assert "PyG's side skipped" in out


def test_pyg_loop_and_ours_agree_on_a_random_model():
    pytest.importorskip('torch_sparse')
    from torch_geometric.data import Data

    from ..helpers import random_graph
    data = random_graph(num_nodes=120, num_edges=900)
    data = Data(x=data.x, edge_index=data.edge_index,
                y=torch.randint(0, 3, (120, )))
    args = _args()
    model = inference._model(data.num_features, 3, args)
    with torch.no_grad():
        ours = inference.RUNS['ours'](model, data, args)
        pyg = inference._pyg(model, data, args)
        whole = model(data.x, data.edge_index)
    assert torch.allclose(ours, whole, atol=1e-5)
    assert torch.allclose(pyg, whole, atol=1e-5)


def test_fanouts_must_match_the_layers():
    with pytest.raises(ValueError, match="'--fanout' gives 2 fan-outs for 3 "
                       "layers"):
        inference.run(_args('--layers', '3'))


def test_a_dataset_directory_runs_the_layerwise_sides(tiny_dir, tmp_path,
                                                      capsys):
    dataset_dir, _ = tiny_dir
    result = inference.run(_args('--dataset', str(dataset_dir), '--storage',
                                 'mmap', '--memory-budget', '0',
                                 '--work-dir', str(tmp_path / 'work')))
    out = capsys.readouterr().out
    assert set(result['seconds']) == {'ours', 'streamed'}
    assert 'need the graph in memory' in out
    assert result['streamed_difference'] < 1e-4
