import subprocess
import sys

from ..conftest import requires_torch_sparse


def run_cli(*args):
    return subprocess.run([sys.executable, '-m', 'lightning_modules', *args],
                          capture_output=True, text=True, timeout=300)


def test_bench_loader_runs_without_baseline(tmp_path):
    proc = run_cli('bench', 'loader', '--preset', 'tiny', '--batches', '2',
                   '--rounds', '1', '--batch-size', '64', '--cache-dir',
                   str(tmp_path), '--pyg-workers')
    assert proc.returncode == 0, proc.stderr
    assert 'FastNeighborLoader' in proc.stdout
    assert 'gather bandwidth' in proc.stdout
    assert 'placing rows: scatter (index_copy_) takes' in proc.stdout


@requires_torch_sparse
def test_bench_loader_reports_ratio(tmp_path):
    proc = run_cli('bench', 'loader', '--preset', 'tiny', '--batches', '2',
                   '--rounds', '1', '--batch-size', '64', '--cache-dir',
                   str(tmp_path), '--pyg-workers', '0')
    assert proc.returncode == 0, proc.stderr
    assert 'ratio FastNeighborLoader / best PyG' in proc.stdout


def test_bench_rejects_unknown_preset(tmp_path):
    proc = run_cli('bench', 'loader', '--preset', 'nope')
    assert proc.returncode != 0 and 'nope' in proc.stderr
