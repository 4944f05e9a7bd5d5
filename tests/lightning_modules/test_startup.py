r"""The ``pyg-fastload`` command starts fast: its help imports no torch, a
command imports its own module only, and the packages' exports import on
first use. Each check runs in a fresh interpreter (``sys.modules`` there)."""
import json
import subprocess
import sys
import tempfile

BENCHMARKS = ['loader', 'cache', 'direct', 'dgl', 'sampling', 'rows',
              'accumulator', 'train', 'model', 'partition', 'fit', 'dist',
              'accuracy', 'hetero-accuracy', 'link-accuracy']

RUN = '''
import contextlib, io, json, sys
import pyg_fastload.lightning.command as command
out = io.StringIO()
with contextlib.redirect_stdout(out):
    try:
        command.main({argv!r})
    except SystemExit as stop:
        code = stop.code
print(json.dumps({{'code': code, 'out': out.getvalue(),
                  'modules': sorted(sys.modules)}}))
'''


def _python(code: str) -> str:
    done = subprocess.run([sys.executable, '-c', code], capture_output=True,
                          text=True, timeout=120, cwd=tempfile.gettempdir())
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def _command(*argv: str) -> dict:
    return json.loads(_python(RUN.format(argv=list(argv))))


def test_help_imports_no_torch():
    run = _command('--help')
    assert run['code'] == 0
    for name in ('fit', 'validate', 'test', 'predict', 'bench', 'prepare',
                 'partition', 'report'):
        assert name in run['out']
    assert 'torch' not in run['modules']


def test_bench_help_lists_every_benchmark_without_torch():
    run = _command('bench', '--help')
    assert run['code'] == 0
    for name in BENCHMARKS:
        assert name in run['out']
    assert 'torch' not in run['modules']


def test_a_command_imports_its_own_module_only():
    run = _command('bench', 'loader', '--help')
    assert run['code'] == 0 and '--batch-size' in run['out']
    assert 'pyg_fastload.bench.loader' in run['modules']
    assert 'pyg_fastload.bench.cache' not in run['modules']
    assert 'pytorch_lightning' not in run['modules']


def test_the_packages_export_on_first_use():
    code = '''
import sys
import pyg_fastload, pyg_fastload.lightning as app
print('torch' in sys.modules)
for package in (pyg_fastload, app):
    print(set(package.__all__) <= set(dir(package)))
from pyg_fastload.lightning import FastLoadDataModule
from pyg_fastload.lightning.datamodule import FastLoadDataModule as defined
from pyg_fastload.loader import FastNeighborLoader
print(FastLoadDataModule is defined,
      pyg_fastload.FastNeighborLoader is FastNeighborLoader,
      all(getattr(p, n) is not None for p in (pyg_fastload, app)
          for n in p.__all__),
      hasattr(pyg_fastload, 'nothing'),
      pyg_fastload.storage is sys.modules['pyg_fastload.storage'])
'''
    assert _python(code).split() == ['False', 'True', 'True', 'True', 'True',
                                     'True', 'False', 'True']
