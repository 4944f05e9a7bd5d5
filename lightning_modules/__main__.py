r"""``python -m pyg_fastload.lightning`` is the ``pyg-fastload`` command."""
from .command import main

if __name__ == '__main__':
    main()
