r"""The base class of the errors pyg-fastload raises for bad input, so one
``except FastLoadError`` catches them all, and how a command ends on one
(:class:`UsageExit`)."""
__all__ = ['FastLoadError', 'USAGE_EXIT', 'UsageExit']

#: The exit status of a command given a bad argument or input (argparse's).
USAGE_EXIT = 2


class UsageExit(SystemExit):
    r"""The end of ``pyg-fastload COMMAND`` given a bad argument or input:
    one line naming the command. Raised inside Python, its ``code`` is the
    line (callers and tests read it); the ``pyg-fastload`` command prints
    it and exits with status :data:`USAGE_EXIT`.

    Args:
        command (str): the subcommand (``'prepare'``, ...).
        message (str): what was wrong and how to fix it.
    """
    def __init__(self, command: str, message: str):
        super().__init__(f'pyg-fastload {command}: error: {message}')


class FastLoadError(Exception):
    r"""An error in what the user passed or pointed at (an argument, a file,
    a dataset directory).  Its message names the argument or file, the
    value, and how to fix it."""
