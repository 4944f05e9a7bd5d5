r"""Settings validated once and passed as one object: fan-outs, memory
budgets, the cache settings and the pipeline settings."""
from __future__ import annotations

from typing import Any, List, Sequence

from .errors import HETERO_UNSUPPORTED

__all__ = ['check_fanouts']


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
