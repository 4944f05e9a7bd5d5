r"""``python -m pyg_fastload`` is the ``pyg-fastload`` command, so torchrun
can start it (``torchrun ... -m pyg_fastload fit -c CONFIG``)."""
from pyg_fastload.lightning.command import main

if __name__ == '__main__':
    main()
