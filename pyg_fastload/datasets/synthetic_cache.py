r"""A disk cache of generated synthetic graphs: one directory per
(configuration, seed), written atomically and memory-mapped back."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import warnings
from dataclasses import asdict
from pathlib import Path
from typing import Optional, Union

import numpy as np
import torch

from ..graph.topology import CSCTopology, index_dtype_for
from .synthetic import SyntheticGraph, check_seed, generate
from .synthetic_config import SyntheticGraphConfig, preset_name, resolve_config

__all__ = ['load_synthetic', 'default_cache_root']

#: Bumped whenever the generator or the cache layout changes, so stale cache
#: directories are never reused (the version is part of the directory hash).
FORMAT_VERSION = 1

_ARRAYS = ('indptr', 'indices', 'x', 'y', 'train_mask', 'val_mask',
           'test_mask')


def default_cache_root() -> Path:
    r"""``$PYG_FASTLOAD_CACHE`` if set, else
    ``~/.cache/pyg_fastload/synthetic``."""
    env = os.environ.get('PYG_FASTLOAD_CACHE')
    if env:
        return Path(env).expanduser()
    return Path('~/.cache/pyg_fastload/synthetic').expanduser()


def _config_hash(cfg: SyntheticGraphConfig) -> str:
    blob = json.dumps({'format_version': FORMAT_VERSION,
                       'config': asdict(cfg)}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:10]


def _cache_dir(root: Path, cfg: SyntheticGraphConfig, seed: int) -> Path:
    return root / f'{preset_name(cfg)}-seed{seed}-{_config_hash(cfg)}'


def _save(graph: SyntheticGraph, path: Path) -> None:
    r"""Writes the graph into a temporary sibling directory, then renames it
    to :obj:`path` (atomic: a reader sees all files or none)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f'.{path.name}.tmp-',
                                dir=path.parent))
    try:
        arrays = {
            'indptr': graph.topology.indptr,
            'indices': graph.topology.indices,
            'x': graph.x,
            'y': graph.y,
            'train_mask': graph.train_mask,
            'val_mask': graph.val_mask,
            'test_mask': graph.test_mask,
        }
        for name, tensor in arrays.items():
            np.save(tmp / f'{name}.npy', tensor.numpy())
        meta = {
            'format_version': FORMAT_VERSION,
            'config': asdict(graph.config),
            'seed': graph.seed,
            'num_nodes': graph.num_nodes,
            'num_directed_edges': graph.topology.num_edges,
        }
        with open(tmp / 'meta.json', 'w') as f:
            json.dump(meta, f, indent=2, sort_keys=True)
        os.chmod(tmp, 0o755)  # mkdtemp makes it private
        if path.exists():  # a corrupted directory being replaced
            shutil.rmtree(path, ignore_errors=True)
        try:
            os.replace(tmp, path)
        except OSError:
            if not path.exists():
                raise
            # Another process finished the same graph first; keep its copy.
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _load(path: Path, cfg: SyntheticGraphConfig, seed: int) -> SyntheticGraph:
    r"""Memory-maps a cached graph, raising :class:`ValueError` with the
    reason when the directory is incomplete or inconsistent."""
    try:
        with open(path / 'meta.json') as f:
            meta = json.load(f)
    except (OSError, ValueError) as exc:
        raise ValueError(f'unreadable meta.json ({exc})') from None
    if meta.get('format_version') != FORMAT_VERSION:
        raise ValueError(f"format version {meta.get('format_version')!r}, "
                         f"expected {FORMAT_VERSION}")
    if meta.get('config') != asdict(cfg) or meta.get('seed') != seed:
        raise ValueError('meta.json describes a different config or seed')
    n, f_dim = cfg.num_nodes, cfg.num_features
    num_edges = meta.get('num_directed_edges')
    if not isinstance(num_edges, int) or num_edges < 0:
        raise ValueError(f'bad num_directed_edges {num_edges!r}')
    expected = {
        'indptr': ((n + 1,), np.int64),
        'indices': ((num_edges,), np.dtype(
            np.int32 if index_dtype_for(n - 1) == torch.int32 else np.int64)),
        'x': ((n, f_dim), np.float32),
        'y': ((n,), np.int64),
        'train_mask': ((n,), np.bool_),
        'val_mask': ((n,), np.bool_),
        'test_mask': ((n,), np.bool_),
    }
    arrays = {}
    for name, (shape, dtype) in expected.items():
        file = path / f'{name}.npy'
        try:
            # 'c' (copy-on-write) maps the file like 'r' but gives writable
            # arrays, so torch.from_numpy neither warns nor hands out tensors
            # whose in-place ops would crash on a read-only mapping.
            array = np.load(file, mmap_mode='c', allow_pickle=False)
        except (OSError, ValueError, EOFError) as exc:
            raise ValueError(f'{file.name}: {exc}') from None
        if array.shape != shape or array.dtype != np.dtype(dtype):
            raise ValueError(f'{file.name}: shape {array.shape} dtype '
                             f'{array.dtype}, expected {shape} '
                             f'{np.dtype(dtype)}')
        arrays[name] = array
    indptr = arrays['indptr']
    if int(indptr[0]) != 0 or int(indptr[-1]) != num_edges:
        raise ValueError(f'indptr.npy: ends [{int(indptr[0])}, '
                         f'{int(indptr[-1])}], expected [0, {num_edges}]')
    tensors = {name: torch.from_numpy(array)
               for name, array in arrays.items()}
    topology = CSCTopology(indptr=tensors['indptr'],
                           indices=tensors['indices'], num_nodes=n)
    return SyntheticGraph(topology=topology, x=tensors['x'], y=tensors['y'],
                          train_mask=tensors['train_mask'],
                          val_mask=tensors['val_mask'],
                          test_mask=tensors['test_mask'], config=cfg,
                          seed=seed)


def load_synthetic(
    name_or_config: Union[SyntheticGraphConfig, str],
    root: Optional[Union[str, os.PathLike]] = None,
    seed: int = 0,
    progress: bool = True,
) -> SyntheticGraph:
    r"""Returns a synthetic graph, generating and caching it on the first
    call and memory-mapping the cached ``.npy`` files afterwards.

    The cache directory is ``root/<name>-seed<seed>-<config hash>/`` with a
    ``meta.json`` and one ``.npy`` file per array, written atomically.  A
    directory that is incomplete or does not match the config is
    regenerated with a warning.

    Args:
        name_or_config (SyntheticGraphConfig or str): a configuration or the
            name of a preset in :obj:`PRESETS`.
        root (str or os.PathLike, optional): the cache root; defaults to
            ``$PYG_FASTLOAD_CACHE``, else
            ``~/.cache/pyg_fastload/synthetic``. (default: :obj:`None`)
        seed (int, optional): the random seed. (default: :obj:`0`)
        progress (bool, optional): show a progress bar while generating.
            (default: :obj:`True`)
    """
    cfg = resolve_config(name_or_config, 'name_or_config')
    seed = check_seed(seed)
    root = default_cache_root() if root is None else Path(root).expanduser()
    path = _cache_dir(root, cfg, seed)
    if path.exists():
        try:
            return _load(path, cfg, seed)
        except ValueError as exc:
            warnings.warn(f"the synthetic graph cache '{path}' is corrupted "
                          f"or incomplete ({exc}); regenerating it",
                          RuntimeWarning, stacklevel=2)
    graph = generate(cfg, seed=seed, progress=progress)
    _save(graph, path)
    return graph
