r"""What a run trains on (:class:`DatasetSource`): a synthetic preset, a
dataset directory, a saved ``Data`` file, a ``Data`` or a ``HeteroData``;
opened into the stores a loader reads, with errors naming ``dataset``."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Optional, Tuple, Union

import torch
from torch import Tensor
from torch_geometric.data import Data, HeteroData

from ..caching import open_dataset, stores_from_data
from ..config import SettingError
from ..datasets import (
    HETERO_PRESETS,
    PRESETS,
    generate_hetero,
    load_synthetic,
)
from ..datasets.pyg_file import load_graph_file
from ..io import (
    DatasetFormatError,
    data_identity,
    dataset_dir_identity,
    is_hetero_dataset_dir,
    open_dataset_dir,
)
from ..loader.inputs import check_has_features
from .hetero import HeteroSchema, directory_schema, hetero_schema
from .spec import LoadingSpec

__all__ = ['DatasetSource', 'check_classes', 'directory_metadata',
           'split_seeds']


def check_classes(y: Optional[Tensor], num_nodes: int,
                  num_classes: Optional[int], where: str) -> int:
    r"""The number of classes of node labels :obj:`y`, checked before a
    model allocates one output per class: labels are class indices in
    ``[0, num_classes)`` (default: up to the largest label), and there are
    no more classes than nodes."""
    if y is None or y.numel() == 0:
        raise SettingError('dataset', f"{where} has no node labels 'y'")
    if y.dtype.is_floating_point or y.dtype == torch.bool:
        raise SettingError('dataset', f"{where}: labels 'y' are {y.dtype}; "
                           f"give class indices as integers")
    low, high = int(y.min()), int(y.max())
    if low < 0:
        raise SettingError('dataset', f"{where}: label {low} is negative; "
                           f"labels are class indices 0..C-1")
    count = high + 1 if num_classes is None else num_classes
    if high >= count:
        raise SettingError('dataset', f"{where}: label {high} is not below "
                           f"'num_classes' = {count}")
    if count > max(num_nodes, 1):
        raise SettingError('dataset', f"{where}: {count:,} classes (label "
                           f"{high:,}) for {num_nodes:,} nodes; labels must "
                           f"be class indices 0..C-1 (relabel them with "
                           f"torch.unique(y, return_inverse=True))")
    return count


def split_seeds(data: Any, split: str) -> Tensor:
    r"""The seed ids of :obj:`split` in :obj:`data` (a ``Data``, a
    ``HeteroData`` or a ``(FeatureStore, GraphStore)`` pair) from its
    ``<split>_mask`` (of the labelled node type, if heterogeneous)."""
    name = f'{split}_mask'
    if isinstance(data, HeteroData):
        mask = data[hetero_schema(data).target].get(name)
    elif isinstance(data, Data):
        mask = data.get(name)
    else:
        groups = [a.group_name for a in data[0].get_all_tensor_attrs()
                  if a.attr_name == name]
        mask = None if len(groups) != 1 else data[0].get_tensor(
            group_name=groups[0], attr_name=name, index=None)
    if mask is None:
        raise SettingError('dataset', f"the dataset has no '{name}', so "
                           f"there is nothing to {split} on")
    return torch.as_tensor(mask).bool().nonzero().view(-1)


class DatasetSource:
    r"""A run's dataset: ``kind`` is ``'preset'``, ``'dir'``, ``'data'``,
    ``'hetero'`` (a ``HeteroData``, one in a ``.pt`` file, or a
    heterogeneous preset generated in memory with seed 0) or
    ``'hetero-dir'`` (a heterogeneous dataset directory).

    Args:
        dataset: a preset name, a directory from ``pyg-fastload prepare``,
            a ``.pt`` file holding a ``Data`` or ``HeteroData``, a ``Data``
            or a ``HeteroData``.
        cache_dir (str, optional): cache root of the synthetic presets.
        progress (bool): progress bars while generating a preset.
    """
    def __init__(self, dataset: Union[str, 'os.PathLike[str]', Data,
                                      HeteroData],
                 cache_dir: Optional[str] = None, progress: bool = True):
        self.cache_dir = cache_dir
        self.progress = progress
        self.kind, self.source = self._resolve(dataset)

    @staticmethod
    def _resolve(dataset: Any) -> Tuple[str, Any]:
        if isinstance(dataset, Data):
            return 'data', dataset
        if isinstance(dataset, HeteroData):
            return 'hetero', dataset
        if not isinstance(dataset, (str, os.PathLike)):
            raise SettingError('dataset', f"must be a preset name, a dataset "
                               f"directory, a .pt file or a torch_geometric "
                               f"Data or HeteroData, got "
                               f"{type(dataset).__name__}")
        if isinstance(dataset, str) and dataset in PRESETS:
            return 'preset', dataset
        if isinstance(dataset, str) and dataset in HETERO_PRESETS:
            return 'hetero', dataset
        path = Path(dataset).expanduser()
        if path.is_dir() and (path / 'meta.json').is_file():
            return ('hetero-dir' if is_hetero_dataset_dir(path) else 'dir',
                    path)
        if path.is_file() and path.suffix == '.pt':
            return DatasetSource._load(path)
        raise SettingError(
            'dataset', f"{str(dataset)!r} is neither a synthetic preset "
            f"({', '.join([*PRESETS, *HETERO_PRESETS])}) nor a dataset "
            f"directory (no "
            f"'{path / 'meta.json'}') nor a saved Data '.pt' file; create a "
            f"directory with 'pyg-fastload prepare --preset arxiv-like DIR'")

    @staticmethod
    def _load(path: Path) -> Tuple[str, Any]:
        r"""A ``.pt`` file's graph, loaded safely once."""
        try:
            data = load_graph_file(path)
            if isinstance(data, Data):
                check_has_features(data)  # before anything is sized by it
        except (DatasetFormatError, ValueError) as error:
            raise SettingError('dataset', f"'{path}': {error}") from None
        return ('hetero' if isinstance(data, HeteroData) else 'data'), data

    @property
    def is_hetero(self) -> bool:
        r"""Whether the dataset has several node or edge types."""
        return self.kind in ('hetero', 'hetero-dir')

    def identity(self) -> str:
        r"""What ranks compare to know they train on one dataset: a
        directory's ``meta.json`` (its arrays' checksums), a preset's name
        (generated the same everywhere) or a graph's content digest."""
        if self.kind in ('dir', 'hetero-dir'):
            try:
                return dataset_dir_identity(self.source)
            except DatasetFormatError as error:
                raise SettingError('dataset', str(error)) from None
        if isinstance(self.source, str):
            return f'preset {self.source!r}'
        return data_identity(self.source)

    def check(self, spec: LoadingSpec) -> None:
        r"""Refuses settings of :obj:`spec` this dataset cannot take."""
        cache = spec.feature_cache
        if cache is not None and cache.in_memory and \
                self.kind not in ('dir', 'hetero-dir'):
            raise SettingError('feature_cache.in_memory',
                               'only applies to a dataset directory')
        if cache is not None and self.kind == 'hetero' and \
                cache.read_ahead:
            raise SettingError('feature_cache.read_ahead', 'reads ahead '
                               'from storage: it needs a dataset directory '
                               "('pyg-fastload prepare'), not a HeteroData "
                               'in memory')

    def prepare(self) -> None:
        r"""Generates and caches a synthetic preset (once per machine)."""
        if self.kind == 'preset':
            load_synthetic(self.source, root=self.cache_dir,
                           progress=self.progress)

    def in_memory(self) -> Union[Data, HeteroData]:
        r"""The dataset as a ``Data`` or ``HeteroData`` (a preset or a
        file, loaded safely once)."""
        if self.kind == 'hetero':
            if isinstance(self.source, str):  # generated once, seed 0
                self.source = generate_hetero(self.source)
            return self.source
        if self.kind == 'preset':
            return load_synthetic(self.source, root=self.cache_dir,
                                  progress=self.progress).to_data()
        return self.source

    def schema(self, labelled: bool = True) -> Optional[HeteroSchema]:
        r"""A heterogeneous dataset's schema (:obj:`None` otherwise);
        without :obj:`labelled` (link prediction) a graph without labels
        has one too."""
        if self.kind == 'hetero-dir':
            return directory_schema(self.source, labelled)
        if self.kind != 'hetero':
            return None
        return hetero_schema(self.in_memory(), labelled)

    def metadata(self) -> Tuple[int, int]:
        r"""``(num_features, num_classes)`` (of the labelled node type of a
        ``HeteroData``; 0 features if it has none)."""
        if self.is_hetero:
            schema = self.schema()
            return (schema.num_features.get(schema.target, 0),
                    schema.num_classes)
        if self.kind == 'preset':
            config = PRESETS[self.source]
            return config.num_features, config.num_classes
        if self.kind == 'dir':
            return directory_metadata(self.source)
        data = self.in_memory()
        return data.num_features, check_classes(
            data.get('y'), data.num_nodes, None, 'the dataset')

    def open(self, spec: LoadingSpec, device: Any) -> Any:
        r"""What a loader reads: a ``Data`` (in memory, no caches asked
        for) or a ``(FeatureStore, GraphStore)`` pair with the caches of
        :obj:`spec` on :obj:`device`."""
        cache = spec.cache()
        if self.kind in ('dir', 'hetero-dir'):
            try:
                return open_dataset(
                    self.source, cache, device=device, scores=spec.scores(),
                    verify=spec.verify)
            except (DatasetFormatError, ValueError) as error:
                raise SettingError('dataset', str(error)) from None
        data = self.in_memory()
        if spec.feature_cache is None:
            return data
        try:
            return stores_from_data(
                data, cache, device=device, scores=spec.scores())
        except ValueError as error:
            raise SettingError('feature_cache', str(error)) from None


def directory_metadata(path: Path) -> Tuple[int, int]:
    r"""``(num_features, num_classes)`` of a dataset directory (classes from
    the labels when ``meta.json`` does not say)."""
    try:
        dataset = open_dataset_dir(path, verify='none')
        num_classes = dataset.num_classes
    except DatasetFormatError as error:
        raise SettingError('dataset', str(error)) from None
    return dataset.num_features, check_classes(
        dataset.arrays.get('y'), dataset.num_nodes, num_classes, f"'{path}'")
