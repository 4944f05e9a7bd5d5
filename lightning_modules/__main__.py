r"""``python -m lightning_modules`` is the ``pyg-fastload`` command."""
from .command import main

if __name__ == '__main__':
    main()
