r"""``device_budget='auto'``'s life cycle on a feature store: the memory of
the consumer's first training step, measured, and the sizing policy it is
handed to once (PaGraph sizes its GPU cache once the model's own memory use
is known)."""
from __future__ import annotations

from typing import Any, Optional, Protocol

import torch

from .io_stats import process_memory, reset_peak_rss

__all__ = ['DeviceCacheSizing', 'FirstStepSizing']


class DeviceCacheSizing(Protocol):
    r"""A policy that sizes a store's device caches from the memory the
    first training step took
    (:class:`pyg_fastload.caching.planner.AutoDeviceBudget`)."""
    def size_device_caches(self, store: Any, step_bytes: int) -> None:
        r"""Sizes and fills :obj:`store`'s device caches, the step having
        taken :obj:`step_bytes` beyond what stays allocated."""


class FirstStepSizing:
    r"""The steps, in order:

    1. the planner hands the store a :obj:`policy` (the store's
       ``size_after_first_step``);
    2. the first gather after that (the first step's batch) resets the
       memory high-water mark (:meth:`batch_started`), so what ran before
       the training does not count;
    3. the loader calls the store's ``first_step_done()`` when its consumer
       asks for the second batch: the step's transient memory is measured
       (:meth:`step_done`: CUDA, its peak allocated beyond what stays
       allocated; CPU, the process's peak resident memory beyond its size
       after the step);
    4. the end of the next gather hands the measured bytes to the policy
       (:attr:`step_bytes` is set), in the gathering thread, so no gather
       of that store runs beside the resize.

    Args:
        policy (DeviceCacheSizing): what sizes the caches.
        device (torch.device): where the device caches live.
    """
    def __init__(self, policy: DeviceCacheSizing, device: torch.device):
        self.policy = policy
        self.device = device
        self.started = False
        self.step_bytes: Optional[int] = None

    def batch_started(self) -> None:
        r"""A gather begins: the first one starts the measurement."""
        if not self.started:
            self._reset_peak()

    def _reset_peak(self) -> None:
        self.started = True
        if self.device.type == 'cuda':
            torch.cuda.reset_peak_memory_stats(self.device)
        else:
            reset_peak_rss()

    def step_done(self) -> None:
        r"""The consumer finished its first step: measures its memory (0
        if no batch was gathered, as there was no step to measure)."""
        if self.step_bytes is not None:
            return
        if not self.started:
            self._reset_peak()
            self.step_bytes = 0
            return
        if self.device.type == 'cuda':
            self.step_bytes = int(
                torch.cuda.max_memory_allocated(self.device)
                - torch.cuda.memory_allocated(self.device))
        else:
            memory = process_memory()
            self.step_bytes = max(memory.get('peak', 0)
                                  - memory.get('rss', 0), 0)
