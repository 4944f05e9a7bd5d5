r"""Fixtures of the Lightning application's tests."""
import pytest


@pytest.fixture
def cache_env(tmp_path, monkeypatch):
    r"""A run in :obj:`tmp_path`, presets cached under it."""
    monkeypatch.setenv('PYG_FASTLOAD_CACHE', str(tmp_path / 'cache'))
    monkeypatch.chdir(tmp_path)
    return tmp_path
