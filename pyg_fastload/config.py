r"""Settings validated once and passed as one object: fan-outs, memory
budgets, the cache settings and the pipeline settings."""
from __future__ import annotations

import re
from typing import Any, List, Optional, Sequence, Union

from .errors import HETERO_UNSUPPORTED

__all__ = ['check_fanouts', 'Budget', 'budget_rows', 'available_memory',
           'format_bytes']


Budget = Optional[Union[int, float, str]]

_UNITS = {'': 1, 'b': 1, 'kb': 10**3, 'mb': 10**6, 'gb': 10**9, 'tb': 10**12,
          'kib': 2**10, 'mib': 2**20, 'gib': 2**30, 'tib': 2**40}


def budget_rows(budget: Budget, num_rows: int, row_bytes: int,
                name: str) -> int:
    r"""How many rows of :obj:`row_bytes` bytes fit in :obj:`budget`.

    Args:
        budget: :obj:`None` or ``0`` (no rows), an ``int`` number of bytes, a
            ``float`` in ``[0, 1]`` (that fraction of the rows), or a string
            such as ``'512MiB'``, ``'2GB'`` or ``'20%'``.
        num_rows (int): rows in the full tensor (the result never exceeds it).
        row_bytes (int): bytes per row.
        name (str): the argument's name, for error messages.
    """
    if budget is None:
        return 0
    if isinstance(budget, bool):
        raise TypeError(f"'{name}' must be bytes, a fraction or a size "
                        f"string, got {budget!r}")
    if isinstance(budget, str):
        text = budget.strip().lower()
        if text.endswith('%'):
            try:
                budget = float(text[:-1]) / 100
            except ValueError:
                budget = None
        else:
            match = re.fullmatch(r'([0-9.]+)\s*([a-z]*)', text)
            if match is None or match.group(2) not in _UNITS:
                budget = None
            else:
                budget = int(float(match.group(1)) * _UNITS[match.group(2)])
        if budget is None:
            raise ValueError(f"'{name}={text!r}' is not a size: use bytes "
                             f"(e.g. '512MiB', '2GB') or a percentage "
                             f"('20%')")
    if isinstance(budget, float):
        if not 0.0 <= budget <= 1.0:
            raise ValueError(f"'{name}={budget}' as a fraction must lie in "
                             f"[0, 1]; give bytes as an int or a string")
        return min(num_rows, int(round(budget * num_rows)))
    if isinstance(budget, int):
        if budget < 0:
            raise ValueError(f"'{name}={budget}' must be >= 0 bytes")
        return min(num_rows, budget // max(row_bytes, 1))
    raise TypeError(f"'{name}' must be bytes, a fraction or a size string, "
                    f"got {type(budget).__name__}")


def check_fanouts(num_neighbors: Any) -> List[int]:
    r"""Validates a per-hop fan-out list (``-1`` = all neighbours)."""
    values = getattr(num_neighbors, 'values', num_neighbors)
    if isinstance(values, dict):
        raise NotImplementedError(
            "'num_neighbors' given per edge type (a dict) is for "
            "heterogeneous graphs. " + HETERO_UNSUPPORTED)
    if isinstance(values, int) or not isinstance(values, Sequence):
        raise TypeError(f"'num_neighbors' must be a list with one fan-out "
                        f"per hop, e.g. [15, 10, 5], got {num_neighbors!r}")
    if len(values) == 0:
        raise ValueError("'num_neighbors' is empty: give one fan-out per hop, "
                         "e.g. [15, 10, 5] (-1 takes every neighbour)")
    out = []
    for hop, value in enumerate(values):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"'num_neighbors[{hop}]' must be an int, got "
                            f"{value!r}")
        if value < -1:
            raise ValueError(
                f"'num_neighbors[{hop}]' is {value}: a fan-out must be >= 0, "
                f"or -1 to take every neighbour")
        out.append(int(value))
    return out


def available_memory() -> int:
    r"""Bytes of host memory available to new allocations (``MemAvailable``
    of ``/proc/meminfo``; :obj:`0` where it cannot be read)."""
    try:
        with open('/proc/meminfo') as f:
            for line in f:
                if line.startswith('MemAvailable:'):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def format_bytes(num: float) -> str:
    r"""``num`` bytes as ``'12 B'``, ``'3.4 MiB'``, ... (GiB at most)."""
    if num < 1024:
        return f'{num:.0f} B'
    for unit in ('KiB', 'MiB'):
        num /= 1024
        if num < 1024:
            return f'{num:.1f} {unit}'
    return f'{num / 1024:.1f} GiB'
