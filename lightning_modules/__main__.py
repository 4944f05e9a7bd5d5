r"""``python -m lightning_modules`` is the ``pyg-fastload`` command."""
from .command import main

main()
