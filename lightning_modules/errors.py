r"""Errors that name the configuration key at fault."""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator, Optional

from pyg_fastload.config import SettingError
from pyg_fastload.errors import FastLoadError

__all__ = ['ConfigError', 'config_section']


class ConfigError(FastLoadError, ValueError):
    r"""A bad argument of a Lightning module or data module.

    :attr:`key` is the argument's name (``'feature_cache.host_budget'``)
    and :attr:`section` the config section of the class that raised it
    (``'data'``, ``'model'``), so the CLI names the full config key.

    Args:
        key (str): the argument's name.
        message (str): what is wrong and how to fix it.
        section (str, optional): the config section, if known.
    """
    def __init__(self, key: str, message: str,
                 section: Optional[str] = None):
        super().__init__(f"'{key}': {message}")
        self.key = key
        self.detail = message
        self.section = section

    @property
    def config_key(self) -> str:
        r"""``section.key``, as written in a config file."""
        return f'{self.section}.{self.key}' if self.section else self.key


@contextmanager
def config_section(section: str) -> Iterator[None]:
    r"""Tags every :class:`ConfigError` raised inside with :obj:`section`;
    a library :class:`~pyg_fastload.config.SettingError` becomes one.

    Args:
        section (str): the config section (``'data'``, ``'model'``).

    Example:
        >>> from pyg_fastload.lightning import ConfigError, config_section
        >>> try:
        ...     with config_section('data'):
        ...         raise ConfigError('batch_size', 'must be positive')
        ... except ConfigError as error:
        ...     print(error.config_key)
        data.batch_size
    """
    try:
        yield
    except ConfigError as error:
        if error.section is None:
            error.section = section
        raise
    except SettingError as error:
        raise ConfigError(error.key, error.detail, section) from None
