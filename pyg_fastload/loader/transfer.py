r"""Moving joined batches to the loader's device: every tensor of a batch
copied from pinned host memory on a side stream, awaited by the model's
stream (CUDA); a no-op on CPU."""
from __future__ import annotations

from typing import Any, Callable, Optional, Tuple

import torch

from ..placement import Placement

__all__ = ['DeviceTransfer', 'map_tensors']


def map_tensors(batch: Any,
                fn: Callable[[torch.Tensor], torch.Tensor]) -> Any:
    r"""Applies :obj:`fn` to every tensor of a batch: a tensor, a PyG data
    object (in place), or tensors nested in lists, tuples and dicts."""
    if isinstance(batch, torch.Tensor):
        return fn(batch)
    if hasattr(batch, 'apply') and hasattr(batch, 'stores'):
        return batch.apply(fn)
    if isinstance(batch, (list, tuple)):
        return type(batch)(map_tensors(item, fn) for item in batch)
    if isinstance(batch, dict):
        return {key: map_tensors(item, fn) for key, item in batch.items()}
    return batch


class DeviceTransfer:
    r"""Moves joined batches to the loader's device. On CUDA,
    :meth:`start` (loading stage) copies every tensor from pinned host
    memory with ``non_blocking=True`` on a side stream and records an event;
    :meth:`finish` (consumer) makes the current stream wait for that event
    and records the tensors as used on it, so the model never reads a batch
    still in flight and the allocator never reuses its memory too early.
    Without a device, or on CPU, both are no-ops.

    Args:
        device (torch.device, optional): where batches go (a
            :class:`~pyg_fastload.placement.Placement`'s ``batches``,
            whose :meth:`~pyg_fastload.placement.Placement.copy_stream`
            copies them).
    """
    def __init__(self, device: Optional[torch.device] = None):
        self.device = device
        self.stream = Placement(batches=device).copy_stream()

    @property
    def active(self) -> bool:
        r"""Whether batches are copied (a CUDA device)."""
        return self.stream is not None

    def _copy(self, tensor: torch.Tensor) -> torch.Tensor:
        if tensor.device == self.device:
            return tensor
        if tensor.device.type == 'cpu' and not tensor.is_pinned():
            tensor = tensor.pin_memory()  # torch's caching host allocator
        return tensor.to(self.device, non_blocking=True)

    def start(self, batch: Any) -> Tuple[Any, Optional[torch.cuda.Event]]:
        r"""Queues the copy of :obj:`batch`; returns the moved batch and
        the event marking the copy's end."""
        if self.stream is None:
            return batch, None
        # Also cover work already queued for the batch (a device cache).
        self.stream.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(self.stream):
            batch = map_tensors(batch, self._copy)
            event = torch.cuda.Event()
            event.record(self.stream)
        return batch, event

    def finish(self, moved: Tuple[Any, Optional[torch.cuda.Event]]) -> Any:
        r"""Makes the consumer's stream wait for a started copy; returns
        the batch."""
        batch, event = moved
        if event is None:
            return batch
        stream = torch.cuda.current_stream(self.device)
        stream.wait_event(event)

        def record(tensor: torch.Tensor) -> torch.Tensor:
            if tensor.is_cuda:
                tensor.record_stream(stream)
            return tensor

        return map_tensors(batch, record)
