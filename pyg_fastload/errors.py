r"""The base class of the errors pyg-fastload raises for bad input, so one
``except FastLoadError`` catches them all."""

__all__ = ['FastLoadError']


class FastLoadError(Exception):
    r"""An error in what the user passed or pointed at (an argument, a file,
    a dataset directory).  Its message names the argument or file, the
    value, and how to fix it."""
