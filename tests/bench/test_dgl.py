import argparse
import json
import sys

from pyg_fastload.bench import dgl

STAND_IN = r'''
import argparse, json, os, numpy as np
p = argparse.ArgumentParser()
p.add_argument('--graph'); p.add_argument('--fanout', nargs='+')
p.add_argument('--batch-size'); p.add_argument('--batches')
p.add_argument('--warmup'); p.add_argument('--rounds')
p.add_argument('--num-workers', nargs='+')
a = p.parse_args()
n = np.load(os.path.join(a.graph, 'indptr.npy')).size - 1
seeds = np.load(os.path.join(a.graph, 'seeds.npy'), allow_pickle=False)
x = np.load(os.path.join(a.graph, 'x.npy'), allow_pickle=False)
assert x.shape[0] == n and seeds.max() < n
print('noise before the report')
print(json.dumps({'dgl': 'stand-in', 'torch': 'x', 'batches_per_s':
                  {w: 1000.0 * (1 + int(w)) for w in a.num_workers}}))
'''


def _run(tmp_path, monkeypatch, *extra):
    parser = argparse.ArgumentParser()
    dgl.add_arguments(parser)
    return dgl.run(parser.parse_args([
        '--preset', 'tiny', '--batches', '2', '--warmup', '1', '--rounds',
        '1', '--batch-size', '16', '--fanout', '3', '2', '--cache-dir',
        str(tmp_path / 'cache'), *extra]))


def test_the_dgl_side_runs_in_its_own_python(tmp_path, monkeypatch, capsys):
    script = tmp_path / 'stand_in.py'
    script.write_text(STAND_IN)
    monkeypatch.setattr(dgl, 'DGL_SIDE', str(script))
    out = _run(tmp_path, monkeypatch, '--dgl-python', sys.executable,
               '--dgl-workers', '0', '2')
    text = capsys.readouterr().out
    rates = out['batches_per_s']
    best = 'DGL stand-in (torch x), num_workers=2'
    assert rates[best] == 3000.0
    assert out['FastNeighborLoader / DGL'] == \
        rates['FastNeighborLoader'] / 3000.0
    assert f'best DGL ({best})' in text and 'target >= 2.5x' in text
    assert '2.5x the best DGL setting is 0.1 ms per batch' in text


def test_without_dgl_only_our_side_runs(tmp_path, monkeypatch, capsys):
    out = _run(tmp_path, monkeypatch)
    assert 'DGL side skipped: no --dgl-python' in capsys.readouterr().out
    assert set(out['batches_per_s']) == {
        'FastNeighborLoader', 'FastNeighborLoader(pipeline=False)',
        'FastNeighborLoader(sampling_workers=2)'}
    # a DGL environment that fails is reported, not raised
    bad = tmp_path / 'bad.py'
    bad.write_text('raise SystemExit("no module named dgl")')
    monkeypatch.setattr(dgl, 'DGL_SIDE', str(bad))
    out = _run(tmp_path, monkeypatch, '--dgl-python', sys.executable)
    assert 'DGL side failed (exit 1): no module named dgl' in \
        capsys.readouterr().out
    assert json.dumps(sorted(out['batches_per_s'])) == json.dumps(sorted([
        'FastNeighborLoader', 'FastNeighborLoader(pipeline=False)',
        'FastNeighborLoader(sampling_workers=2)']))


def test_our_stage_times_per_batch_are_reported(tmp_path, monkeypatch,
                                                capsys):
    def fake_time_loader(loader, warmup, num_batches):
        # the stage times are the sequential loader's, not the defaults'
        scale = 1.0 if loader.pipeline is False else 7.0
        loader.time_breakdown = {'sampling': 0.03 * scale,
                                 'feature_loading': 0.012 * scale,
                                 'batches': 10}
        return 0.5, 1.0

    monkeypatch.setattr(dgl, 'time_loader', fake_time_loader)
    out = _run(tmp_path, monkeypatch, '--sampling-workers', '1')
    per_batch = out['sequential ms per batch']
    assert per_batch['sampling'] == 3.0
    assert abs(per_batch['feature_loading'] - 1.2) < 1e-9
    assert out['batches_per_s'] == {'FastNeighborLoader': 2.0,
                                    'FastNeighborLoader(pipeline=False)': 2.0}
    assert ('FastNeighborLoader(pipeline=False): sampling 3.0 ms and '
            'feature loading 1.2 ms per batch') in \
        capsys.readouterr().out
