r"""The partitioned modes' part of ``FastLoadDataModule``: opening this
rank's part (``pagraph``, ``dsp``, ``hopgnn``) and what a mode adds to a
loader (its collective sampler, HopGNN's loss normalisation)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Optional, Tuple

from pyg_fastload.distributed import DistributedError
from pyg_fastload.distributed.dsp import open_dsp_rank
from pyg_fastload.distributed.hopgnn import RootRouter
from pyg_fastload.distributed.parts import open_rank_part
from pyg_fastload.io.format import sha256_file

from .data_sources import LossNorm
from .errors import ConfigError

__all__ = ['setup_part', 'mode_loader_args']


def setup_part(dm: Any) -> None:
    r"""Opens the data module :obj:`dm`'s part: PaGraph's, relabelled to
    its own rows; or DSP's/HopGNN's, with the whole graph's features and
    the mode's samplers (built in the same order on every rank: they are
    collectives)."""
    options = dm.mode_options
    try:
        if dm.mode == 'pagraph':
            features, graph, _, meta = open_rank_part(
                dm.partitions, dm.collectives, dm.feature_cache,
                method='pagraph', local=True, device=dm.device,
                num_neighbors=dm.num_neighbors, batch_size=dm.batch_size,
                progress=dm.progress, verify=dm.verify)
            dm.data = (features, graph)
        else:
            dm.dsp = open_dsp_rank(
                dm.partitions, dm.collectives, dm.feature_cache,
                device=dm.device, num_neighbors=dm.num_neighbors,
                batch_size=dm.batch_size, progress=dm.progress,
                launch_order=dm.launch_order,
                feature_centric=dm.mode == 'hopgnn', verify=dm.verify)
            meta = dm.dsp.meta
            dm.data = dm.dsp.data
            kwargs: Dict[str, Any] = {}
            if dm.mode == 'dsp':
                kwargs['layer_wise'] = options.sampling == 'layer'
            train = dict(kwargs)
            if dm.mode == 'hopgnn':
                train.update(merges=options.merges,
                             merge_search=options.merge_search)
            dm.samplers = {
                'train': dm.dsp.sampler(dm.num_neighbors, **train),
                'eval': dm.dsp.sampler(dm.eval_num_neighbors, **kwargs)}
    except (DistributedError, ValueError) as error:
        raise ConfigError('partitions', str(error)) from None
    source = meta['dataset']
    if dm.kind == 'dir' and sha256_file(
            Path(dm.source) / 'meta.json') != source['meta_sha256']:
        raise ConfigError('dataset', f"'{dm.source}' is not the dataset "
                          f"'{dm.partitions}' was partitioned from "
                          f"({source.get('path', source['name'])})")


def mode_loader_args(dm: Any, split: str, data: Any,
                     sampler: Optional[Any]) -> Tuple[Dict[str, Any], Any]:
    r"""``(extra loader arguments, transform)`` of :obj:`dm`'s mode for a
    loader of :obj:`split` over :obj:`data`."""
    extra: Dict[str, Any] = {}
    transform = dm.transform
    if sampler is not None:
        extra['sampler'] = sampler
    if dm.dsp is None or data is not dm.data:
        return extra, transform
    train = split == 'train'
    neighbor_sampler = dm.samplers['train' if train else 'eval']
    extra['neighbor_sampler'] = neighbor_sampler
    if isinstance(neighbor_sampler, RootRouter) and train:
        transform = LossNorm(dm.batch_size, transform)
        if sampler is not None:  # the merge search's epochs
            full, part = divmod(len(sampler), dm.batch_size)
            neighbor_sampler.batches_per_epoch = full + (
                1 if part and not dm.drop_last else 0)
    return extra, transform
