r"""Predictions written out (:func:`write_predictions`, read back by
:func:`read_predictions`): one directory per prediction run, put in place
atomically (written beside its final path, then renamed), so a run that is
killed, or a full disk, never leaves a directory that looks complete.

The directory holds ``predictions.json`` (the manifest: ``"format":
"pyg-fastload-predictions"``, the node type, the node count and every
file with its shape, dtype and SHA-256) and numpy ``.npy`` files, one row
per predicted node, in increasing node id:

* ``node_ids.npy`` (``int64``): the node ids (of :obj:`node_type` on a
  heterogeneous graph);
* ``predictions.npy`` (``int64``): the predicted class of each (not in
  a directory of kind ``'embeddings'``);
* ``logits.npy`` (``float32``, ``[N, C]``, optional): the model's outputs;
* ``embeddings.npy`` (``float32``, ``[N, H]``, optional): its last hidden
  layer.

The manifest's ``"kind"`` says what was written: ``"predictions"`` (a
node classifier's classes) or ``"embeddings"`` (a link predictor's encoder
output for every node, ``embeddings.npy`` without ``predictions.npy``;
scored with :func:`~pyg_fastload.inference.score_pairs`); a directory
without one is ``"predictions"``.

A heterogeneous link predictor's embeddings are one table per node type
(:func:`write_embedding_tables`): the directory's ``predictions.json`` has
``"kind": "embeddings"``, no files of its own, and ``"node_types"``, each
node type's subdirectory (the type's name where it is a plain word, else
``type-<i>``, ``i`` its position among the sorted types), and each
subdirectory is a directory of kind ``'embeddings'`` as above, of that
node type (``node_ids.npy`` of the type, ``embeddings.npy``). Read one
type's table with ``read_predictions(path, node_type=...)``.

Read them with ``numpy.load(path, allow_pickle=False)`` or
:func:`read_predictions`, which checks the manifest and the checksums."""
from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, Union

import numpy as np
import torch
from torch import Tensor

from ..io.format import sha256_file
from ..io.reader import MAX_META_BYTES
from ..io.staging import DirectoryFormat, StagedDirectory

__all__ = ['PREDICTIONS_FORMAT', 'KINDS', 'write_predictions',
           'write_embedding_tables', 'read_predictions', 'node_tables']

#: What a predictions directory holds (its manifest's ``"kind"``).
KINDS = ('predictions', 'embeddings')

#: The ``"format"`` of a predictions directory's manifest.
PREDICTIONS_FORMAT = 'pyg-fastload-predictions'
_MANIFEST = 'predictions.json'
_VERSION = 1

PathLike = Union[str, 'os.PathLike[str]']

def _owned(manifest: Dict[str, Any]) -> List[Any]:
    r"""What a predictions directory's manifest lists: its files, or its
    node types' subdirectories."""
    tables = manifest.get('node_types')
    return [*manifest.get('files', {}),
            *(tables.values() if isinstance(tables, dict) else ())]


#: A predictions directory (what ``overwrite`` may replace).
PREDICTIONS_DIR = DirectoryFormat(
    _MANIFEST, PREDICTIONS_FORMAT, 'predictions directory', _owned)


def _table_dir(node_type: str, index: int) -> str:
    r"""The subdirectory of :obj:`node_type`'s table in a directory of one
    table per node type: its name if a plain word (letters, digits,
    ``_``), else ``type-<index>`` (a name may not be a file name)."""
    return node_type if re.fullmatch(r'\w+', node_type, re.ASCII) \
        else f'type-{index}'


def write_predictions(out_dir: PathLike, node_ids: Tensor,
                      predictions: Optional[Tensor],
                      logits: Optional[Tensor] = None,
                      embeddings: Optional[Tensor] = None,
                      node_type: Optional[str] = None,
                      overwrite: bool = False,
                      info: Optional[Dict[str, Any]] = None) -> Path:
    r"""Writes the predicted class of every node in :obj:`node_ids` (each
    once, in any order; rows of :obj:`predictions`, :obj:`logits` and
    :obj:`embeddings` follow them) to the directory :obj:`out_dir`, sorted
    by node id, and returns its path. An existing directory is replaced
    only with :obj:`overwrite`, and only if it is a predictions directory.
    With
    :obj:`predictions` :obj:`None` it writes :obj:`embeddings` alone (kind
    ``'embeddings'``: a link predictor's node embeddings).

    Args:
        out_dir (str or os.PathLike): the directory to write.
        node_ids (torch.Tensor): the nodes, each once, in any order.
        predictions (torch.Tensor, optional): the class of every node.
        logits (torch.Tensor, optional): the model's output rows.
        embeddings (torch.Tensor, optional): an embedding row per node.
        node_type (str, optional): the node type the rows are of (kept in
            the manifest).
        overwrite (bool, optional): replace an existing predictions
            directory. (default: :obj:`False`)
        info (Dict[str, Any], optional): more entries for the manifest.

    Example:
        >>> import torch
        >>> from pyg_fastload.inference import (read_predictions,
        ...                                     write_predictions)
        >>> path = write_predictions('preds', torch.tensor([2, 0, 1]),
        ...                          torch.tensor([5, 3, 4]))
        >>> read_predictions(path)['predictions'].tolist()
        [3, 4, 5]
    """
    node_ids = torch.as_tensor(node_ids).reshape(-1).long().cpu()
    count = node_ids.numel()
    kind = 'predictions'
    if predictions is None:
        if embeddings is None:
            raise ValueError("'predictions' is None and no 'embeddings' are "
                             "given: give one of them")
        kind = 'embeddings'
    else:
        predictions = torch.as_tensor(predictions).reshape(-1).long().cpu()
    if predictions is not None and predictions.numel() != count:
        raise ValueError(f"'predictions' has {predictions.numel()} entries "
                         f"for {count} node ids: give one per node")
    for name, rows in (('logits', logits), ('embeddings', embeddings)):
        if rows is not None and (rows.dim() != 2 or rows.size(0) != count):
            raise ValueError(f"'{name}' has shape {list(rows.shape)}, "
                             f"expected [{count}, width]")
    if count and int(node_ids.min()) < 0:
        raise ValueError(f"'node_ids' holds {int(node_ids.min())}: node ids "
                         f"are >= 0 (give each node's row in the graph)")
    order = torch.argsort(node_ids)
    node_ids = node_ids[order]
    if count > 1 and bool((node_ids[1:] == node_ids[:-1]).any()):
        twice = int(node_ids[1:][node_ids[1:] == node_ids[:-1]][0])
        raise ValueError(f"node {twice} was predicted more than once: each "
                         f"node must be predicted once (a sampler that "
                         f"pads its shares repeats nodes)")
    arrays = {'node_ids': node_ids.numpy()}
    if predictions is not None:
        arrays['predictions'] = predictions[order].numpy()
    for name, rows in (('logits', logits), ('embeddings', embeddings)):
        if rows is not None:
            arrays[name] = rows.detach().float().cpu()[order].numpy()
    out = Path(out_dir).expanduser()
    with StagedDirectory(out, overwrite, PREDICTIONS_DIR) as staged:
        files = {}
        for name, array in arrays.items():
            file = f'{name}.npy'
            np.save(staged.dir / file, array, allow_pickle=False)
            files[file] = {'shape': list(array.shape),
                           'dtype': str(array.dtype),
                           'sha256': sha256_file(staged.dir / file)}
        return _put_in_place(staged, {
            'kind': kind, 'node_type': node_type, 'num_nodes': count,
            'files': files, **(info or {})})


def write_embedding_tables(out_dir: PathLike,
                           tables: Dict[str, Tuple[Tensor, Tensor]],
                           overwrite: bool = False,
                           info: Optional[Dict[str, Any]] = None) -> Path:
    r"""Writes a heterogeneous link predictor's embeddings, one table per
    node type: for each ``node_type: (node_ids, embeddings)`` of
    :obj:`tables`, a directory of kind ``'embeddings'``
    (:func:`write_predictions`) in a subdirectory of :obj:`out_dir`, which
    its manifest lists under ``"node_types"`` (see the module's
    docstring). The whole directory is put in place at once, when every
    table is written; an existing one is replaced only with
    :obj:`overwrite`, and only if it is a predictions directory.

    Args:
        out_dir (str or os.PathLike): the directory to write.
        tables (Dict[str, Tuple[torch.Tensor, torch.Tensor]]): the
            ``(node_ids, embeddings)`` of every node type.
        overwrite (bool, optional): replace an existing predictions
            directory. (default: :obj:`False`)
        info (Dict[str, Any], optional): more entries for the manifest.

    Example:
        >>> import torch
        >>> from pyg_fastload.inference import (read_predictions,
        ...                                     write_embedding_tables)
        >>> path = write_embedding_tables('emb', {
        ...     'author': (torch.arange(3), torch.randn(3, 4)),
        ...     'paper': (torch.arange(5), torch.randn(5, 4))})
        >>> read_predictions(path, node_type='paper')['embeddings'].shape
        torch.Size([5, 4])
    """
    if not isinstance(tables, dict) or not tables:
        raise ValueError(f"'tables' must be a non-empty dict "
                         f"{{node_type: (node_ids, embeddings)}}, got "
                         f"{tables!r}")
    with StagedDirectory(Path(out_dir).expanduser(), overwrite,
                         PREDICTIONS_DIR) as staged:
        dirs: Dict[str, str] = {}
        counts: Dict[str, int] = {}
        for index, node_type in enumerate(sorted(tables)):
            node_ids, rows = tables[node_type]
            dirs[node_type] = _table_dir(node_type, index)
            write_predictions(staged.dir / dirs[node_type], node_ids, None,
                              embeddings=rows, node_type=node_type,
                              info=info)
            counts[node_type] = int(node_ids.numel())
        return _put_in_place(staged, {
            'kind': 'embeddings', 'node_types': dirs, 'num_nodes': counts,
            'files': {}, **(info or {})})


def _put_in_place(staged: StagedDirectory, manifest: Dict[str, Any]) -> Path:
    r"""Writes the manifest (:obj:`manifest` after the format's keys) into
    :obj:`staged` and puts it in place."""
    manifest = {'format': PREDICTIONS_FORMAT, 'format_version': _VERSION,
                **manifest}
    with open(staged.dir / _MANIFEST, 'w') as f:
        json.dump(manifest, f, indent=2)
        f.write('\n')
    return staged.put_in_place()


def node_tables(path: PathLike) -> Optional[Dict[str, str]]:
    r"""The node types of the predictions directory :obj:`path` and their
    subdirectories, if it holds one table per node type
    (:func:`write_embedding_tables`); :obj:`None` if it holds one table."""
    return _manifest(Path(path).expanduser()).get('node_types')


def read_predictions(path: PathLike, mmap: bool = False,
                     node_type: Optional[str] = None) -> Dict[str, Any]:
    r"""The arrays of a predictions directory as tensors by name
    (``node_ids``, ``predictions``, ``logits`` and ``embeddings`` if
    written) and its
    ``manifest``, each file checked against its checksum. With
    :obj:`mmap`, the arrays are memory-mapped copy-on-write (rows are read
    when indexed; nothing is written back). A directory of one table per
    node type (:func:`write_embedding_tables`) gives the table of
    :obj:`node_type`; a directory of one table takes no
    :obj:`node_type` but its own.

    Args:
        path (str or os.PathLike): the predictions directory.
        mmap (bool, optional): memory-map the arrays instead of reading
            them. (default: :obj:`False`)
        node_type (str, optional): the table to read from a directory of
            one table per node type.
    """
    path = Path(path).expanduser()
    manifest = _manifest(path)
    tables = manifest.get('node_types')
    if tables is not None:
        if node_type not in tables:
            given = 'no node_type' if node_type is None else \
                f"node_type={node_type!r}"
            raise ValueError(f"'node_type': '{path}' holds one embedding "
                             f"table per node type, of {sorted(tables)}, "
                             f"and {given} was given: pass node_type=, one "
                             f"of them")
        return read_predictions(path / tables[node_type], mmap)
    if node_type is not None and manifest.get('node_type') != node_type:
        raise ValueError(f"'node_type': '{path}' holds one table, of node "
                         f"type {manifest.get('node_type')!r}, not of "
                         f"{node_type!r} (it is not a directory of one "
                         f"table per node type): leave node_type out")
    out: Dict[str, Any] = {'manifest': manifest}
    count = manifest.get('num_nodes')
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        raise ValueError(f"'{path / _MANIFEST}': 'num_nodes' is {count!r}, "
                         f"not a count of nodes; re-write the predictions")
    for name, spec in manifest['files'].items():
        array_file = path / Path(name).name  # never outside the directory
        if sha256_file(array_file) != spec['sha256']:
            raise ValueError(f"'{array_file}' does not match its checksum "
                             f"in {_MANIFEST}: the directory was changed "
                             f"after it was written")
        array = np.load(array_file, allow_pickle=False,
                        mmap_mode='c' if mmap else None)
        if array.ndim == 0 or array.shape[0] != count or \
                list(array.shape) != spec.get('shape'):
            raise ValueError(f"'{array_file}' has shape {list(array.shape)} "
                             f"but {_MANIFEST} gives 'shape' "
                             f"{spec.get('shape')!r} and 'num_nodes' "
                             f"{count}: re-write the predictions")
        out[Path(name).stem] = torch.from_numpy(array)
    return out


def _manifest(path: Path) -> Dict[str, Any]:
    r"""The checked manifest of the predictions directory :obj:`path`."""
    file = path / _MANIFEST
    if not file.is_file():
        raise FileNotFoundError(f"'{path}' holds no {_MANIFEST}: not a "
                                f"predictions directory")
    if file.stat().st_size > MAX_META_BYTES:
        raise ValueError(f"'{file}' is larger than a manifest may be")
    try:
        manifest = json.loads(file.read_text())
    except ValueError as error:
        raise ValueError(f"'{file}' is not JSON ({error})") from None
    tables = manifest.get('node_types') if isinstance(manifest, dict) \
        else None
    if not isinstance(manifest, dict) or \
            manifest.get('format') != PREDICTIONS_FORMAT or \
            not isinstance(manifest.get('files'), dict) or not all(
                isinstance(spec, dict) and 'sha256' in spec
                for spec in manifest['files'].values()) or \
            not (tables is None or isinstance(tables, dict) and all(
                isinstance(sub, str) and re.fullmatch(r'[\w-]+', sub)
                for sub in tables.values())):
        raise ValueError(f"'{file}' is not a {PREDICTIONS_FORMAT} manifest "
                         f"(its 'format' and 'files' with a 'sha256' "
                         f"each, and any 'node_types' plain subdirectory "
                         f"names); re-write the predictions")
    return manifest
