r"""Opening this rank's part of a partition, with the start-up checks every
rank runs together: each rank opens (or fails to open) its part, then all
ranks compare what they opened in one collective, so a missing part, a
part of another partitioning or a world size that does not match the
number of parts is an error on every rank, not a hang."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, Union

import numpy as np
import torch
from torch import Tensor

from ..caching import Scores
from ..config import FeatureCache
from ..partition import HeteroPartitionBook, PartitionBook, open_partition
from ..partition.part_dirs import read_partition_meta
from ..storage import CSCGraphStore, TieredFeatureStore
from .collectives import Collectives, digest
from .context import DistributedError

__all__ = ['open_rank_part', 'partition_identity', 'read_new_ids',
           'new_edge_ids']


def partition_identity(meta: Dict[str, Any]) -> str:
    r"""What makes two ranks' partitions the same one: the run id, the
    method, the number of parts and the source dataset."""
    dataset = meta.get('dataset', {})
    return (f"run {meta.get('run')} method {meta.get('method')} parts "
            f"{meta.get('num_parts')} dataset {dataset.get('name')} "
            f"{dataset.get('meta_sha256')}")


def open_rank_part(
    parts_dir: Union[str, 'os.PathLike[str]'],
    collectives: Collectives,
    cache: Optional[FeatureCache] = None,
    *,
    method: Optional[str] = None,
    local: bool = False,
    device: Optional[Union[str, torch.device]] = None,
    scores: Optional[Scores] = None,
    verify: str = 'size',
) -> Tuple[TieredFeatureStore, CSCGraphStore, PartitionBook, Dict[str, Any]]:
    r"""Opens part ``rank`` of :obj:`parts_dir` on every rank, checked.

    Returns ``(feature_store, graph_store, book, partition_meta)``; raises
    :class:`DistributedError` on every rank if any rank failed to open its
    part, if the ranks opened different partitions, or if the world size is
    not the number of parts.

    Args:
        parts_dir: the partition directory (``pyg-fastload partition``).
        collectives (Collectives): this rank's collectives.
        cache (FeatureCache, optional): caches in front of the part.
        method (str, optional): the partitioning method the mode needs.
        local (bool): relabel to the part's rows
            (:func:`~pyg_fastload.partition.open_partition`).
        device: where the device cache lives.
        scores (Scores, optional): what ranks the part's rows for the
            caches (:func:`~pyg_fastload.caching.loader_scores`).
        verify (str): how the part's files are checked (``'size'``,
            ``'checksum'`` or ``'none'``; a failure on any rank fails all).
    """
    rank, world = collectives.rank, collectives.world_size
    opened: Optional[Tuple] = None
    error: Optional[str] = None
    try:
        meta = read_partition_meta(parts_dir)
        if meta['num_parts'] != world:
            raise ValueError(
                f"'{parts_dir}' has {meta['num_parts']} parts but there are "
                f"{world} ranks: launch one rank per part (e.g. torchrun "
                f"--nproc_per_node {meta['num_parts']}, or devices/num_nodes "
                f"multiplying to {meta['num_parts']})")
        if method is not None and meta['method'] != method:
            raise ValueError(
                f"'{parts_dir}' was partitioned with '{meta['method']}', this "
                f"mode needs '{method}': pyg-fastload partition DATASET_DIR "
                f"--num-parts {world} --method {method} --out PARTS_DIR")
        opened = open_partition(parts_dir, rank, cache, device=device,
                                local=local, scores=scores, verify=verify)
        code = digest(partition_identity(meta))
    except (OSError, ValueError) as exc:  # incl. DatasetFormatError
        error = f"{Path(parts_dir)}: {exc}"
        collectives.report_failure(error)
        code = 0
    codes = collectives.all_gather_ints([code], 'compare the opened '
                                        'partitions').view(-1).tolist()
    failed = [r for r, c in enumerate(codes) if c == 0]
    if failed:
        detail = error if error is not None else '; '.join(
            collectives.failed_ranks())
        raise DistributedError(f'rank(s) {failed} could not open their part '
                               f'of the partition: {detail}')
    if len(set(codes)) > 1:
        groups: Dict[int, List[int]] = {}
        for r, c in enumerate(codes):
            groups.setdefault(c, []).append(r)
        raise DistributedError(
            f'the ranks opened parts of different partitionings (ranks '
            f'grouped by partition: {sorted(groups.values())}); point every '
            f"rank at the same PARTS_DIR (this rank {rank}: "
            f"{partition_identity(meta)})")
    feature_store, graph_store, book = opened
    return feature_store, graph_store, book, meta


def read_new_ids(parts_dir: Union[str, 'os.PathLike[str]'],
                 book: Union[PartitionBook, HeteroPartitionBook]) -> Tensor:
    r"""The new id of every original node (the partition's
    ``new_id.npy``; global ids of every type in a heterogeneous one),
    checked: one integer per id of :obj:`book`, each new id once. What
    maps the dataset's ids (its label edges, its splits) into the
    parts'."""
    file = Path(parts_dir) / 'new_id.npy'
    fix = (f"partition the dataset again (pyg-fastload partition "
           f"DATASET_DIR --out {parts_dir})")
    try:
        new_id = np.load(file, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise ValueError(f"'{file}': unreadable ({exc}); {fix}") from None
    if new_id.dtype.kind not in 'iu' or new_id.shape != (book.num_ids, ):
        raise ValueError(f"'{file}' holds {new_id.dtype} of shape "
                         f"{list(new_id.shape)}, expected "
                         f"{book.num_ids:,} integers; {fix}")
    ids = torch.from_numpy(new_id.astype(np.int64))
    if ids.numel() and (int(ids.min()) < 0 or
                        int(ids.max()) >= book.num_ids or
                        bool((torch.bincount(ids) != 1).any())):
        raise ValueError(f"'{file}' is not a renumbering of "
                         f"{book.num_ids:,} nodes (an id out of range or "
                         f"repeated); {fix}")
    return ids


def new_edge_ids(new_id: Tensor, book: Union[PartitionBook,
                                             HeteroPartitionBook],
                 edges: Tensor, edge_type: Optional[Tuple[str, str, str]]
                 = None) -> Tensor:
    r""":obj:`edges` (``[2, E]``, the dataset's ids: of relation
    :obj:`edge_type`'s source and destination types on a heterogeneous
    graph) in the partition's new ids (type-local ones on a heterogeneous
    partition), through :obj:`new_id` (:func:`read_new_ids`)."""
    if edge_type is None:
        return new_id[edges]
    rows = []
    for row, node_type in zip(edges, (edge_type[0], edge_type[2])):
        first = book.first_id(node_type)
        rows.append(new_id[row + first] - first)
    return torch.stack(rows)
