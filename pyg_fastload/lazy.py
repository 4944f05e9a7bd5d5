r"""Lazy exports of a package (PEP 562): its names import on first use, so
the ``pyg-fastload`` command starts without torch."""
from __future__ import annotations

import importlib
import sys
from typing import Any, Callable, Dict, List, Sequence, Tuple

__all__ = ['lazy_exports']


def lazy_exports(package: str, exports: Dict[str, str],
                 subpackages: Sequence[str] = ()
                 ) -> Tuple[Callable[[str], Any], Callable[[], List[str]]]:
    r"""``(__getattr__, __dir__)`` for :obj:`package`: each name of
    :obj:`exports` comes from its (relative) module when first asked for,
    and each of :obj:`subpackages` is imported as an attribute.

    Example:
        >>> __getattr__, __dir__ = lazy_exports(
        ...     __name__, {'FastNeighborLoader': '.loader'})
    """
    def __getattr__(name: str) -> Any:
        if name in subpackages:
            return importlib.import_module(f'.{name}', package)
        if name not in exports:
            raise AttributeError(f'module {package!r} has no attribute '
                                 f'{name!r}')
        value = getattr(importlib.import_module(exports[name], package), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> List[str]:
        module = sys.modules[package]
        return sorted(set(vars(module)) | set(getattr(module, '__all__', ())))

    return __getattr__, __dir__
