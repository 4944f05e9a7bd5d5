r"""The release artifacts. ``python -m build`` makes an sdist and a wheel
(the wheel built from the sdist, as a release builds it) that ``twine
check`` passes; the wheel holds the package's modules and its metadata
only: no tests, data, caches, logs or other files a development checkout
holds, even when the checkout it is built from has them. Installed (not
editable) in a fresh virtual environment, the wheel runs ``pyg-fastload
--help`` and a few steps of the quickstart by its name (``-c quickstart``,
the config shipped in the wheel) from a folder outside the checkout, and
the package imported there is the installed one. The version is written once
(``pyg_fastload.__version__``) and read everywhere else.

The tests marked ``release`` build once, install and train (about a
minute on 2 cores): they run in CI (``.ci/run`` sets
``PYG_FASTLOAD_RELEASE_TESTS=1``) or with ``python -m pytest -m release``,
and the README's ``python -m pytest -q`` skips them, saying so. No
network is needed: the build uses the installed setuptools
(``--no-isolation``) and the virtual environment sees this one's packages.
"""
import ast
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: What a checkout holds that the build may read (each copied as it is in
#: this checkout, caches included, if it exists).
CHECKOUT = ('pyproject.toml', 'README.md', 'CHANGELOG.md', 'MANIFEST.in',
            'LICENSE', 'pyg_fastload', 'lightning_modules', 'configs', 'docs',
            'tests', 'scripts')

#: Files a development machine leaves in a checkout: none may be packed.
LEFTOVERS = (
    'pyg_fastload/__pycache__/stray.cpython-311.pyc',
    'lightning_modules/__pycache__/stray.cpython-311.pyc',
    'pyg_fastload/loader/debug.log',
    'pyg_fastload/datasets/cached.npy',
    'lightning_modules/events.out.tfevents.1',
    'data/tiny/x.npy',
    'logs/quickstart/version_0/metrics.csv',
    'lightning_logs/version_0/checkpoints/epoch=0.ckpt',
    'bench_out/loader.json',
    'build/lib/pyg_fastload/stale.py',
    '.pytest_cache/v/cache/lastfailed',
    '.hypothesis/examples/x',
    '.gpu_wheels/pymetis-0.0-cp312-manylinux.whl',
    'fastload_stats.json',
)

#: Parts of a packed name that mark a file no artifact may hold.
FORBIDDEN = re.compile(
    r'(^|/)(__pycache__|\.pytest_cache|\.hypothesis|\.gpu_wheels|\.git|'
    r'\.venv|build|dist|data|logs|lightning_logs|bench_out|tests)/|'
    r'\.(pyc|pyo|log|npy|npz|pt|ckpt|whl|bin)$|tfevents|fastload_stats')

release = pytest.mark.release


def _version() -> str:
    r"""``__version__`` as ``pyg_fastload/__init__.py`` writes it (read as
    setuptools reads it, without importing)."""
    tree = ast.parse((ROOT / 'pyg_fastload' / '__init__.py').read_text())
    [value] = [node.value.value for node in tree.body
               if isinstance(node, ast.Assign)
               and [t.id for t in node.targets
                    if isinstance(t, ast.Name)] == ['__version__']]
    return value


def _run(command, timeout, **kwargs):
    done = subprocess.run([str(c) for c in command], capture_output=True,
                          text=True, timeout=timeout, **kwargs)
    assert done.returncode == 0, (command, done.stdout[-3000:],
                                  done.stderr[-3000:])
    return done


def test_the_version_is_written_once():
    version = _version()
    assert re.fullmatch(r'\d+\.\d+\.\d+((a|b|rc)\d+)?(\.dev\d+)?', version)
    import pyg_fastload
    assert pyg_fastload.__version__ == version
    pyproject = (ROOT / 'pyproject.toml').read_text()
    assert 'dynamic = ["version"]' in pyproject
    assert re.search(r'^version = \{ attr = "pyg_fastload.__version__" \}',
                     pyproject, re.M)
    assert not re.search(r'^version = "', pyproject, re.M)
    # Keep a Changelog: the latest release heads the file, after Unreleased
    changelog = (ROOT / 'CHANGELOG.md').read_text()
    releases = re.findall(r'^## \[([^\]]+)\]', changelog, re.M)
    assert releases[0] == 'Unreleased' and releases[1] == version


def test_the_command_prints_the_version(capsys):
    from pyg_fastload.lightning.command import main
    with pytest.raises(SystemExit) as info:
        main(['--version'])
    assert info.value.code == 0
    assert capsys.readouterr().out.strip() == f'pyg-fastload {_version()}'


@pytest.fixture(scope='module')
def artifacts(tmp_path_factory):
    r"""``(sdist, wheel)`` built by ``python -m build`` from a copy of this
    checkout with a development machine's leftovers added."""
    for module in ('build', 'twine'):  # the [test] extra installs both
        assert importlib.util.find_spec(module), (
            f'{module} is missing: pip install -e ".[test]"')
    source = tmp_path_factory.mktemp('checkout')
    for name in CHECKOUT:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name, symlinks=True)
        elif (ROOT / name).exists():
            shutil.copy2(ROOT / name, source / name)
    for name in LEFTOVERS:
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        (source / name).write_text('left behind\n')
    dist = tmp_path_factory.mktemp('dist')
    _run([sys.executable, '-m', 'build', '--no-isolation', '--outdir', dist,
          source], timeout=300)
    [sdist] = dist.glob('*.tar.gz')
    [wheel] = dist.glob('*.whl')
    return sdist, wheel


@release
def test_twine_check_passes(artifacts):
    done = _run([sys.executable, '-m', 'twine', 'check', '--strict',
                 *artifacts], timeout=120)
    assert done.stdout.count('PASSED') == 2, done.stdout


@release
def test_the_wheel_holds_the_modules_and_nothing_else(artifacts):
    _, wheel = artifacts
    version = _version()
    assert wheel.name == f'pyg_fastload-{version}-py3-none-any.whl'
    names = zipfile.ZipFile(wheel).namelist()
    info = f'pyg_fastload-{version}.dist-info/'
    metadata = {n[len(info):] for n in names
                if not n.startswith('pyg_fastload/')}
    assert {'METADATA', 'WHEEL', 'entry_points.txt', 'RECORD'} <= \
        metadata <= {'METADATA', 'WHEEL', 'entry_points.txt', 'RECORD',
                     'top_level.txt'}, metadata
    assert all(n.startswith((info, 'pyg_fastload/')) for n in names)
    assert [n for n in names if FORBIDDEN.search(n)] == []
    # every module of the library and the application, and only modules
    expected = {'pyg_fastload/' + str(p.relative_to(ROOT / 'pyg_fastload'))
                for p in (ROOT / 'pyg_fastload').rglob('*.py')}
    expected |= {'pyg_fastload/lightning/' + str(
        p.relative_to(ROOT / 'lightning_modules'))
        for p in (ROOT / 'lightning_modules').rglob('*.py')}
    # and the configs, by name (`pyg-fastload fit -c quickstart`)
    expected |= {f'pyg_fastload/lightning/configs/{p.name}'
                 for p in (ROOT / 'configs').glob('*.yaml')}
    assert {n for n in names if n.startswith('pyg_fastload/')} == expected
    archive = zipfile.ZipFile(wheel)
    metadata = archive.read(info + 'METADATA').decode()
    assert f'\nVersion: {version}\n' in metadata
    assert 'Description-Content-Type: text/markdown' in metadata
    assert 'pyg-fastload = pyg_fastload.lightning.command:main' in \
        archive.read(info + 'entry_points.txt').decode()


@release
def test_the_sdist_holds_the_sources_configs_and_docs(artifacts):
    sdist, _ = artifacts
    top = f'pyg_fastload-{_version()}/'
    with tarfile.open(sdist) as archive:
        names = [n for n in archive.getnames() if n != top.rstrip('/')]
    assert all(n.startswith(top) for n in names)
    names = {n[len(top):] for n in names}
    for name in ('PKG-INFO', 'pyproject.toml', 'README.md', 'CHANGELOG.md',
                 'pyg_fastload/__init__.py', 'lightning_modules/command.py',
                 'configs/quickstart.yaml', 'configs/README.md',
                 'docs/guide/loader.md'):
        assert name in names, name
    assert [n for n in names if FORBIDDEN.search(n)] == []


def _environment(where: Path) -> Path:
    r"""A fresh virtual environment at :obj:`where` that sees this one's
    packages (its site-packages as a plain path: the ``.pth`` files there,
    an editable install of this checkout among them, are not run); its
    Python."""
    _run([sys.executable, '-m', 'venv', '--system-site-packages', where],
         timeout=180)
    python = where / 'bin' / 'python'
    site = _run([python, '-c', "import sysconfig; "
                 "print(sysconfig.get_paths()['purelib'])"],
                timeout=60).stdout.strip()
    outer = dict.fromkeys(sysconfig.get_paths()[k]
                          for k in ('purelib', 'platlib'))
    (Path(site) / '_outer_environment.pth').write_text(
        ''.join(f'{path}\n' for path in outer))
    return python


@release
def test_the_installed_wheel_runs_outside_the_checkout(artifacts,
                                                       tmp_path):
    _, wheel = artifacts
    python = _environment(tmp_path / 'venv')
    _run([python, '-m', 'pip', 'install', '--no-deps', '--no-index',
          '--no-cache-dir', '--disable-pip-version-check', wheel],
         timeout=180)
    elsewhere = tmp_path / 'elsewhere'
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items()
           if k not in ('PYTHONPATH', 'PYTHONHOME', 'PYTHONSTARTUP')}
    env['PYG_FASTLOAD_CACHE'] = str(elsewhere / 'cache')
    run = dict(cwd=elsewhere, env=env)

    # the installed package is the one imported, not this checkout
    found = json.loads(_run([python, '-c', '''
import importlib.metadata as metadata, json
import pyg_fastload, pyg_fastload.lightning.command as command
dist = metadata.distribution('pyg-fastload')
print(json.dumps({'library': pyg_fastload.__file__,
                  'command': command.__file__,
                  'version': pyg_fastload.__version__,
                  'metadata': dist.version,
                  'direct_url': dist.read_text('direct_url.json')}))
'''], timeout=120, **run).stdout)
    venv = (tmp_path / 'venv').resolve()
    for key in ('library', 'command'):
        path = Path(found[key]).resolve()
        assert venv in path.parents and ROOT not in path.parents, found
    assert found['version'] == found['metadata'] == _version()
    direct = json.loads(found['direct_url'])  # installed from the file
    assert direct['url'].endswith(wheel.name) and 'dir_info' not in direct

    command = tmp_path / 'venv' / 'bin' / 'pyg-fastload'
    shebang = command.read_text().splitlines()[0]
    assert Path(shebang[2:]).parent.resolve() == venv / 'bin', shebang
    version = _run([command, '--version'], timeout=120, **run).stdout
    assert version.strip() == f'pyg-fastload {_version()}'
    usage = _run([command, '--help'], timeout=120, **run).stdout
    for name in ('fit', 'validate', 'test', 'predict', 'bench', 'prepare',
                 'partition', 'report'):
        assert name in usage
    # the quickstart by its name, from the config in the wheel, a few steps
    done = _run([command, 'fit', '-c', 'quickstart',
                 '--trainer.max_steps', '3', '--trainer.val_check_interval',
                 '3', '--trainer.limit_val_batches', '1',
                 '--trainer.num_sanity_val_steps', '0',
                 '--trainer.accelerator', 'cpu', '--data.progress', 'false',
                 '--trainer.enable_progress_bar', 'false'],
                timeout=600, **run)
    print(done.stdout[-3000:])  # the closing note of the run (pytest -s)
    assert 'validation accuracy:' in done.stdout
    assert list((elsewhere / 'logs' / 'quickstart').rglob('*.ckpt'))
    assert list((elsewhere / 'logs' / 'quickstart').rglob(
        'fastload_stats.json'))
