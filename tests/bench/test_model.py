import argparse

from pyg_fastload.bench import model as bench_model


def test_model_bench_compares_layouts(tmp_path, capsys):
    parser = argparse.ArgumentParser()
    bench_model.add_arguments(parser)
    args = parser.parse_args([
        '--preset', 'tiny', '--fanout', '4', '2', '--batch-size', '32',
        '--hidden', '8', '--batches', '2', '--cache-dir', str(tmp_path)
    ])
    result = bench_model.run(args)
    out = capsys.readouterr().out
    assert 'EdgeIndex sorted by col' in out
    for name in ('sage', 'gcn', 'gat'):
        assert result[f'{name}/edge_index (scatter)'] == 1.0
