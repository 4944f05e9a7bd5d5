r"""What ``pip install`` puts in place: one top-level package,
``pyg_fastload``, holding the library and the Lightning application
(``pyg_fastload.lightning`` from the ``lightning_modules/`` folder), every
module of both, the configs (``pyg_fastload/lightning/configs/`` from
``configs/``), and the ``pyg-fastload`` command."""
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_wheel_installs_one_top_level_package(tmp_path):
    source = tmp_path / 'source'  # a build leaves build/ behind: not here
    source.mkdir()
    for name in ('pyproject.toml', 'README.md'):
        shutil.copy(ROOT / name, source / name)
    for name in ('pyg_fastload', 'lightning_modules', 'configs'):
        shutil.copytree(ROOT / name, source / name,
                        ignore=shutil.ignore_patterns('__pycache__'))
    done = subprocess.run(
        [sys.executable, '-m', 'pip', 'wheel', '-q', '--no-deps',
         '--no-build-isolation', '-w', str(tmp_path), str(source)],
        capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    [wheel] = tmp_path.glob('*.whl')
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split('/')[0] for n in names if '.dist-info' not in n} == \
        {'pyg_fastload'}
    expected = {str(p.relative_to(ROOT)) for p in
                (ROOT / 'pyg_fastload').rglob('*.py')}
    expected |= {'pyg_fastload/lightning/' + str(p.relative_to(
        ROOT / 'lightning_modules')) for p in
        (ROOT / 'lightning_modules').rglob('*.py')}
    # the configs, found by name (`pyg-fastload fit -c quickstart`)
    expected |= {f'pyg_fastload/lightning/configs/{p.name}'
                 for p in (ROOT / 'configs').glob('*.yaml')}
    assert expected - set(names) == set()  # a new subpackage is listed
    [entry] = [n for n in names if n.endswith('entry_points.txt')]
    text = zipfile.ZipFile(wheel).read(entry).decode()
    assert 'pyg-fastload = pyg_fastload.lightning.command:main' in text
