r"""``pyg-fastload prepare``: writing a dataset directory from a synthetic
preset, a PyG ``.pt`` file or a local OGB dataset."""
from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Dict, Optional, Union

from ..config import format_bytes
from ..errors import UsageExit
from ..io.reader import OnDiskDataset, OnDiskHeteroDataset
from ..io.staging import TargetExistsError, check_target
from ..io.writer import write_dataset_dir
from .disk_synthetic import DEFAULT_SCALE, DISK_PRESETS, prepare_disk_synthetic
from .hetero_synthetic import HETERO_PRESETS, generate_hetero
from .ogb import prepare_ogb
from .pyg_file import prepare_pyg, write_graph
from .synthetic_cache import load_synthetic
from .synthetic_config import (PRESETS, SyntheticGraphConfig, preset_name,
                               resolve_config)

__all__ = ['prepare_synthetic', 'prepare_hetero_preset', 'add_arguments',
           'run']

PathLike = Union[str, 'os.PathLike[str]']


# ------------------------------------------------------------ converters ---
def prepare_synthetic(
    preset_or_config: Union[str, SyntheticGraphConfig],
    out_dir: PathLike,
    seed: int = 0,
    cache_root: Optional[PathLike] = None,
    progress: bool = True,
    overwrite: bool = False,
) -> OnDiskDataset:
    r"""Converts a synthetic graph (:func:`load_synthetic`, so it is
    generated once and cached) into a dataset directory.

    Args:
        preset_or_config (str or SyntheticGraphConfig): a preset name in
            :obj:`PRESETS` or a configuration.
        out_dir (str or os.PathLike): the dataset directory to create.
        seed (int, optional): the random seed. (default: :obj:`0`)
        cache_root (str or os.PathLike, optional): the synthetic-graph cache
            (see :func:`load_synthetic`). (default: :obj:`None`)
        progress (bool, optional): show progress bars. (default: :obj:`True`)
        overwrite (bool, optional): replace an existing :obj:`out_dir`.
            (default: :obj:`False`)
    """
    cfg = resolve_config(preset_or_config, 'preset_or_config')
    out_dir = Path(out_dir).expanduser()
    check_target(out_dir, overwrite)
    graph = load_synthetic(cfg, root=cache_root, seed=seed, progress=progress)
    preset = preset_name(cfg)
    name = preset if preset != 'custom' else 'synthetic-custom'
    command = None
    if preset != 'custom':
        command = (f'pyg-fastload prepare --preset {preset} --seed {seed} '
                   f'--overwrite {out_dir}')
    extra: Dict[str, Any] = {'synthetic': {'config': asdict(cfg),
                                           'seed': int(seed)}}
    if command:
        extra['command'] = command
    return write_dataset_dir(
        out_dir,
        num_nodes=graph.num_nodes,
        indptr=graph.topology.indptr,
        indices=graph.topology.indices,
        node_arrays={'x': graph.x, 'y': graph.y,
                     'train_mask': graph.train_mask,
                     'val_mask': graph.val_mask,
                     'test_mask': graph.test_mask},
        name=name,
        source=(f"synthetic graph, preset '{preset}', seed {seed} "
                f'(pyg_fastload.datasets.load_synthetic; degree-corrected '
                f'SBM, both edge directions stored, sorted neighbour lists)'),
        num_classes=cfg.num_classes,
        overwrite=overwrite,
        progress=progress,
        extra_meta=extra,
    )


def prepare_hetero_preset(preset: str, out_dir: PathLike, seed: int = 0,
                          scale: float = 1.0, progress: bool = True,
                          overwrite: bool = False) -> OnDiskHeteroDataset:
    r"""Generates a heterogeneous preset (:data:`HETERO_PRESETS`,
    :func:`generate_hetero`) and writes it as a dataset directory
    (:func:`write_graph`).

    Args:
        preset (str): ``'mag-like'`` or ``'hetero-tiny'``.
        out_dir: the directory to create.
        seed (int): the random seed. (default: :obj:`0`)
        scale (float): every node and edge count times this, in (0, 1].
        progress (bool): show progress bars. (default: :obj:`True`)
        overwrite (bool): replace an existing :obj:`out_dir`.
            (default: :obj:`False`)
    """
    if preset not in HETERO_PRESETS:
        raise ValueError(f"invalid 'preset' = {preset!r}: pass one of "
                         f"{', '.join(HETERO_PRESETS)}")
    out_dir = Path(out_dir).expanduser()
    check_target(out_dir, overwrite)
    data = generate_hetero(preset, seed=seed, scale=scale)
    config = HETERO_PRESETS[preset]
    scaled = f' --scale {scale}' if scale != 1.0 else ''
    return write_graph(
        data, out_dir, name=preset,
        source=(f"synthetic heterogeneous graph, preset '{preset}', seed "
                f"{seed}, scale {scale} (pyg_fastload.datasets."
                f"generate_hetero; every relation also stored reversed)"),
        overwrite=overwrite, progress=progress,
        extra_meta={
            'command': f'pyg-fastload prepare --preset {preset} --seed '
                       f'{seed}{scaled} --overwrite {out_dir}',
            'synthetic': {'config': config.to_json(), 'seed': int(seed),
                          'scale': scale}})


# ------------------------------------------------------------------ CLI ----
def add_arguments(parser: argparse.ArgumentParser) -> None:
    r"""Adds the ``pyg-fastload prepare`` arguments to :obj:`parser`."""
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument('--preset', choices=sorted([
        *PRESETS, *DISK_PRESETS, *HETERO_PRESETS]),
                        help='a synthetic graph preset (generated once and '
                        'cached, see --cache-dir; papers-like is generated '
                        'straight into OUT_DIR in bounded memory: 56M nodes, '
                        '28.7 GB of features at --scale 1; mag-like and '
                        'hetero-tiny are heterogeneous; mag240m-like is '
                        'heterogeneous and generated straight into OUT_DIR '
                        'in bounded memory: 244M nodes, 3.5B edges, 235 GB '
                        f'at --scale 1, default --scale {DEFAULT_SCALE:g})')
    source.add_argument('--pyg-data', metavar='FILE',
                        help='a torch_geometric Data or HeteroData saved '
                        'with torch.save')
    source.add_argument('--ogb', metavar='NAME',
                        help='an OGB node-property dataset already on disk '
                        '(e.g. ogbn-arxiv, ogbn-products, ogbn-papers100M, '
                        'ogbn-mag); needs --raw-dir')
    parser.add_argument('out_dir', metavar='OUT_DIR',
                        help='the dataset directory to create')
    parser.add_argument('--raw-dir', metavar='DIR', default=None,
                        help='--ogb: the unzipped OGB dataset (its root with '
                        'raw/ and split/, or raw/ itself)')
    directed = parser.add_mutually_exclusive_group()
    directed.add_argument('--directed', dest='symmetrize',
                          action='store_false', default=None,
                          help='--ogb: keep the edges as listed (default: '
                          'add reverse edges for arxiv, products, proteins '
                          'and papers100M)')
    directed.add_argument('--symmetrize', dest='symmetrize',
                          action='store_true', default=None,
                          help='--ogb: add reverse edges and remove '
                          'duplicates')
    parser.add_argument('--split', default=None,
                        help='--ogb: the folder under split/ (default: the '
                        "dataset's standard split)")
    parser.add_argument('--seed', type=int, default=None,
                        help='--preset: the random seed (default: 0)')
    parser.add_argument('--scale', type=float, default=None,
                        help='--preset papers-like: times the nodes (2: '
                        "ogbn-papers100M's 112M); mag-like, hetero-tiny: "
                        'times every count, in (0, 1]; mag240m-like: times '
                        f'every count, > 0 (default {DEFAULT_SCALE:g})')
    parser.add_argument('--cache-dir', default=None,
                        help='--preset: where synthetic graphs are cached')
    parser.add_argument('--overwrite', action='store_true',
                        help='replace the dataset in OUT_DIR (the files its '
                        'meta.json lists; other files are kept)')
    parser.add_argument('--no-progress', action='store_true',
                        help='hide the progress bars')


def run(args: argparse.Namespace) -> Union[OnDiskDataset,
                                           OnDiskHeteroDataset]:
    r"""Runs ``pyg-fastload prepare``; prints a summary and returns the
    opened dataset.  User errors exit with a one-line message."""
    ogb_only = {'raw_dir': '--raw-dir', 'split': '--split',
                'symmetrize': '--directed/--symmetrize'}
    for key, flag in ogb_only.items():
        if getattr(args, key, None) is not None and not args.ogb:
            raise UsageExit('prepare', f'{flag} only applies to --ogb')
    for key, flag in (('seed', '--seed'), ('cache_dir', '--cache-dir')):
        if getattr(args, key, None) is not None and not args.preset:
            raise UsageExit('prepare', f'{flag} only applies to --preset')
    scalable = (*DISK_PRESETS, *HETERO_PRESETS)
    if args.scale is not None and args.preset not in scalable:
        raise UsageExit('prepare', f"--scale only applies to --preset "
                                   f"{', '.join(scalable)}")
    if args.cache_dir is not None and \
            args.preset in (*HETERO_PRESETS, *DISK_PRESETS):
        raise UsageExit('prepare', '--cache-dir does not apply to the '
                                   'heterogeneous and disk presets (never '
                                   'cached)')
    if args.ogb and not args.raw_dir:
        raise UsageExit('prepare', '--ogb needs --raw-dir DIR, the unzipped '
                                   'OGB dataset (nothing is downloaded)')
    progress = not args.no_progress
    start = time.perf_counter()
    try:
        if args.preset in HETERO_PRESETS:
            dataset = prepare_hetero_preset(
                args.preset, args.out_dir,
                seed=0 if args.seed is None else args.seed,
                scale=1.0 if args.scale is None else args.scale,
                progress=progress, overwrite=args.overwrite)
        elif args.preset in DISK_PRESETS:
            dataset = prepare_disk_synthetic(
                args.preset, args.out_dir,
                seed=0 if args.seed is None else args.seed,
                scale=args.scale, progress=progress,
                overwrite=args.overwrite)
        elif args.preset:
            dataset = prepare_synthetic(
                args.preset, args.out_dir,
                seed=0 if args.seed is None else args.seed,
                cache_root=args.cache_dir, progress=progress,
                overwrite=args.overwrite)
        elif args.pyg_data:
            dataset = prepare_pyg(args.pyg_data, args.out_dir,
                                  progress=progress, overwrite=args.overwrite)
        else:
            dataset = prepare_ogb(args.raw_dir, args.ogb, args.out_dir,
                                  progress=progress, overwrite=args.overwrite,
                                  symmetrize=args.symmetrize,
                                  split=args.split)
    except TargetExistsError as exc:
        raise UsageExit('prepare', str(exc.naming('--overwrite'))) from None
    except (OSError, ValueError) as exc:  # incl. DatasetFormatError
        raise UsageExit('prepare', str(exc)) from exc
    total = sum(spec['bytes'] for spec in dataset.meta['arrays'].values())
    arrays = ', '.join(f"{key} {spec['dtype']} {spec['shape']}"
                       for key, spec in dataset.meta['arrays'].items())
    meta = dataset.meta
    types = (f" ({len(meta['node_types'])} node types, "
             f"{len(meta['edge_types'])} edge types)"
             if 'node_types' in meta else '')
    print(f"wrote '{dataset.path}' in {time.perf_counter() - start:.1f}s: "
          f"{meta['num_nodes']:,} nodes, {meta['num_edges']:,} edges"
          f'{types}, {format_bytes(total)}')
    print(f'arrays: {arrays}')
    print(f"source: {dataset.meta['source']}")
    sys.stdout.flush()
    return dataset
