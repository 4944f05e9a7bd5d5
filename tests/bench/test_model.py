import argparse

import pytest

from pyg_fastload.bench import model as bench_model

BASE = 'edge_index (scatter)'


def test_model_bench_compares_layouts_computing_the_same_model(tmp_path,
                                                                capsys):
    parser = argparse.ArgumentParser()
    bench_model.add_arguments(parser)
    args = parser.parse_args([
        '--preset', 'tiny', '--fanout', '4', '2', '--batch-size', '32',
        '--hidden', '8', '--batches', '3', '--cache-dir', str(tmp_path)
    ])
    result = bench_model.run(args)
    out = capsys.readouterr().out
    assert 'EdgeIndex sorted by col' in out
    for name in ('sage', 'gcn', 'gat'):
        layouts = [key.split('/', 1)[1][:-len(' max_diff')]
                   for key in result
                   if key.startswith(f'{name}/') and key.endswith('max_diff')]
        assert BASE in layouts and len(layouts) >= 2
        for layout in layouts:
            # each layout computes the same outputs as the scatter baseline
            assert result[f'{name}/{layout} max_diff'] < 1e-4, layout
            # and its ratio is the baseline's time over its own
            assert result[f'{name}/{layout}'] == pytest.approx(
                result[f'{name}/{BASE} ms'] / result[f'{name}/{layout} ms'])
