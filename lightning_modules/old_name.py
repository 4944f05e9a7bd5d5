r"""The application's old import name, ``lightning_modules`` (its source
folder in the repository), kept working with a ``DeprecationWarning``:
``lightning_modules.X`` is ``pyg_fastload.lightning.X`` (the same module
objects), unless a ``lightning_modules`` of the user's own comes first on
``sys.path``, which is then left alone."""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from pathlib import Path
from types import ModuleType
from typing import Optional, Sequence

__all__ = ['OLD', 'NEW', 'install']

OLD = 'lightning_modules'
NEW = 'pyg_fastload.lightning'
_SOURCE = Path(__file__).resolve().parent


class _Alias(importlib.abc.Loader):
    r"""Loads ``lightning_modules.X`` as the module
    ``pyg_fastload.lightning.X`` already is (or becomes)."""
    def __init__(self, target: str):
        self.target = target

    def create_module(self, spec: importlib.machinery.ModuleSpec
                      ) -> ModuleType:
        return importlib.import_module(self.target)

    def exec_module(self, module: ModuleType) -> None:
        pass  # executed under its new name


class _OldNameFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Optional[Sequence[str]] = None,
                  target: Optional[ModuleType] = None
                  ) -> Optional[importlib.machinery.ModuleSpec]:
        if fullname == OLD:
            found = importlib.machinery.PathFinder.find_spec(OLD)
            if found is not None and found.origin is not None and \
                    Path(found.origin).resolve().parent != _SOURCE:
                return None  # the user's own lightning_modules
            warnings.warn(f"'{OLD}' was renamed: import '{NEW}'",
                          DeprecationWarning, stacklevel=2)
        elif fullname.startswith(OLD + '.'):
            if sys.modules.get(OLD) is not sys.modules.get(NEW):
                return None  # a submodule of the user's own
        else:
            return None
        new = NEW + fullname[len(OLD):]
        return importlib.machinery.ModuleSpec(fullname, _Alias(new))


def install() -> None:
    r"""Lets ``import lightning_modules...`` reach this package (once)."""
    if not any(isinstance(f, _OldNameFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _OldNameFinder())
