r"""``LoaderMonitor``: a Lightning callback that logs what the training loader
did each epoch (throughput, the loader's time breakdown, the feature store's
cache hit ratios) and writes the per-epoch records as JSON for
``pyg-fastload report``."""
from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytorch_lightning as pl
import torch.distributed as dist
from pytorch_lightning.callbacks import Callback
from pytorch_lightning.utilities import CombinedLoader
from torch.utils.data import DataLoader

from pyg_fastload.graph import is_data, stores_of
from pyg_fastload.storage import FeatureSource, process_memory

from .stats_summary import (Stats, add_counters, combine_ranks,
                            counter_delta, rate, summarize,
                            with_hit_ratios)
from .summary_text import format_summary

__all__ = [
    'LoaderMonitor',
    'NOT_SECONDS',
    'STATS_FILENAME',
    'STATS_FORMAT',
    'STATS_FORMAT_VERSION',
]

#: The file :class:`LoaderMonitor` writes into the trainer's log directory.
STATS_FILENAME = 'fastload_stats.json'
STATS_FORMAT = 'pyg-fastload-stats'
STATS_FORMAT_VERSION = 1

#: ``time_breakdown`` entries that are not seconds: logged as
#: ``loader/<key>`` instead of ``time/<key>``.
NOT_SECONDS = frozenset({'batches', 'run_ahead'})

#: The public attributes through which wrappers commonly expose the loader
#: they wrap.
_WRAPPER_ATTRS = ('loader', 'dataloader')


def _leaf_loaders(obj: Any, depth: int = 0) -> Iterator[Any]:
    r"""The loaders inside :obj:`obj` (a loader, a list/tuple/dict of them,
    a ``CombinedLoader`` or a wrapper with a public ``loader`` or
    ``dataloader``), depth first."""
    if obj is None or depth > 4:
        return
    if hasattr(obj, 'time_breakdown') or isinstance(obj, DataLoader):
        yield obj
    elif isinstance(obj, CombinedLoader):
        for value in obj.flattened:
            yield from _leaf_loaders(value, depth + 1)
    elif isinstance(obj, Mapping):
        for value in obj.values():
            yield from _leaf_loaders(value, depth + 1)
    elif isinstance(obj, (list, tuple)):
        for value in obj:
            yield from _leaf_loaders(value, depth + 1)
    else:
        for name in _WRAPPER_ATTRS:
            inner = getattr(obj, name, None)
            if inner is not None and inner is not obj:
                yield from _leaf_loaders(inner, depth + 1)
                return


def _timed_loader(loaders: List[Any]) -> Optional[Any]:
    r"""The first loader with a ``time_breakdown`` dict (a
    ``FastNeighborLoader``)."""
    for loader in loaders:
        if isinstance(getattr(loader, 'time_breakdown', None), Mapping):
            return loader
    return None


def _feature_store(loaders: List[Any]) -> Optional[FeatureSource]:
    r"""The first :class:`~pyg_fastload.storage.FeatureSource` among the
    loaders' ``(feature_store, graph_store)`` data."""
    for loader in loaders:
        stores = stores_of(getattr(loader, 'data', None))
        if stores is not None and isinstance(stores[0], FeatureSource):
            return stores[0]
    return None


def _seeds(batch: Any) -> Optional[int]:
    r"""Seed nodes in a PyG mini-batch (``batch.batch_size``), summed over
    the batches of several loaders; :obj:`None` if there is none."""
    if is_data(batch, hetero=True):  # on the seeds' node type
        parts = [batch[t].batch_size for t in batch.node_types
                 if 'batch_size' in batch[t]]
    elif isinstance(batch, Mapping):
        parts = [_seeds(value) for value in batch.values()]
    elif isinstance(batch, (list, tuple)):
        parts = [_seeds(value) for value in batch]
    else:
        size = getattr(batch, 'batch_size', None)
        if isinstance(size, int) and not isinstance(size, bool):
            return size
        return None
    known = [part for part in parts if part is not None]
    return sum(known) if known else None


def _sampled(batch: Any) -> Tuple[int, int]:
    r"""``(nodes, edges)`` of a PyG mini-batch (every type's, summed), of
    the batches of several loaders together; ``(0, 0)`` for anything
    else."""
    if is_data(batch):
        return int(batch.num_nodes or 0), int(batch.num_edges or 0)
    values = batch.values() if isinstance(batch, Mapping) else \
        batch if isinstance(batch, (list, tuple)) else ()
    counts = [_sampled(value) for value in values]
    return sum(c[0] for c in counts), sum(c[1] for c in counts)


def _sampler_name(loader: Optional[Any]) -> Optional[str]:
    r"""The class name of the sampler a loader draws with, if it has
    one."""
    sampler = getattr(loader, 'node_sampler', None) or \
        getattr(loader, 'link_sampler', None)
    return None if sampler is None else type(sampler).__name__


class _EpochState:
    r"""What :class:`LoaderMonitor` gathers during one training epoch.  The
    epoch is split into training segments; validation runs between them
    and is neither timed nor counted."""
    def __init__(self, loader: Optional[Any], store: Optional[Any]):
        self.loader = loader
        self.store = store
        self.batches = 0
        self.seeds: Optional[int] = None
        self.train_time = 0.0
        self.cache: Stats = {}
        self.segment_start: Optional[float] = None
        self.segment_stats: Stats = {}
        self.last_mark = 0.0
        self.smooth_seeds = 0.0
        self.smooth_time = 0.0
        self.peak_anon = 0
        self.nodes = 0
        self.edges = 0

    def open_segment(self) -> None:
        if self.store is not None:
            self.segment_stats = self.store.stats()
        self.segment_start = self.last_mark = time.perf_counter()

    def close_segment(self) -> None:
        if self.segment_start is None:
            return
        self.train_time += time.perf_counter() - self.segment_start
        self.segment_start = None
        if self.store is not None:
            add_counters(self.cache, counter_delta(self.store.stats(),
                                                     self.segment_stats))


class LoaderMonitor(Callback):
    r"""Logs, per training epoch, what the training loader did: seeds and
    batches per second of training wall time (``throughput/*``), the
    loader's time breakdown (``time/<key>``, ``loader/<key>`` for its
    :obj:`NOT_SECONDS` entries) and, for a
    :class:`~pyg_fastload.TieredFeatureStore`, each feature attribute's
    hit ratio and bytes per tier (``cache/<attr>/<tier>/*``), through
    :meth:`LightningModule.log` (every logger gets them; a smoothed
    ``seeds/s`` is shown in the progress bar).

    At the end of :meth:`Trainer.fit`, rank zero prints a summary and writes
    the records to ``<trainer.log_dir>/fastload_stats.json``, which
    ``pyg-fastload report`` plots; in distributed runs it gathers every
    rank's records first. What each metric counts, how the training loader
    and store are found, validation inside an epoch and the distributed
    records: ``docs/guide/lightning.md``, "What ``LoaderMonitor``
    records".

    Args:
        smoothing (float, optional): the weight of the past in the
            progress-bar ``seeds/s`` (an exponential moving average of seeds
            and seconds per batch, in :math:`[0, 1)`). (default: :obj:`0.9`)
        print_summary (bool, optional): print the summary table when fit
            ends (and, before a loader's first epoch with ``pipeline=
            'auto'``, that this epoch decides it and is slower than the
            next). (default: :obj:`True`)
        filename (str, optional): the JSON file written into the log
            directory; :obj:`None` writes none.
            (default: :obj:`'fastload_stats.json'`)

    Attributes:
        records (List[Dict]): one dict per training epoch: ``epoch``,
            ``global_step``, ``batches``, ``seeds`` (:obj:`None` without
            ``batch_size``), ``train_time_s``, ``seeds_per_s``,
            ``batches_per_s``, ``loader`` (class name), ``sampler`` (its
            sampler's class name), ``sampled_nodes`` and ``sampled_edges``
            (summed over the batches, every type's), ``time`` (the
            loader's timings in seconds; empty without a ``time_breakdown``),
            ``loader_counts`` (its :obj:`NOT_SECONDS` entries), ``cache``
            (``{attr: {tier: {'requests', 'hits', 'bytes', 'pages',
            'hit_ratio'}}}`` over the epoch's training batches; a hit ratio
            for the caches only; empty without a tiered store) and
            ``places`` (``{attr: {tier: where its rows live}}``, in words);
            the epoch a fit was interrupted in has ``'partial': True``.

    Example:
        >>> import pytorch_lightning as pl
        >>> from pyg_fastload.lightning import (FastLoadDataModule,
        ...                                     LoaderMonitor, NodeClassifier)
        >>> monitor = LoaderMonitor(print_summary=False, filename=None)
        >>> trainer = pl.Trainer(max_epochs=1, accelerator='cpu',
        ...                      logger=False, callbacks=[monitor],
        ...                      enable_checkpointing=False,
        ...                      enable_progress_bar=False,
        ...                      enable_model_summary=False)
        >>> data = FastLoadDataModule('tiny', num_neighbors=[5, 5],
        ...                           batch_size=256, progress=False)
        >>> trainer.fit(NodeClassifier(hidden_channels=16), datamodule=data)
        >>> record = monitor.records[0]
        >>> record['batches'], record['seeds'], record['loader']
        (4, 1000, 'FastNeighborLoader')
    """
    def __init__(self, smoothing: float = 0.9, print_summary: bool = True,
                 filename: Optional[str] = STATS_FILENAME):
        if not (isinstance(smoothing, (int, float))
                and 0 <= smoothing < 1):
            raise ValueError(f"'smoothing' must be a float in [0, 1), got "
                             f"{smoothing!r}")
        if filename is not None and (not isinstance(filename, str)
                                     or not filename or '/' in filename):
            raise ValueError(f"'filename' must be a file name (no '/') or "
                             f"None, got {filename!r}")
        self.smoothing = float(smoothing)
        self.print_summary = print_summary
        self.filename = filename
        self.records: List[Dict[str, Any]] = []
        self._epoch: Optional[_EpochState] = None
        #: The loaders with pipeline 'auto' whose first epoch was announced.
        self._auto_loaders: List[Any] = []

    # Hooks ###################################################################

    def on_fit_start(self, trainer: pl.Trainer,
                     pl_module: pl.LightningModule) -> None:
        self.records = []
        self._epoch = None
        self._auto_loaders = []

    def on_train_epoch_start(self, trainer: pl.Trainer,
                             pl_module: pl.LightningModule) -> None:
        loaders = list(_leaf_loaders(trainer.train_dataloader))
        self._epoch = _EpochState(_timed_loader(loaders),
                                  _feature_store(loaders))
        self._announce_auto(trainer, self._epoch.loader)
        self._epoch.open_segment()

    def _announce_auto(self, trainer: pl.Trainer, loader: Any) -> None:
        r"""Says, before a loader's first epoch with ``pipeline='auto'``,
        that this epoch is slower than the next: it runs its first batches
        both ways to decide (a user timing epoch 1 is told)."""
        if getattr(loader, 'pipeline', None) != 'auto' or any(
                loader is seen for seen in self._auto_loaders):
            return
        self._auto_loaders.append(loader)
        if self.print_summary and trainer.is_global_zero:
            print("pyg-fastload: pipeline 'auto' runs this epoch's first "
                  "batches both ways (in the training loop, then in the "
                  "loader's threads) and keeps the faster, so this epoch "
                  "is slower than the next ones: time a later epoch, or "
                  "set data.pipeline_settings.pipeline true or false",
                  flush=True)

    def on_train_batch_end(self, trainer: pl.Trainer,
                           pl_module: pl.LightningModule, outputs: Any,
                           batch: Any, batch_idx: int) -> None:
        state = self._epoch
        if state is None or state.segment_start is None:
            return
        now = time.perf_counter()
        elapsed, state.last_mark = now - state.last_mark, now
        state.batches += 1
        state.peak_anon = max(state.peak_anon,
                              process_memory().get('anon', 0))
        nodes, edges = _sampled(batch)
        state.nodes += nodes
        state.edges += edges
        seeds = _seeds(batch)
        if seeds is None:
            return
        if state.seeds is None:
            state.seeds = 0
            state.smooth_seeds, state.smooth_time = seeds, elapsed
        else:
            a = self.smoothing
            state.smooth_seeds = a * state.smooth_seeds + (1 - a) * seeds
            state.smooth_time = a * state.smooth_time + (1 - a) * elapsed
        state.seeds += seeds
        if not trainer.barebones:
            pl_module.log('seeds/s', rate(state.smooth_seeds,
                                           state.smooth_time),
                          prog_bar=True, logger=False, on_step=True,
                          on_epoch=False, batch_size=1)

    def on_validation_start(self, trainer: pl.Trainer,
                            pl_module: pl.LightningModule) -> None:
        if self._epoch is not None:
            self._epoch.close_segment()

    def on_validation_end(self, trainer: pl.Trainer,
                          pl_module: pl.LightningModule) -> None:
        if self._epoch is not None:
            self._epoch.open_segment()

    def on_train_epoch_end(self, trainer: pl.Trainer,
                           pl_module: pl.LightningModule) -> None:
        state, self._epoch = self._epoch, None
        if state is None:
            return
        state.close_segment()
        record = self._record(trainer, state)
        self.records.append(record)
        if not trainer.barebones:
            # Each rank's own figures, no collective; sync_dist: no warning.
            pl_module.log_dict(self._metrics(record), on_step=False,
                               on_epoch=True, logger=bool(trainer.loggers),
                               batch_size=1, sync_dist=True,
                               rank_zero_only=True)

    def on_fit_end(self, trainer: pl.Trainer,
                   pl_module: pl.LightningModule) -> None:
        self._finish(trainer)

    def on_exception(self, trainer: pl.Trainer,
                     pl_module: pl.LightningModule,
                     exception: BaseException) -> None:
        r"""Keeps the epochs recorded before an interrupted fit and the
        steps of the epoch it stopped in (``'partial': True``), in one
        process only (finding the log directory is collective)."""
        if trainer.state.fn != 'fit' or trainer.world_size != 1:
            return
        state, self._epoch = self._epoch, None
        if state is not None and state.batches:
            state.close_segment()
            self.records.append(dict(self._record(trainer, state),
                                     partial=True))
        self._finish(trainer)

    # Records #################################################################

    def _record(self, trainer: pl.Trainer,
                state: _EpochState) -> Dict[str, Any]:
        times: Dict[str, float] = {}
        counts: Dict[str, float] = {}
        cache = with_hit_ratios({
            attr: tiers for attr, tiers in state.cache.items()
            if any(c['requests'] for c in tiers.values())})
        if state.loader is not None:
            breakdown = state.loader.time_breakdown
            if breakdown.get('batches'):  # 0: not measured (PyG's workers)
                for key, value in breakdown.items():
                    if (isinstance(value, (int, float))
                            and not isinstance(value, bool)
                            and math.isfinite(value)):
                        into = counts if key in NOT_SECONDS else times
                        into[key] = value if key in NOT_SECONDS else float(
                            value)
        return {
            'epoch': trainer.current_epoch,
            'global_step': trainer.global_step,
            'batches': state.batches,
            'seeds': state.seeds,
            'train_time_s': state.train_time,
            'seeds_per_s': (None if state.seeds is None else rate(
                state.seeds, state.train_time)),
            'batches_per_s': rate(state.batches, state.train_time),
            'loader': (None if state.loader is None else
                       type(state.loader).__name__),
            'sampler': _sampler_name(state.loader),
            # what the batches held, every type's (the sampler's work)
            'sampled_nodes': state.nodes,
            'sampled_edges': state.edges,
            'time': times,
            'loader_counts': counts,
            # resident memory the process allocated, sampled after every
            # training batch (mapped files and the page cache excluded)
            'peak_anon_bytes': state.peak_anon,
            'cache': cache,
            # where each tier's rows live ('CPU memory', 'file, ...')
            'places': {} if state.store is None else {
                attr: tiers for attr, tiers in state.store.places().items()
                if attr in cache},
        }

    @staticmethod
    def _metrics(record: Dict[str, Any]) -> Dict[str, float]:
        metrics = {'throughput/batches_per_s': record['batches_per_s'],
                   'memory/peak_anon_bytes': float(
                       record['peak_anon_bytes'])}
        if record['seeds_per_s'] is not None:
            metrics['throughput/seeds_per_s'] = record['seeds_per_s']
        for key, seconds in record['time'].items():
            metrics[f'time/{key}'] = seconds
        for key, count in record['loader_counts'].items():
            metrics[f'loader/{key}'] = float(count)
        for attr, tiers in record['cache'].items():
            for tier, counters in tiers.items():
                if counters['hit_ratio'] is not None:
                    metrics[f'cache/{attr}/{tier}/hit_ratio'] = counters[
                        'hit_ratio']
                metrics[f'cache/{attr}/{tier}/bytes'] = float(
                    counters['bytes'])
                if tier == 'storage':  # measured: what the disk read
                    metrics[f'cache/{attr}/storage/disk_bytes'] = float(
                        counters['disk_bytes'])
        return metrics

    def summary(self) -> Dict[str, Any]:
        r"""Totals over this rank's :attr:`records`: ``ranks`` (1),
        ``epochs``, ``mean_epoch_time_s``
        (training wall time per epoch), ``seeds_per_s`` and
        ``batches_per_s`` (totals over the summed training time;
        ``seeds_per_s`` is :obj:`None` without ``batch_size``),
        ``hit_ratio`` (``{attr: {cache tier: ratio}}``, summed hits over
        summed requests), ``rows_by_tier`` (``{attr: {tier: {'rows',
        'bytes'}}}``: the rows each tier served this rank, every row asked
        of storage and other ranks, other ranks' rows under ``'remote'``),
        ``places`` (where each tier's rows live, in words),
        ``peak_anon_bytes`` (the most resident memory the process had
        allocated after a training batch), ``storage_read`` (per
        attribute, rows asked of storage, the distinct rows it read and the
        bytes the disk delivered, measured),
        ``time_share_pct`` (every loader timing summed, in
        percent of the summed loader ``epoch`` time) and ``time_s`` (the
        same timings in seconds)."""
        return summarize(self.records)

    def _per_rank(self, trainer: pl.Trainer) -> List[List[Dict[str, Any]]]:
        r"""Every rank's records, rank by rank (collective in DDP)."""
        if trainer.world_size == 1 or not (dist.is_available()
                                           and dist.is_initialized()):
            return [self.records]
        gathered: List[Any] = [None] * dist.get_world_size()
        dist.all_gather_object(gathered, self.records)
        return gathered

    def _finish(self, trainer: pl.Trainer) -> None:
        # trainer.log_dir broadcasts and the records are gathered, so every
        # rank takes part.
        per_rank = self._per_rank(trainer)
        if not all(per_rank):
            return
        log_dir = None if trainer.fast_dev_run else (
            trainer.log_dir or trainer.default_root_dir)
        if not trainer.is_global_zero:
            return
        out: Dict[str, Any] = {'format': STATS_FORMAT,
                               'format_version': STATS_FORMAT_VERSION}
        if len(per_rank) == 1:
            out['summary'] = self.summary()
            out['epochs'] = self.records
        else:  # all ranks as one, and each rank's own
            out['epochs'] = combine_ranks(per_rank)
            out['summary'] = summarize(out['epochs'], ranks=len(per_rank))
            out['ranks'] = [{'rank': rank, 'summary': summarize(records),
                             'epochs': records}
                            for rank, records in enumerate(per_rank)]
        if self.print_summary:
            print(format_summary(out['summary'], [
                r['summary'] for r in out.get('ranks', [])]))
        if log_dir is not None and self.filename is not None:
            path = Path(log_dir) / self.filename
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(out, indent=1))
