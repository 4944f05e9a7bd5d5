r"""The on-disk dataset format and the converters behind
``pyg-fastload prepare``.

A dataset directory holds one raw, header-less, little-endian binary file
per array (memory-mappable with :class:`numpy.memmap` at offset 0) and a
``meta.json`` describing them:

.. code-block:: json

    {"format": "pyg-fastload-dataset", "format_version": 1,
     "name": "ogbn-arxiv", "num_nodes": 169343, "num_edges": 2315598,
     "arrays": {"indptr": {"file": "indptr.bin", "dtype": "int64",
                           "shape": [169344], "bytes": 1354752,
                           "sha256": "..."}, ...,
                "time": {"file": "time.bin", "dtype": "int64",
                         "shape": [2315598], "bytes": 18524784,
                         "sha256": "...", "level": "edge"}},
     "num_classes": 40, "source": "..."}

The arrays are the CSC topology (``indptr`` ``int64 [N + 1]``, ``indices``
``int32 [E]`` (``int64`` from :math:`2^{31}` nodes on) with the in-neighbours
of :obj:`v` in ``indices[indptr[v]:indptr[v + 1]]``, and optionally
``edge_id`` ``int64 [E]``, the original position of every CSC edge) and the
node arrays (``x`` ``[N, F]``, ``y`` ``int64 [N]``, ``train_mask`` /
``val_mask`` / ``test_mask`` ``bool [N]`` and any other array with one row
per node), and optionally edge arrays: one row per edge (``[E]`` or ``[E,
...]``, e.g. a ``time`` per edge or an ``edge_attr``) **in CSC order**, row
``k`` belonging to the edge at CSC position ``k`` (the edge
``indices[k] -> v`` with ``indptr[v] <= k < indptr[v + 1]``, originally at
position ``edge_id[k]``). An edge array's entry in ``"arrays"`` carries
``"level": "edge"``; an entry without ``"level"`` (or with ``"level":
"node"``) is a node array, so directories written before edge arrays
existed read as they did.

Writers stream: every array is written chunk by chunk into ``<file>.tmp``
(hashing as it goes) and renamed, inside a temporary sibling directory that
is renamed to the final name only once complete, so a crash never leaves a
half-written dataset under the final name.  Edge lists larger than memory
are turned into CSC form by a two-pass external counting sort
(:func:`csc_from_edge_chunks`).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Optional, Tuple, Union

import numpy as np
import torch
from torch import Tensor
from tqdm.auto import tqdm

from ..errors import FastLoadError
from ..graph.kind import GraphInput

__all__ = ['FORMAT_NAME', 'FORMAT_VERSION', 'HETERO_FORMAT_VERSION',
           'ARRAY_LEVELS', 'DatasetFormatError', 'array_level', 'build_meta',
           'dataset_dir_kind', 'flat_labels']

#: The value of ``meta.json``'s ``"format"`` key.
FORMAT_NAME = 'pyg-fastload-dataset'
#: Bumped whenever the layout changes incompatibly.
FORMAT_VERSION = 1
#: The heterogeneous layout (several node and edge types), which readers of
#: :data:`FORMAT_VERSION` 1 refuse as written by a newer pyg-fastload.
HETERO_FORMAT_VERSION = 2

#: Bytes per chunk when streaming node arrays to disk (module attributes are
#: read at call time, so tests can shrink them).
CHUNK_BYTES = 64 << 20
#: Edges per chunk of the external sort and of the duplicate-removal pass.
EDGE_CHUNK = 1 << 22
#: Decompressed bytes parsed at a time from an OGB CSV file.
CSV_BLOCK_BYTES = 16 << 20
#: Bytes read at a time when hashing a file.
HASH_BLOCK = 8 << 20

TOPOLOGY_ARRAYS = ('indptr', 'indices', 'edge_id')
#: The values of an array spec's ``"level"`` key (absent: ``'node'``).
ARRAY_LEVELS = ('node', 'edge')
VERIFY_MODES = ('none', 'size', 'checksum')
NAME_RE = re.compile(r'^[A-Za-z_][A-Za-z0-9_.-]{0,127}$')
META_KEYS = ('format', 'format_version', 'name', 'num_nodes', 'num_edges',
              'arrays', 'num_classes', 'source', 'index_space', 'kind',
              'node_types', 'edge_types', 'target')
PREPARE_HINT = ('pyg-fastload prepare (--preset NAME | --pyg-data FILE | '
                 '--ogb NAME --raw-dir DIR) --overwrite')

Source = Union[Tensor, np.ndarray, Callable[[], Iterable[Any]]]
PathLike = Union[str, 'os.PathLike[str]']


class DatasetFormatError(FastLoadError, ValueError):
    r"""A dataset directory (or an input file of a converter) is missing,
    truncated, corrupted or inconsistent.  The message names the file, says
    what is wrong and how to fix it."""


def fail(file: Path, what: str, fix: str) -> DatasetFormatError:
    r"""The error of a bad dataset file: the file, what is wrong, the
    fix."""
    return DatasetFormatError(f'{file}: {what}; {fix}')


def count_field(meta: Dict[str, Any], key: str, meta_file: Path,
                fix: str) -> int:
    r"""``meta[key]``, checked to be a count."""
    value = meta.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise fail(meta_file, f"'{key}' = {value!r} is not a count", fix)
    return value


# --------------------------------------------------------------- dtypes ----
def numpy_dtype(name: str) -> np.dtype:
    r"""The dtype a stored array is mapped with (``bfloat16``, which numpy
    lacks, is mapped as ``int16`` and viewed as ``torch.bfloat16``)."""
    if name == 'bfloat16':
        return np.dtype(np.int16)
    dtype = np.dtype(name)
    if dtype.kind not in 'biufc' or dtype.hasobject or dtype.fields:
        raise TypeError(f'dtype {name!r} is not a plain numeric dtype')
    return dtype


def torch_dtype(name: str) -> torch.dtype:
    if name == 'bfloat16':
        return torch.bfloat16
    return torch.from_numpy(np.empty(0, dtype=numpy_dtype(name))).dtype


def to_numpy(chunk: Any, what: str) -> Tuple[np.ndarray, str]:
    r"""A C-contiguous numpy view/copy of :obj:`chunk` and its dtype name."""
    if isinstance(chunk, Tensor):
        if chunk.is_sparse or chunk.layout != torch.strided:
            raise TypeError(f'{what}: sparse tensors are not supported; '
                            f'pass a dense tensor (e.g. .to_dense())')
        chunk = chunk.detach().cpu().resolve_conj().resolve_neg()
        chunk = chunk.contiguous()
        if chunk.dtype == torch.bfloat16:
            return chunk.view(torch.int16).numpy(), 'bfloat16'
        array = chunk.numpy()
    else:
        array = np.asarray(chunk)
    if array.dtype.kind not in 'biufc' or array.dtype.hasobject:
        raise TypeError(f'{what}: dtype {array.dtype} is not numeric; pass '
                        f'bool, integer, float or complex data')
    array = np.ascontiguousarray(array)
    if array.dtype.byteorder == '>':
        array = array.astype(array.dtype.newbyteorder('<'))
    return array, array.dtype.name


def is_sha256(value: object) -> bool:
    r"""Whether :obj:`value` is a hex SHA-256 digest (as files record)."""
    return isinstance(value, str) and re.fullmatch(r'[0-9a-f]{64}', value) \
        is not None


def sha256_file(file: Path, bar: Optional[tqdm] = None) -> str:
    sha = hashlib.sha256()
    with open(file, 'rb') as f:
        while True:
            block = f.read(HASH_BLOCK)
            if not block:
                break
            sha.update(block)
            if bar is not None:
                bar.update(len(block))
    return sha.hexdigest()


def dataset_dir_kind(path: Union[str, 'os.PathLike[str]']) -> GraphInput:
    r"""The kind of graph the dataset directory :obj:`path` opens into: a
    ``(FeatureStore, GraphStore)`` pair, typed where its ``meta.json`` says
    ``"kind": "hetero"``; anything else counts as homogeneous (the reader
    checks the rest).

    Args:
        path (str or os.PathLike): a directory written by ``pyg-fastload
            prepare``.

    Example:
        >>> from pyg_fastload.io import dataset_dir_kind
        >>> dataset_dir_kind('data/mag-like').hetero  # doctest: +SKIP
        True
    """
    try:
        with open(Path(path) / 'meta.json') as f:
            meta = json.load(f)
        typed = meta.get('format') == FORMAT_NAME and \
            meta.get('kind') == 'hetero'
    except (OSError, ValueError, AttributeError):
        typed = False
    return GraphInput(hetero=typed, stores=True)


def array_level(spec: Dict[str, Any]) -> str:
    r"""Whether a (checked) ``meta.json`` array entry is a ``'node'`` or an
    ``'edge'`` array (no ``"level"``: a node array)."""
    return spec.get('level', 'node')


def flat_labels(key: str, value: Tensor) -> Tensor:
    r""":obj:`value`, or as a vector where it is an integer ``y`` of shape
    ``[N, 1]`` (how some PyG datasets store their labels)."""
    if key == 'y' and value.dim() == 2 and value.size(1) == 1 and \
            not value.is_floating_point():
        return value.view(-1)
    return value


def check_name(name: Any, what: str, where: str) -> str:
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise ValueError(
            f'invalid {what} {name!r} in {where}: array names become file '
            f'names; use '
            f'letters, digits, "_", "." and "-", starting with a letter or '
            f'"_" (at most 128 characters)')
    return name


def int_arg(value: Any, name: str, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"'{name}' must be an int, got "
                        f'{type(value).__name__}')
    if value < minimum:
        raise ValueError(f"invalid '{name}' = {value}: pass an int >= "
                         f'{minimum}')
    return int(value)


def classes_arg(value: Any) -> Optional[int]:
    r"""``num_classes`` as ``meta.json`` holds it: :obj:`None` or an int of
    at least 1 (what the readers accept; a dataset without labels gives
    none)."""
    if value is None:
        return None
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool) \
            and value < 1:
        raise ValueError(f"invalid 'num_classes' = {value}: pass the number "
                         f"of classes (>= 1), or None for a dataset without "
                         f"labels")
    return int_arg(value, 'num_classes')


def package_version() -> str:
    try:
        return metadata.version('pyg-fastload')
    except Exception:  # not installed
        return 'unknown'


def build_meta(name: str, num_nodes: int, num_edges: int,
               num_classes: Optional[int], source: str,
               extra: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    r"""The ``meta.json`` object of a dataset directory (without
    ``"arrays"``, which the writer adds)."""
    meta: Dict[str, Any] = {
        'format': FORMAT_NAME,
        'format_version': FORMAT_VERSION,
        'name': name,
        'num_nodes': num_nodes,
        'num_edges': num_edges,
    }
    if num_classes is not None:
        meta['num_classes'] = num_classes
    meta['source'] = source
    meta['created_by'] = f'pyg-fastload {package_version()}'
    meta.update(extra or {})
    return meta
