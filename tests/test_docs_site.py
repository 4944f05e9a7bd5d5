r"""The docs site (``docs/``, Sphinx with MyST and autodoc) builds with
warnings as errors, and its API reference covers every public name."""
import inspect
import re
from pathlib import Path

import pytest

import pyg_fastload
import pyg_fastload.lightning as lightning

from .distributed.ranks import run_command

DOCS = Path(__file__).resolve().parents[1] / 'docs'


@pytest.mark.parametrize('module, page', [(pyg_fastload, 'pyg_fastload.md'),
                                          (lightning, 'lightning.md')])
def test_the_reference_has_every_public_name_with_its_docstring(module,
                                                                page):
    text = (DOCS / 'api' / page).read_text()
    documented = set(re.findall(r'^## `(\w+)`$', text, re.M))
    public = set(module.__all__) - {'__version__'}
    assert documented == public, (public - documented, documented - public)
    for name in public:
        obj = getattr(module, name)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            assert (obj.__doc__ or '').strip(), f'{name} has no docstring'
            assert f'.. autoclass:: {module.__name__}.{name}' in text or \
                f'.. autofunction:: {module.__name__}.{name}' in text or \
                f'The same object as [`pyg_fastload.{name}`]' in text, name


def test_the_site_builds_with_warnings_as_errors(tmp_path):
    done = run_command(['-W', '--keep-going', '-q', '-b', 'html', str(DOCS),
                        str(tmp_path / 'html')], module='sphinx')
    assert done.returncode == 0, done.stderr[-4000:]
    for page in ('index.html', 'api/pyg_fastload.html', 'guide/loader.html',
                 'benchmarks.html', 'reliability.html'):
        assert (tmp_path / 'html' / page).is_file(), page
    api = (tmp_path / 'html' / 'api' / 'pyg_fastload.html').read_text()
    assert 'FastNeighborLoader' in api and 'num_neighbors' in api
