import argparse
import multiprocessing

import pytest
import torch

from pyg_fastload.bench import loader as bench_loader

from ..distributed.ranks import run_command
from ..helpers import requires_torch_sparse

FAST = 'FastNeighborLoader'


def run_cli(*args):
    return run_command(args)


def run(tmp_path, *extra):
    parser = argparse.ArgumentParser()
    bench_loader.add_arguments(parser)
    args = parser.parse_args([
        '--preset', 'tiny', '--batches', '3', '--warmup', '2', '--rounds',
        '1', '--batch-size', '64', '--cache-dir', str(tmp_path), *extra])
    return bench_loader.run(args)


def test_bench_loader_command_runs_without_baseline(tmp_path):
    proc = run_cli('bench', 'loader', '--preset', 'tiny', '--batches', '2',
                   '--rounds', '1', '--batch-size', '64', '--cache-dir',
                   str(tmp_path), '--pyg-workers')
    assert proc.returncode == 0, proc.stderr
    assert 'steady state: 2 batches after 5 untimed' in proc.stdout
    assert 'gather bandwidth' in proc.stdout
    assert "GiB (what 'sampling_device' copies to a GPU)" in proc.stdout
    assert 'placing rows: scatter (index_copy_) takes' in proc.stdout


@requires_torch_sparse
def test_steady_state_ratio_and_start_up_apart(tmp_path, capsys):
    result = run(tmp_path, '--pyg-workers', '0', '1')
    out = capsys.readouterr().out
    assert 'start-up (time to the first batch' in out
    best = min((k for k in result if k.startswith('PyG') and
                k.endswith('s/batch')), key=result.get)
    # the headline is the ratio of the steady-state times per batch
    assert result['speedup'] == pytest.approx(
        result[best] / result[f'{FAST} s/batch'])
    assert f'{FAST} startup_s' in result
    assert 'PyG NeighborLoader(num_workers=1) startup_s' in result
    # PyG's worker processes were shut down, not left to steal the cores
    assert multiprocessing.active_children() == []


def test_too_few_seeds_name_the_arguments(tmp_path):
    with pytest.raises(ValueError, match="'--warmup 5 --batches 100'"):
        run(tmp_path, '--warmup', '5', '--batches', '100', '--pyg-workers')


def test_bench_rejects_unknown_preset(tmp_path):
    proc = run_cli('bench', 'loader', '--preset', 'nope')
    assert proc.returncode != 0 and 'nope' in proc.stderr


@requires_torch_sparse
def test_a_hetero_preset_compares_the_loaders_on_hetero_data(tmp_path,
                                                             capsys):
    result = run(tmp_path, '--preset', 'hetero-tiny', '--batch-size', '32',
                 '--warmup', '1', '--fanout', '4', '3', '--pyg-workers', '0')
    out = capsys.readouterr().out
    assert 'graph: 742 nodes of 4 types, 7,800 edges of 8 relations' in out
    for name in ('FastNeighborLoader ', 'FastNeighborLoader(pipeline=False)',
                 'PyG NeighborLoader(num_workers=0)'):
        assert name in out
    # the headline is the ratio of the steady-state times per batch
    pyg = 'PyG NeighborLoader(num_workers=0)'
    assert result['speedup'] == pytest.approx(
        result[f'{pyg} s/batch'] / result[f'{FAST} s/batch'])
    # every relation's sampled edges count: more than the paper seeds'
    [edges] = result[f'{FAST} sampled_edges']
    assert edges > 3 * 32
    assert 'gather bandwidth' not in out  # no breakdown of a HeteroData
    assert multiprocessing.active_children() == []


@requires_torch_sparse
def test_the_link_task_compares_the_link_loaders(tmp_path, capsys):
    result = run(tmp_path, '--task', 'link', '--fanout', '4', '3',
                 '--pyg-workers', '0')
    out = capsys.readouterr().out
    assert 'binary negatives, ratio 1' in out
    for name in ('FastLinkNeighborLoader ',
                 'PyG LinkNeighborLoader(num_workers=0)'):
        assert name in out
    assert set(result) == {'fast_edges_per_s', 'speedup'}
    # a heterogeneous preset: the ('author', 'writes', 'paper') relation
    result = run(tmp_path, '--task', 'link', '--preset', 'hetero-tiny',
                 '--fanout', '3', '2', '--pyg-workers', '0',
                 '--sampling-workers', '2')
    out = capsys.readouterr().out
    assert "label edges: ('author', 'writes', 'paper')" in out
    assert 'FastLinkNeighborLoader(sampling_workers=2) / best PyG' in out
    assert set(result) == {'fast_edges_per_s', 'speedup', 'pool_speedup'}


def test_the_temporal_task_reports_temporal_beside_untimed(tmp_path, capsys):
    result = run(tmp_path, '--task', 'temporal', '--fanout', '4', '3')
    out = capsys.readouterr().out
    assert 'PyG baseline: none' in out
    for name in ('no times, disjoint', "temporal 'uniform' (disjoint)",
                 "temporal 'last' (disjoint)"):
        assert name in out
    assert result['temporal_ratio'] == pytest.approx(
        result["seeds_per_s[temporal 'uniform' (disjoint)]"] /
        result['seeds_per_s[no times, disjoint]'])


def test_the_temporal_task_takes_hetero_presets_and_pyg_lib(
        tmp_path, capsys, monkeypatch):
    r"""On a heterogeneous preset, with a stand-in for pyg-lib's PyG
    loader (PyG samples in time only with pyg-lib, absent here): PyG's
    rows run and the ratios against them are printed."""
    import importlib.util

    from pyg_fastload import FastNeighborLoader
    from pyg_fastload.bench import temporal_loader
    made = []

    def stand_in(*args, **kwargs):
        made.append(kwargs['temporal_strategy'])
        return FastNeighborLoader(*args, pipeline=False, **kwargs)

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, 'find_spec', lambda name, *a: (
        find_spec('torch') if name == 'pyg_lib' else find_spec(name, *a)))
    monkeypatch.setattr(temporal_loader, 'NeighborLoader', stand_in)
    result = run(tmp_path, '--task', 'temporal', '--preset', 'hetero-tiny',
                 '--fanout', '3', '2', '--batch-size', '16')
    out = capsys.readouterr().out
    assert 'PyG baseline: NeighborLoader with pyg-lib' in out
    assert set(made) == {'uniform', 'last'}
    for name in ("temporal 'uniform' (disjoint)",
                 "temporal 'last' (disjoint)"):
        assert f'PyG {name}' in out
        assert result[f'pyg_lib_ratio[{name}]'] == pytest.approx(
            result[f'seeds_per_s[{name}]'] /
            result[f'seeds_per_s[PyG {name}]'])
        assert f'ratio ours / PyG with pyg-lib, {name}' in out


def test_contention_runs_each_loader_idle_and_beside_busy_processes(
        tmp_path, capsys, monkeypatch):
    from pyg_fastload.bench import contention
    started = []
    spawn = contention._busy

    def busy(count):  # the busy processes run while the loaders are timed
        processes = spawn(count)
        started.append(processes)
        return processes
    monkeypatch.setattr(contention, '_busy', busy)
    result = run(tmp_path, '--contention', '2', '--pyg-workers')
    out = capsys.readouterr().out
    assert [len(p) for p in started] == [2]  # one loaded round
    assert all(p.poll() is not None for p in started[0])  # and stopped
    expected = result[f'{FAST} loaded s/batch'] / result[
        f'{FAST} slowdown']  # the idle time, as printed
    row = next(line for line in out.splitlines()
               if line.startswith(FAST))
    assert float(row.split()[1]) == pytest.approx(expected, rel=0.01)
    assert '2 busy process(es)' in out
    with pytest.raises(ValueError, match="'--contention' takes the node"):
        run(tmp_path, '--contention', '1', '--task', 'link')
    with pytest.raises(ValueError, match="'--contention -1' must be 1"):
        run(tmp_path, '--contention', '-1')


@requires_torch_sparse
def test_the_sampling_pool_is_timed_beside_the_others(tmp_path, capsys):
    result = run(tmp_path, '--pyg-workers', '0', '--sampling-workers', '2')
    out = capsys.readouterr().out
    pooled = f'{FAST}(sampling_workers=2) s/batch'
    assert 'PyG NeighborLoader samples with torch_sparse' in out
    assert result['pool_speedup'] == pytest.approx(
        result['PyG NeighborLoader(num_workers=0) s/batch'] / result[pooled])


def test_sampling_on_a_named_device_is_timed_beside(tmp_path, capsys,
                                                    monkeypatch):
    built = []

    class Recorded(bench_loader.FastNeighborSampler):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            built.append((kwargs.get('device'), self))
            self.calls = 0

        def sample(self, *args, **kwargs):
            self.calls += 1
            return super().sample(*args, **kwargs)
    monkeypatch.setattr(bench_loader, 'FastNeighborSampler', Recorded)
    result = run(tmp_path, '--pyg-workers', '--sampling-device', 'cpu')
    assert 'FastNeighborSampler.sample on cpu' in capsys.readouterr().out
    # a sampler of its own, built for the named device, drew every batch
    # (3 timed + 2 warm-up, of 64 seeds) after one untimed warm-up batch
    [(device, sampler)] = [(d, s) for d, s in built if d is not None]
    assert device == torch.device('cpu') and sampler.device == device
    assert sampler.calls == 1 + 5
    assert result['device_sampling_speedup'] == pytest.approx(
        result['fast_sample_s_per_batch']
        / result['device_sample_s_per_batch'])
    # sampled edges per second (SEPS): the same seeds and fan-outs give
    # about the same edges per batch on both samplers, more than one per seed
    per_batch = [result[f'{side}_sampled_edges_per_s']
                 * result[f'{key}_s_per_batch'] for side, key in
                 (('cpu', 'fast_sample'), ('device', 'device_sample'))]
    assert per_batch[0] == pytest.approx(per_batch[1], rel=0.2)
    assert per_batch[0] > 64
    for extra, match in ((('--sampling-device', 'meta'),
                          "'--sampling-device=meta' is not supported"),
                         (('--sampling-device', 'cpu', '--task', 'link'),
                          'on a homogeneous preset')):
        with pytest.raises(ValueError, match=match):
            run(tmp_path, '--pyg-workers', *extra)
    assert 'FastNeighborLoader' not in capsys.readouterr().out  # at once
