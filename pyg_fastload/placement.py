r"""Where a loader's work runs and where its batches go
(:class:`Placement`), resolved once: from a loader's ``device``,
``sampling_device`` and ``num_workers`` arguments
(:meth:`Placement.of_loader`), or from a run's ``sampling_device`` setting
and its trainer's device, Lightning's ``root_device``
(:meth:`Placement.of_run`). Every device rule is here, each with its one
error naming the argument or setting, the value and the fix; the loaders,
samplers and modes read the placement instead of deciding again."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Union

import torch

from .config import SettingError

__all__ = ['Placement', 'SAMPLING_DEVICES', 'check_device',
           'check_shared_memory', 'check_run_sampling',
           'require_run_gpu']

#: What a run's ``sampling_device`` setting may be: the CPU, or the
#: trainer's CUDA device.
SAMPLING_DEVICES = ('cpu', 'cuda')

Device = Union[str, int, torch.device]


@dataclass(frozen=True)
class Placement:
    r"""Where a loader samples and where it returns its batches; from
    that, whether its host buffers are pinned (:attr:`pinned`) and which
    stream copies the batches (:meth:`copy_stream`). Resolved once per
    loader (:meth:`of_loader`, then :meth:`sampled_on` once its sampler
    exists) or per run (:meth:`of_run`), and handed down.

    Attributes:
        sampling (torch.device, optional): where the topology lives and
            sampling runs; :obj:`None`: where the graph is held (the CPU
            unless it was given on a GPU).
        batches (torch.device, optional): where batches are returned;
            :obj:`None`: where the join leaves them (host memory).

    Example:
        >>> import torch
        >>> from pyg_fastload.placement import Placement
        >>> placement = Placement.of_loader(device='cpu')
        >>> placement
        Placement(sampling=None, batches=device(type='cpu'))
        >>> placement.sampled_on(torch.device('cpu')).sampling
        device(type='cpu')
        >>> placement.pinned, placement.copy_stream()
        (False, None)
        >>> Placement.of_run(torch.device('cpu'), sampling_device='cpu')
        Placement(sampling=None, batches=None)
    """
    sampling: Optional[torch.device] = None
    batches: Optional[torch.device] = None

    @classmethod
    def of_loader(cls, device: Optional[Device] = None,
                  sampling_device: Optional[Device] = None,
                  num_workers: int = 0,
                  given_sampler: bool = False) -> Placement:
        r"""A loader's placement from its arguments, checked before
        anything is copied to a device: :obj:`sampling_device` is where
        its sampler is built (not with a :obj:`given_sampler`, which
        samples where its topology is),
        :obj:`device` where batches go (CUDA: ``num_workers=0``)."""
        sampling = batches = None
        if sampling_device is not None:
            sampling = _parse(sampling_device, 'sampling_device')
            if given_sampler:
                raise ValueError(
                    "'sampling_device' and 'neighbor_sampler' were both "
                    "given: a given sampler samples where its topology is; "
                    "build it with 'device' instead")
        if device is not None:
            batches = _parse(device, 'device')
            if sampling is not None:
                _check_batches_follow(
                    sampling, batches,
                    f"'sampling_device={sampling_device}' with ")
        if sampling is not None:
            sampling = _usable(sampling, 'sampling_device', num_workers)
        if batches is not None:
            batches = _usable(batches, 'device', num_workers)
        return cls(sampling, batches)

    def sampled_on(self, device: torch.device,
                   num_workers: int = 0) -> Placement:
        r"""This placement once the loader's sampler exists: sampling
        runs on :obj:`device`, where the sampler holds its topology, and
        batches sampled on a GPU are returned there."""
        batches = self.batches
        if device.type == 'cuda':
            if batches is None:
                batches = _usable(device, 'sampling_device', num_workers)
            else:
                _check_batches_follow(device, batches)
        return Placement(device, batches)

    @classmethod
    def of_run(cls, device: torch.device, sampling_device: str = 'cpu',
               num_workers: int = 0) -> Placement:
        r"""A run's placement on its trainer's :obj:`device` (Lightning's
        ``root_device``): sampling there with ``sampling_device='cuda'``
        (a GPU run only), else on the CPU; batches copied there by the
        loader's own pipeline on a GPU with ``num_workers=0`` (PyG's
        worker processes cannot; Lightning moves theirs)."""
        check_run_sampling(sampling_device, num_workers)
        if sampling_device == 'cuda':
            require_run_gpu(device, 'sampling_device',
                            "'cuda' samples on the trainer's GPU",
                            'sampling_device: cpu')
        copied = device.type == 'cuda' and num_workers == 0
        return cls(device if sampling_device == 'cuda' else None,
                   device if copied else None)

    @property
    def pinned(self) -> bool:
        r"""Whether host buffers are pinned: batches are copied to a
        GPU."""
        return self.batches is not None and self.batches.type == 'cuda'

    def copy_stream(self) -> Optional[torch.cuda.Stream]:
        r"""A new side stream of the batches' GPU, on which they are copied
        there (:obj:`None`: nothing is copied)."""
        return torch.cuda.Stream(self.batches) if self.pinned else None


def check_device(device: Optional[Device], num_workers: int = 0,
                 name: str = 'device') -> Optional[torch.device]:
    r"""The device argument :obj:`name` as a ``torch.device``: :obj:`None`,
    the CPU or an existing CUDA device (its index filled in), which needs
    ``num_workers=0``."""
    if device is None:
        return None
    return _usable(_parse(device, name), name, num_workers)


def _parse(device: Any, name: str) -> torch.device:
    r""":obj:`device` as a ``torch.device`` (a name, an index or a device;
    a bool or other type is refused), naming the argument if it is none;
    a CUDA device without index is the current one where CUDA is
    available."""
    try:
        if isinstance(device, bool) or not isinstance(
                device, (str, int, torch.device)):
            raise TypeError(type(device).__name__)
        device = torch.device(device)
    except (RuntimeError, TypeError) as error:
        raise ValueError(f"'{name}={device!r}' is not a torch device: pass "
                         f"None, 'cpu' or 'cuda[:index]'") from error
    if device.type == 'cuda' and device.index is None and \
            torch.cuda.is_available():
        device = torch.device('cuda', torch.cuda.current_device())
    return device


def _usable(device: torch.device, name: str,
            num_workers: int) -> torch.device:
    r""":obj:`device` if the loaders can use it: the CPU, or a CUDA device
    this machine has, with ``num_workers=0``."""
    if device.type not in ('cpu', 'cuda'):
        raise ValueError(f"'{name}={device}' is not supported: pass None, "
                         f"'cpu' or 'cuda[:index]'")
    if device.type == 'cuda':
        if not torch.cuda.is_available():
            raise ValueError(f"'{name}={device}' needs CUDA, which this "
                             f"PyTorch build or machine lacks: pass None or "
                             f"'cpu'")
        if device.index >= torch.cuda.device_count():
            raise ValueError(f"'{name}={device}': this machine has "
                             f"{torch.cuda.device_count()} GPU(s), "
                             f"cuda:0 to cuda:{torch.cuda.device_count() - 1}")
        _check_workers(device, name, num_workers)
    return device


def _check_workers(device: Any, name: str, num_workers: int) -> None:
    r"""A CUDA :obj:`device` needs the loader's own pipeline: no worker
    processes."""
    if num_workers > 0:
        raise ValueError(f"'{name}={device}' needs 'num_workers=0' (got "
                         f"{num_workers}): the loader's own pipeline "
                         f"samples and moves batches; CUDA does not work in "
                         f"forked worker processes")


def _check_batches_follow(sampling: torch.device, batches: torch.device,
                          given: str = '') -> None:
    r"""Batches sampled on a GPU are returned there: :obj:`batches` may
    not name another device (:obj:`given`: the sampling argument, for the
    error)."""
    if sampling.type == 'cuda' and (batches.type != 'cuda' or None not in (
            sampling.index, batches.index) and batches != sampling):
        raise ValueError(f"{given}'device={batches}': the sampler runs on "
                         f"{sampling}, where its batches are returned; pass "
                         f"device=None or '{sampling}'")


def check_shared_memory(device: torch.device) -> None:
    r"""A topology moved to shared memory (for worker processes) must be
    in host memory."""
    if device.type != 'cpu':
        raise ValueError(
            f"'share_memory=True' moves the topology to shared host "
            f"memory, but it is on {device}: sample on the GPU with "
            f"num_workers=0")


def check_run_sampling(sampling_device: Any, num_workers: int) -> None:
    r"""A run's ``sampling_device`` setting: one of
    :data:`SAMPLING_DEVICES`, ``'cuda'`` without worker processes."""
    if sampling_device not in SAMPLING_DEVICES:
        raise SettingError('sampling_device', f"{sampling_device!r} must be "
                           f"'cpu' or 'cuda' (the trainer's GPU)")
    if sampling_device == 'cuda':
        try:
            _check_workers(sampling_device, 'sampling_device', num_workers)
        except ValueError as error:
            raise SettingError('sampling_device', str(error)) from None


def require_run_gpu(device: Any, key: str, needs: str,
                    instead: str) -> None:
    r"""Refuses the setting :obj:`key`, which :obj:`needs` the trainer's
    GPU, on a run whose :obj:`device` is not CUDA, naming the setting to
    use :obj:`instead`."""
    if getattr(device, 'type', device) != 'cuda':
        raise SettingError(key, f"{needs}, but this run's device is "
                           f"{device}: use {instead}")
