r"""Fixtures of the Lightning application's tests."""
from typing import Any, Dict

import pytest

from .runs import fit_tiered_run


@pytest.fixture
def cache_env(tmp_path, monkeypatch):
    r"""A run in :obj:`tmp_path`, presets cached under it."""
    monkeypatch.setenv('PYG_FASTLOAD_CACHE', str(tmp_path / 'cache'))
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture(scope='session')
def tiered_run(tmp_path_factory) -> Dict[str, Any]:
    r"""One tiered fit (:func:`~.runs.fit_tiered_run`) per session, read
    by the callback and report tests."""
    return fit_tiered_run(tmp_path_factory.mktemp('tiered_run'))
