r"""What a run trains on (:class:`DatasetSource`, one class per kind): a
synthetic preset, a dataset directory, a saved ``Data`` file, a ``Data`` or
a ``HeteroData``; opened into the stores a loader reads, with errors naming
``dataset``."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, ClassVar, Optional, Tuple, Union

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
from ..graph.kind import is_data, is_hetero
from ..graph.view import GraphView
from ..io import (
    DatasetFormatError,
    data_identity,
    dataset_dir_identity,
    dataset_dir_kind,
    open_dataset_dir,
)
from ..loader.inputs import check_has_features
from .schema import (HeteroSchema, check_classes, directory_schema,
                     hetero_schema)
from .spec import LoadingSpec

__all__ = ['DatasetSource', 'PresetSource', 'GraphSource',
           'HeteroGraphSource', 'DirectorySource', 'HeteroDirectorySource',
           'directory_metadata', 'split_seeds']


def split_seeds(data: Any, split: str) -> Tensor:
    r"""The seed ids of :obj:`split` in :obj:`data` (a ``Data``, a
    ``HeteroData`` or a ``(FeatureStore, GraphStore)`` pair) from its
    ``<split>_mask`` (of the labelled node type, if heterogeneous).

    Args:
        data: the graph, in any of those forms.
        split (str): ``'train'``, ``'val'`` or ``'test'``.
    """
    name = f'{split}_mask'
    view = GraphView.of(data)
    kind = view.kind  # stores: the one node type holding the mask
    target = hetero_schema(data).target if kind.hetero and \
        not kind.stores else None
    mask = view.node_attr(name, target)
    if mask is None:
        raise SettingError('dataset', f"the dataset has no '{name}', so "
                           f"there is nothing to {split} on")
    return torch.as_tensor(mask).bool().nonzero().view(-1)


class DatasetSource:
    r"""A run's dataset, one subclass per kind: a synthetic preset
    (:class:`PresetSource`), a ``Data`` (:class:`GraphSource`), a
    ``HeteroData`` or heterogeneous preset (:class:`HeteroGraphSource`), a
    dataset directory (:class:`DirectorySource`,
    :class:`HeteroDirectorySource`); made from what a user gives by
    :meth:`of`. Each opens into the stores a loader reads.

    Example:
        >>> from pyg_fastload.modes import DatasetSource
        >>> source = DatasetSource.of('tiny', progress=False)
        >>> type(source).__name__, source.metadata()
        ('PresetSource', (16, 4))
    """
    #: Whether the dataset has several node or edge types.
    is_hetero: ClassVar[bool] = False

    @staticmethod
    def of(dataset: Union[str, 'os.PathLike[str]', Data, HeteroData],
           cache_dir: Optional[str] = None,
           progress: bool = True) -> 'DatasetSource':
        r"""The source of :obj:`dataset`: a preset name, a directory from
        ``pyg-fastload prepare``, a ``.pt`` file holding a ``Data`` or
        ``HeteroData``, a ``Data`` or a ``HeteroData``
        (:obj:`cache_dir`: the presets' cache root; :obj:`progress`: bars
        while generating one)."""
        if is_data(dataset, hetero=False):
            return GraphSource(dataset)
        if is_data(dataset, hetero=True):
            return HeteroGraphSource(dataset)
        if not isinstance(dataset, (str, os.PathLike)):
            raise SettingError('dataset', f"must be a preset name, a dataset "
                               f"directory, a .pt file or a torch_geometric "
                               f"Data or HeteroData, got "
                               f"{type(dataset).__name__}")
        if isinstance(dataset, str) and dataset in PRESETS:
            return PresetSource(dataset, cache_dir, progress)
        if isinstance(dataset, str) and dataset in HETERO_PRESETS:
            return HeteroGraphSource(dataset)
        path = Path(dataset).expanduser()
        if path.is_dir() and (path / 'meta.json').is_file():
            if dataset_dir_kind(path).hetero:
                return HeteroDirectorySource(path)
            return DirectorySource(path)
        if path.is_file() and path.suffix == '.pt':
            return _load(path)
        raise SettingError(
            'dataset', f"{str(dataset)!r} is neither a synthetic preset "
            f"({', '.join([*PRESETS, *HETERO_PRESETS])}) nor a dataset "
            f"directory (no "
            f"'{path / 'meta.json'}') nor a saved Data '.pt' file; create a "
            f"directory with 'pyg-fastload prepare --preset arxiv-like DIR'")

    def identity(self) -> str:
        r"""What ranks compare to know they train on one dataset."""
        raise NotImplementedError

    def check(self, spec: LoadingSpec) -> None:
        r"""Refuses settings of :obj:`spec` this dataset cannot take."""
        cache = spec.feature_cache
        if cache is not None and cache.in_memory:
            raise SettingError('feature_cache.in_memory',
                               'only applies to a dataset directory')
        if spec.evaluation.inference.stream and \
                self.schema(labelled=False) is not None:
            raise SettingError('evaluation.inference.stream', "streams a "
                               "homogeneous graph's layers; a heterogeneous "
                               "one's chunks gather their in-neighbours: "
                               "leave it out")

    def prepare(self) -> None:
        r"""Work done once per machine before any rank opens the dataset
        (generating a preset)."""

    def schema(self, labelled: bool = True) -> Optional[HeteroSchema]:
        r"""A heterogeneous dataset's schema (:obj:`None` otherwise);
        without :obj:`labelled` (link prediction) a graph without labels
        has one too."""
        return None

    def metadata(self, labelled: bool = True) -> Tuple[int, int]:
        r"""``(num_features, num_classes)`` (of the labelled node type of a
        heterogeneous dataset; 0 features if it has none); without
        :obj:`labelled` (link prediction), 0 classes for a dataset without
        labels."""
        raise NotImplementedError

    def meta_file(self) -> Optional[Path]:
        r"""The ``meta.json`` of a dataset directory (:obj:`None` for a
        dataset in memory): what a partition records of its origin."""
        return None

    def open(self, spec: LoadingSpec, device: Any) -> Any:
        r"""What a loader reads: a ``Data`` or ``HeteroData`` (in memory,
        no caches asked for) or a ``(FeatureStore, GraphStore)`` pair with
        the caches of :obj:`spec` on :obj:`device`."""
        raise NotImplementedError


def _load(path: Path) -> DatasetSource:
    r"""The source of a ``.pt`` file's graph, loaded safely once."""
    try:
        data = load_graph_file(path)
        if not is_hetero(data):
            check_has_features(data)  # before anything is sized by it
    except (DatasetFormatError, ValueError) as error:
        raise SettingError('dataset', f"'{path}': {error}") from None
    if is_hetero(data):
        return HeteroGraphSource(data)
    return GraphSource(data)


def _schema_metadata(schema: HeteroSchema) -> Tuple[int, int]:
    return schema.num_features.get(schema.target, 0), schema.num_classes


class _InMemorySource(DatasetSource):
    r"""A dataset held in memory as one ``Data`` or ``HeteroData``."""

    def in_memory(self) -> Union[Data, HeteroData]:
        r"""The dataset as a ``Data`` or ``HeteroData``."""
        raise NotImplementedError

    def identity(self) -> str:
        return data_identity(self.in_memory())

    def open(self, spec: LoadingSpec, device: Any) -> Any:
        data = self.in_memory()
        if spec.feature_cache is None:
            return data
        try:
            return stores_from_data(data, spec.cache(), device=device,
                                    scores=spec.scores())
        except ValueError as error:
            raise SettingError('feature_cache', str(error)) from None


class PresetSource(_InMemorySource):
    r"""A homogeneous synthetic preset, generated once per machine and
    cached under :obj:`cache_dir`.

    Args:
        name (str): a preset of :data:`~pyg_fastload.datasets.PRESETS`.
        cache_dir (str, optional): where the generated graph is kept (default:
            the user cache, ``PYG_FASTLOAD_CACHE``).
        progress (bool): show progress while generating.
    """

    def __init__(self, name: str, cache_dir: Optional[str] = None,
                 progress: bool = True):
        self.name = name
        self.cache_dir = cache_dir
        self.progress = progress

    def identity(self) -> str:
        return f'preset {self.name!r}'  # generated the same everywhere

    def prepare(self) -> None:
        load_synthetic(self.name, root=self.cache_dir,
                       progress=self.progress)

    def in_memory(self) -> Data:
        return load_synthetic(self.name, root=self.cache_dir,
                              progress=self.progress).to_data()

    def metadata(self, labelled: bool = True) -> Tuple[int, int]:
        config = PRESETS[self.name]
        return config.num_features, config.num_classes


class GraphSource(_InMemorySource):
    r"""A homogeneous ``Data`` (given, or loaded from a ``.pt`` file).

    Args:
        data (Data): the graph.
    """

    def __init__(self, data: Data):
        self.data = data

    def in_memory(self) -> Data:
        return self.data

    def metadata(self, labelled: bool = True) -> Tuple[int, int]:
        data = self.data
        return data.num_features, check_classes(
            data.get('y'), data.num_nodes, None, 'the dataset', labelled)


class HeteroGraphSource(_InMemorySource):
    r"""A ``HeteroData`` (given, or in a ``.pt`` file), or a heterogeneous
    preset's name (generated in memory with seed 0 when first read).

    Args:
        data (str or HeteroData): the graph, or the name of a heterogeneous
            preset.
    """
    is_hetero = True

    def __init__(self, data: Union[str, HeteroData]):
        self._data = data

    def identity(self) -> str:
        if isinstance(self._data, str):
            return f'preset {self._data!r}'
        return data_identity(self._data)

    def check(self, spec: LoadingSpec) -> None:
        super().check(spec)
        cache = spec.feature_cache
        if cache is not None and cache.read_ahead:
            raise SettingError('feature_cache.read_ahead', 'reads ahead '
                               'from storage: it needs a dataset directory '
                               "('pyg-fastload prepare'), not a HeteroData "
                               'in memory')

    def in_memory(self) -> HeteroData:
        if isinstance(self._data, str):  # generated once, seed 0
            self._data = generate_hetero(self._data)
        return self._data

    def schema(self, labelled: bool = True) -> Optional[HeteroSchema]:
        return hetero_schema(self.in_memory(), labelled)

    def metadata(self, labelled: bool = True) -> Tuple[int, int]:
        return _schema_metadata(self.schema(labelled))


class DirectorySource(DatasetSource):
    r"""A dataset directory written by ``pyg-fastload prepare`` (features
    read from its files).

    Args:
        path (Path): the dataset directory.
    """

    def __init__(self, path: Path):
        self.path = path

    def identity(self) -> str:
        try:  # its meta.json: the arrays' checksums
            return dataset_dir_identity(self.path)
        except DatasetFormatError as error:
            raise SettingError('dataset', str(error)) from None

    def check(self, spec: LoadingSpec) -> None:
        r"""Any cache setting applies to a directory."""

    def meta_file(self) -> Optional[Path]:
        return self.path / 'meta.json'

    def metadata(self, labelled: bool = True) -> Tuple[int, int]:
        return directory_metadata(self.path, labelled)

    def open(self, spec: LoadingSpec, device: Any) -> Any:
        try:
            return open_dataset(self.path, spec.cache(), device=device,
                                scores=spec.scores(), verify=spec.verify)
        except (DatasetFormatError, ValueError) as error:
            raise SettingError('dataset', str(error)) from None


class HeteroDirectorySource(DirectorySource):
    r"""A heterogeneous dataset directory (one array set per node and
    edge type)."""
    is_hetero = True

    def schema(self, labelled: bool = True) -> Optional[HeteroSchema]:
        return directory_schema(self.path, labelled)

    def metadata(self, labelled: bool = True) -> Tuple[int, int]:
        return _schema_metadata(self.schema(labelled))


def directory_metadata(path: Path,
                       labelled: bool = True) -> Tuple[int, int]:
    r"""``(num_features, num_classes)`` of a dataset directory (classes from
    the labels when ``meta.json`` does not say; without :obj:`labelled`, 0
    for a directory without labels).

    Args:
        path (Path): the dataset directory.
        labelled (bool): require labels (a node classification run).
    """
    try:
        dataset = open_dataset_dir(path, verify='none')
        num_classes = dataset.num_classes
    except DatasetFormatError as error:
        raise SettingError('dataset', str(error)) from None
    return dataset.num_features, check_classes(
        dataset.arrays.get('y'), dataset.num_nodes, num_classes, f"'{path}'",
        labelled)
