r"""Who this process is among the ranks: rank, world size and the part it
serves, read from ``torch.distributed`` once a process group exists (Lightning
and torchrun create it), else from the environment torchrun sets."""
from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import timedelta
from typing import Mapping, Optional

import torch
import torch.distributed as dist

from ..errors import FastLoadError

__all__ = ['DistContext', 'DistributedError', 'DEFAULT_TIMEOUT']

#: How long any collective may take before it is ended with an error.
DEFAULT_TIMEOUT = timedelta(minutes=5)


class DistributedError(FastLoadError, RuntimeError):
    r"""A distributed set-up or collective failed (names the operation and,
    when known, the rank)."""


def _env_int(env: Mapping[str, str], name: str, default: int) -> int:
    value = env.get(name)
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        raise DistributedError(f'environment variable {name}={value!r} is '
                               f'not an int (set by torchrun or Lightning)'
                               ) from None


@dataclass(frozen=True)
class DistContext:
    r"""This process's place among the ranks.

    Args:
        rank (int): global rank, in ``[0, world_size)``.
        world_size (int): number of ranks.
        local_rank (int): rank on this machine.
        timeout (timedelta): the bound of every collective.

    Example:
        >>> import torch
        >>> from pyg_fastload.distributed import DistContext
        >>> context = DistContext(rank=1, world_size=2)
        >>> context.part, context.is_distributed
        (1, True)
        >>> context.backend_for(torch.device('cpu'))
        'gloo'
    """
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    timeout: timedelta = DEFAULT_TIMEOUT

    def __post_init__(self) -> None:
        if not 0 <= self.rank < self.world_size:
            raise DistributedError(f'rank {self.rank} is not in [0, '
                                   f'world_size = {self.world_size})')

    @property
    def is_distributed(self) -> bool:
        return self.world_size > 1

    @property
    def part(self) -> int:
        r"""The part of a partition this rank serves: its rank."""
        return self.rank

    @classmethod
    def current(cls, timeout: timedelta = DEFAULT_TIMEOUT,
                env: Optional[Mapping[str, str]] = None) -> 'DistContext':
        r"""The context of this process: from the initialised default
        process group, else from ``RANK``/``WORLD_SIZE``/``LOCAL_RANK``
        (torchrun), else a single process."""
        env = os.environ if env is None else env
        local = _env_int(env, 'LOCAL_RANK', 0)
        if dist.is_available() and dist.is_initialized():
            return cls(dist.get_rank(), dist.get_world_size(), local,
                       timeout)
        return cls(_env_int(env, 'RANK', 0), _env_int(env, 'WORLD_SIZE', 1),
                   local, timeout)

    def backend_for(self, device: torch.device) -> str:
        r"""``'nccl'`` for CUDA ranks, ``'gloo'`` otherwise."""
        return 'nccl' if torch.device(device).type == 'cuda' else 'gloo'
