r"""The names of the dataset directory format and its error."""
from __future__ import annotations

from ..errors import FastLoadError

__all__ = ['FORMAT_NAME', 'FORMAT_VERSION', 'DatasetFormatError']

#: The value of ``meta.json``'s ``"format"`` key.
FORMAT_NAME = 'pyg-fastload-dataset'
#: Bumped whenever the layout changes incompatibly.
FORMAT_VERSION = 1


class DatasetFormatError(FastLoadError, ValueError):
    r"""A dataset directory (or an input file of a converter) is missing,
    truncated, corrupted or inconsistent.  The message names the file, says
    what is wrong and how to fix it."""
