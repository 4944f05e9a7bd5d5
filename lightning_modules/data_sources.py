r"""What ``FastLoadDataModule``'s ``dataset`` and ``feature_cache``
arguments may be, checked with errors that name the argument, and the seeds
of a split."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Optional, Tuple

import torch
from torch import Tensor

from torch_geometric.data import Data

from pyg_fastload.config import FeatureCache, SettingError
from pyg_fastload.datasets import PRESETS, load_data_file
from pyg_fastload.io import DatasetFormatError

from .errors import ConfigError

__all__ = ['check_feature_cache', 'resolve_dataset', 'load_data_file_checked',
           'split_seeds', 'LossNorm', 'ModeOptions']


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


@dataclass(frozen=True)
class ModeOptions:
    r"""Options of the partitioned modes (``docs/guide/distributed.md``).

    Args:
        sampling (str): ``'dsp'``'s collective sampling: ``'node'``-wise
            fan-outs or ``'layer'``-wise (DSP Eq. 2: ``num_neighbors`` are
            layer sizes).
        seeds (str): where ``'dsp'`` ranks draw their seeds: their ``'own'``
            part's (DSP), or the ``'global'`` training set as in data
            parallelism (the model-centric baseline of HopGNN).
        merges (int): ``'hopgnn'``'s time steps merged away per iteration
            (0: one time step per rank).
        merge_search (bool): ``'hopgnn'`` chooses :obj:`merges` by HopGNN's
            examination period (one more merge per epoch while epochs get
            faster; the counts are in ``dist_stats.json``).
    """
    sampling: Literal['node', 'layer'] = 'node'
    seeds: Literal['own', 'global'] = 'own'
    merges: int = 0
    merge_search: bool = False

    def __post_init__(self) -> None:
        for key, value, allowed in (('sampling', self.sampling,
                                     ('node', 'layer')),
                                    ('seeds', self.seeds, ('own', 'global'))):
            if value not in allowed:
                raise ConfigError(f'mode_options.{key}', f"{value!r} is not "
                                  f"one of {', '.join(allowed)}")
        if isinstance(self.merges, bool) or not isinstance(
                self.merges, int) or self.merges < 0:
            raise ConfigError('mode_options.merges', f"{self.merges!r} must "
                              f"be an int >= 0 (below the world size)")

    def check(self, mode: str) -> None:
        r"""Refuses options that :obj:`mode` would ignore."""
        if mode != 'dsp' and (self.sampling, self.seeds) != ('node', 'own'):
            raise ConfigError('mode_options', f"'sampling' and 'seeds' are "
                              f"options of mode 'dsp', not {mode!r}")
        if mode != 'hopgnn' and (self.merges or self.merge_search):
            raise ConfigError('mode_options', f"'merges' and 'merge_search' "
                              f"are options of mode 'hopgnn', not {mode!r}")


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
