r"""The ways a dataset directory's feature matrices can be read
(``FeatureCache.storage``), by name, in one registry: the feature store
opens a file through it, and the run's spec and the dataset opener check a
setting against it. A new kind is one module (its
:class:`~pyg_fastload.storage.tier.StorageTier`), its tests and one line of
:data:`STORAGE_KINDS`."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, Sequence, Union

import torch

from ..config import SettingError
from .direct import DirectStorage
from .gpu_direct import GpuDirectStorage
from .mmap_storage import MmapStorage
from .tier import Tier

__all__ = ['StorageKind', 'STORAGE_KINDS', 'storage_kind']


@dataclass(frozen=True)
class StorageKind:
    r"""One way of reading a row-major feature file.

    Args:
        reader (callable): the storage tier's class, called with ``(path,
            dtype, shape, offset)`` (and ``in_flight=`` where
            :obj:`in_flight`).
        in_flight (bool): it issues many reads at once, as many as the
            setting ``reads_in_flight`` says.
        needs_cuda (bool): it reads rows into GPU memory: the feature
            store's device must be a CUDA device.

    Example:
        >>> from pyg_fastload.storage.kinds import STORAGE_KINDS
        >>> sorted(STORAGE_KINDS), STORAGE_KINDS['gds'].needs_cuda
        (['direct', 'gds', 'mmap'], True)
    """
    reader: Callable[..., Tier]
    in_flight: bool = False
    needs_cuda: bool = False

    def open(self, path: str, dtype: torch.dtype, shape: Sequence[int],
             offset: int = 0, in_flight: Union[int, str] = 'auto') -> Tier:
        r"""The storage tier of the file at :obj:`path`."""
        extra = {'in_flight': in_flight} if self.in_flight else {}
        return self.reader(path, dtype, shape, offset, **extra)


#: Every storage kind by its name (``FeatureCache.storage``): memory-mapped
#: reads (the page cache keeps what was read), ``O_DIRECT`` reads many in
#: flight (the host buffer is the only host cache), and kvikio's reads
#: straight into GPU memory (GPUDirect Storage where available).
STORAGE_KINDS: Dict[str, StorageKind] = {
    'mmap': StorageKind(MmapStorage),
    'direct': StorageKind(DirectStorage, in_flight=True),
    'gds': StorageKind(GpuDirectStorage, in_flight=True, needs_cuda=True),
}


def storage_kind(name: Any, key: str = 'storage') -> StorageKind:
    r"""The kind called :obj:`name`; a :class:`SettingError` naming the
    setting :obj:`key` and the kinds there are, if none is.

    Args:
        name (str): the kind's name (``'memory'``, ``'mmap'``, ...).
        key (str, optional): the setting errors name.
            (default: :obj:`'storage'`)
    """
    if isinstance(name, str) and name in STORAGE_KINDS:
        return STORAGE_KINDS[name]
    raise SettingError(key, f"{name!r} is not one of "
                       f"{', '.join(map(repr, STORAGE_KINDS))}")
