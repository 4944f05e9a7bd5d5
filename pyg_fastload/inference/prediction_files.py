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

Read them with ``numpy.load(path, allow_pickle=False)`` or
:func:`read_predictions`, which checks the manifest and the checksums."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict, Optional, Union

import numpy as np
import torch
from torch import Tensor

from ..io.format import sha256_file
from ..io.reader import MAX_META_BYTES
from ..io.staging import DirectoryFormat, StagedDirectory

__all__ = ['PREDICTIONS_FORMAT', 'KINDS', 'write_predictions',
           'read_predictions']

#: What a predictions directory holds (its manifest's ``"kind"``).
KINDS = ('predictions', 'embeddings')

#: The ``"format"`` of a predictions directory's manifest.
PREDICTIONS_FORMAT = 'pyg-fastload-predictions'
_MANIFEST = 'predictions.json'
_VERSION = 1

PathLike = Union[str, 'os.PathLike[str]']

#: A predictions directory (what ``overwrite`` may replace).
PREDICTIONS_DIR = DirectoryFormat(
    _MANIFEST, PREDICTIONS_FORMAT, 'predictions directory',
    lambda manifest: list(manifest.get('files', {})))


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
        manifest = {'format': PREDICTIONS_FORMAT, 'format_version': _VERSION,
                    'kind': kind, 'node_type': node_type, 'num_nodes': count,
                    'files': files, **(info or {})}
        with open(staged.dir / _MANIFEST, 'w') as f:
            json.dump(manifest, f, indent=2)
            f.write('\n')
        return staged.put_in_place()


def read_predictions(path: PathLike, mmap: bool = False) -> Dict[str, Any]:
    r"""The arrays of a predictions directory as tensors by name
    (``node_ids``, ``predictions``, ``logits`` and ``embeddings`` if
    written) and its
    ``manifest``, each file checked against its checksum. With
    :obj:`mmap`, the arrays are memory-mapped copy-on-write (rows are read
    when indexed; nothing is written back)."""
    path = Path(path).expanduser()
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
    if not isinstance(manifest, dict) or \
            manifest.get('format') != PREDICTIONS_FORMAT or \
            not isinstance(manifest.get('files'), dict) or not all(
                isinstance(spec, dict) and 'sha256' in spec
                for spec in manifest['files'].values()):
        raise ValueError(f"'{file}' is not a {PREDICTIONS_FORMAT} manifest "
                         f"(its 'format' and 'files' with a 'sha256' "
                         f"each); re-write the predictions")
    out: Dict[str, Any] = {'manifest': manifest}
    for name, spec in manifest['files'].items():
        array_file = path / Path(name).name  # never outside the directory
        if sha256_file(array_file) != spec['sha256']:
            raise ValueError(f"'{array_file}' does not match its checksum "
                             f"in {_MANIFEST}: the directory was changed "
                             f"after it was written")
        out[Path(name).stem] = torch.from_numpy(np.load(
            array_file, allow_pickle=False, mmap_mode='c' if mmap else None))
    return out
