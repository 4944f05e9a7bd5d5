r"""What ``FastLoadDataModule``'s ``dataset`` and ``feature_cache``
arguments may be, checked with errors that name the argument, and the seeds
of a split."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Optional, Tuple

import torch
from torch import Tensor

from torch_geometric.data import Data

from pyg_fastload.config import FeatureCache, SettingError
from pyg_fastload.datasets import PRESETS, load_data_file
from pyg_fastload.io import DatasetFormatError

from .errors import ConfigError

__all__ = ['check_feature_cache', 'resolve_dataset', 'load_data_file_checked',
           'split_seeds', 'LossNorm']


def check_feature_cache(cache: Any) -> Optional[FeatureCache]:
    if cache is None or isinstance(cache, FeatureCache):
        return cache
    if not isinstance(cache, dict):
        raise ConfigError('feature_cache', f"must be a FeatureCache or a "
                          f"dict, got {type(cache).__name__}")
    unknown = set(cache) - set(FeatureCache.__dataclass_fields__)
    if unknown:
        raise ConfigError(
            'feature_cache', f"unknown keys {sorted(unknown)}; known: "
            f"{sorted(FeatureCache.__dataclass_fields__)}")
    try:
        return FeatureCache(**cache)
    except SettingError as error:
        raise ConfigError(f'feature_cache.{error.key}',
                          error.detail) from None


def resolve_dataset(dataset: Any) -> Tuple[str, Any]:
    r"""``('preset', name)``, ``('dir', path)`` or ``('data', Data)``."""
    if isinstance(dataset, Data):
        return 'data', dataset
    if not isinstance(dataset, (str, os.PathLike)):
        raise ConfigError('dataset', f"must be a preset name, a dataset "
                          f"directory, a .pt file or a torch_geometric Data, "
                          f"got {type(dataset).__name__}")
    if isinstance(dataset, str) and dataset in PRESETS:
        return 'preset', dataset
    path = Path(dataset).expanduser()
    if path.is_dir() and (path / 'meta.json').is_file():
        return 'dir', path
    if path.is_file() and path.suffix == '.pt':
        return 'data', path
    raise ConfigError(
        'dataset', f"{str(dataset)!r} is neither a synthetic preset "
        f"({', '.join(PRESETS)}) nor a dataset directory (no "
        f"'{path / 'meta.json'}') nor a saved Data '.pt' file; create a "
        f"directory with 'pyg-fastload prepare --preset arxiv-like DIR'")


def load_data_file_checked(path: Path) -> Data:
    try:
        return load_data_file(path)
    except DatasetFormatError as exc:  # also UnsafeFileError
        raise ConfigError('dataset', str(exc)) from None


def split_seeds(data: Any, split: str) -> Tensor:
    r"""The seed ids of :obj:`split` in :obj:`data`."""
    name = f'{split}_mask'
    if isinstance(data, Data):
        mask = data.get(name)
    else:
        names = {a.attr_name for a in data[0].get_all_tensor_attrs()}
        mask = None if name not in names else data[0].get_tensor(
            group_name=None, attr_name=name, index=None)
    if mask is None:
        raise ConfigError('dataset', f"the dataset has no '{name}', so "
                          f"there is nothing to {split} on")
    return torch.as_tensor(mask).bool().nonzero().view(-1)


class LossNorm:
    r"""A batch transform for HopGNN mode: sets ``loss_norm`` (the per-rank
    batch size the summed loss is divided by), then applies
    :obj:`inner`."""
    def __init__(self, batch_size: int, inner: Optional[Any] = None):
        self.batch_size = batch_size
        self.inner = inner

    def __call__(self, batch: Data) -> Data:
        batch.loss_norm = self.batch_size
        return batch if self.inner is None else self.inner(batch)
