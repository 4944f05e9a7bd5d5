r"""``DistributedMonitor``: counts, per rank and epoch, the training steps,
the epoch time and the bytes and messages exchanged for sampling, features
and gradients (gradients from DDP's buckets, through a counting
communication hook), and writes every rank's records to
``dist_stats.json`` in the trainer's log directory (rank 0)."""
from __future__ import annotations

import json
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytorch_lightning as pl
from pytorch_lightning.callbacks import Callback
from torch.nn.parallel import DistributedDataParallel

from pyg_fastload.distributed import (
    KINDS,
    Collectives,
    DistContext,
    DistributedError,
    TrafficCounters,
    counting_allreduce_hook,
)
from pyg_fastload.graph import stores_of
from pyg_fastload.storage import cached_and_stored, process_memory

from .errors import ConfigError

__all__ = ['DistributedMonitor', 'DIST_STATS_FILENAME']

#: The file :class:`DistributedMonitor` writes into the log directory.
DIST_STATS_FILENAME = 'dist_stats.json'

_FIELDS = ('bytes_sent', 'bytes_received', 'messages')

#: What gloo and NCCL say when a peer is gone or a collective timed out.
_COMM_FAILURES = ('Connection closed by peer', 'Connection reset',
                  'Timed out', 'timed out', 'NCCL')


class DistributedMonitor(Callback):
    r"""Per-rank step counts and traffic of every training epoch.

    With a :class:`~pyg_fastload.lightning.FastLoadDataModule` the counters are
    the data module's (its collectives count sampling and feature
    traffic); the gradient buckets are counted by a DDP communication hook
    registered at the start of fit (unless another hook is registered).
    ``records`` holds, per epoch, every rank's ``steps``, ``seconds``,
    ``peak_rss_bytes`` (its process's resident high-water mark so far,
    Linux), ``anon_bytes`` (what it allocated, resident now, at the epoch's
    end), ``rows_cached`` and ``rows_stored`` (feature rows of ``x``, of
    every node type, its own
    caches served and it read from storage, for itself and under DSP for
    the other ranks, and the other parts' cold rows it read from their
    files) and per-kind bytes and messages (the epoch's deltas).
    ``negative_pool`` (link training where a mode draws negatives among
    some nodes only, PaGraph's parts) gives per rank the nodes it draws
    them among, of the label edges' source and destination types:
    ``{'src': [pool, nodes], 'dst': [pool, nodes]}``.
    """
    def __init__(self) -> None:
        self.records: List[Dict[str, Any]] = []
        self._traffic: Optional[TrafficCounters] = None
        self._collectives: Optional[Collectives] = None
        self._steps = 0
        self._started = 0.0
        self._before: Dict[str, Dict[str, int]] = {}
        self._rows_before = (0.0, 0.0)
        self._store: Optional[Any] = None
        self._router: Optional[Any] = None
        self._negative_pool: Optional[List[Dict[str, List[int]]]] = None

    def on_fit_start(self, trainer: pl.Trainer,
                     pl_module: pl.LightningModule) -> None:
        datamodule = getattr(trainer, 'datamodule', None)
        self._traffic = getattr(datamodule, 'traffic', None) or \
            TrafficCounters()
        self._collectives = getattr(datamodule, 'collectives', None) or \
            Collectives(DistContext.current(), self._traffic)
        data = getattr(datamodule, 'data', None)
        stores = stores_of(data)
        store = None if stores is None else stores[0]
        # the rank's own tiers (what they served it and the others) and,
        # under DSP, the other parts' cold rows it read from their files
        self._store = store
        loading = getattr(datamodule, 'loading', None)
        router = getattr(loading, 'samplers', {}).get('train')
        self._router = router if hasattr(router, 'load') else None
        self._negative_pool = self._negative_pools(loading)
        model = trainer.strategy.model
        if isinstance(model, DistributedDataParallel):
            try:
                model.register_comm_hook(None, counting_allreduce_hook(
                    self._traffic, trainer.world_size))
            except RuntimeError as exc:  # a user's hook is registered
                warnings.warn(f'gradient bytes are not counted: {exc}')

    def _negative_pools(self, loading: Any
                        ) -> Optional[List[Dict[str, List[int]]]]:
        r"""Every rank's negative pools (see the class docstring), or
        :obj:`None` where negatives are drawn among all nodes."""
        task = getattr(loading, 'task', None)
        if getattr(task, 'name', None) != 'link':  # (the same on all ranks)
            return None
        weight = getattr(task.training, 'negative_weight', None)
        mine = [0] * 4 if weight is None else \
            [v for w in weight for v in (int((w > 0).sum()), w.numel())]
        table = self._collectives.all_gather_ints(
            mine, 'gather the negative pools').tolist()
        if not any(any(row) for row in table):
            return None
        return [{'src': row[:2], 'dst': row[2:]} for row in table]

    def on_train_epoch_start(self, trainer: pl.Trainer,
                             pl_module: pl.LightningModule) -> None:
        self._steps = 0
        self._started = time.perf_counter()
        self._before = self._traffic.snapshot() if self._traffic else {}
        self._rows_before = self._rows()

    def _rows(self) -> Tuple[float, float]:
        r"""``(rows of 'x' this rank's caches served, rows it read from
        storage)`` so far (of every node type's ``x`` on a heterogeneous
        graph: ``'paper.x'``, ...), for itself and, under DSP, for other
        ranks."""
        if self._store is None or not hasattr(self._store, 'stats'):
            return 0.0, 0.0
        rows = [cached_and_stored(tiers) for name, tiers in
                self._store.stats().items()
                if name.rsplit('.', 1)[-1] == 'x']
        return sum(r[0] for r in rows), sum(r[1] for r in rows)

    def on_train_batch_end(self, trainer: pl.Trainer,
                           pl_module: pl.LightningModule, outputs: Any,
                           batch: Any, batch_idx: int) -> None:
        self._steps += 1
        if self._collectives is not None:  # labels the heartbeats
            self._collectives.heartbeat(trainer.global_step)

    def on_train_epoch_end(self, trainer: pl.Trainer,
                           pl_module: pl.LightningModule) -> None:
        if self._traffic is None or self._collectives is None:
            return
        seconds = time.perf_counter() - self._started
        now = self._traffic.snapshot()
        rows = [int(a - b) for a, b in zip(self._rows(), self._rows_before)]
        memory = process_memory()  # the rank's own high-water marks
        values = [self._steps, int(seconds * 1e6), *rows,
                  memory.get('peak', 0), memory.get('anon', 0)]
        for kind in KINDS:
            values += [now[kind][f] - self._before.get(kind, {}).get(f, 0)
                       for f in _FIELDS]
        table = self._collectives.all_gather_ints(
            values, 'gather the epoch statistics').tolist()
        ranks = []
        for row in table:
            entry: Dict[str, Any] = {'steps': row[0],
                                     'seconds': row[1] / 1e6,
                                     'rows_cached': row[2],
                                     'rows_stored': row[3],
                                     'peak_rss_bytes': row[4],
                                     'anon_bytes': row[5]}
            for i, kind in enumerate(KINDS):
                entry[kind] = dict(zip(_FIELDS, row[6 + 3 * i:9 + 3 * i]))
            ranks.append(entry)
        record = {'epoch': trainer.current_epoch, 'ranks': ranks}
        if self._router is not None and self._steps:
            record['root_load'] = self._root_load()
        self.records.append(record)
        log_dir = trainer.log_dir  # collective: every rank asks
        if trainer.is_global_zero and log_dir is not None:
            self._write(Path(log_dir), trainer.world_size)

    def _root_load(self) -> Dict[str, Any]:
        r"""HopGNN: the roots each rank trained per iteration, max/mean
        over the ranks: its mean, and the share of iterations within 10%
        (the paper: 97.3% on 4 servers)."""
        # This epoch's batches are the router's last ones (the iterator
        # may start sampling before on_train_epoch_start, so no start mark).
        mine = self._router.load[-self._steps:]
        mine = [0] * (self._steps - len(mine)) + mine  # equal on every rank
        table = self._collectives.all_gather_ints(
            mine, 'gather the roots per rank').double()
        ratio = table.max(0).values / table.mean(0).clamp(min=1e-9)
        out: Dict[str, Any] = {
            'roots': int(table.sum()), 'max_over_mean': float(ratio.mean()),
            'within_10_percent': float((ratio <= 1.1).double().mean())}
        # Feature locality of the micrographs so far, over all ranks
        stats = self._router.stats()
        keys = ('rows', 'local', 'remote', 'remote_per_step', 'requests',
                'requests_per_step')
        total = self._collectives.all_gather_ints(
            [int(stats[k]) for k in keys], 'gather the locality').sum(0)
        local = dict(zip(keys, total.tolist()))
        local['local_hit_rate'] = local['local'] / max(local['rows'], 1)
        local['pregather_rows_saved'] = \
            local['remote_per_step'] / max(local['remote'], 1)
        local['pregather_requests_saved'] = \
            local['requests_per_step'] / max(local['requests'], 1)
        out['micrographs'] = local
        out['time_steps'] = stats['time_steps']
        if 'search' in stats:
            out['merge_search'] = stats['search']
        return out

    def on_exception(self, trainer: pl.Trainer,
                     pl_module: pl.LightningModule,
                     exception: BaseException) -> None:
        r"""A rank's own failure is told to the other ranks (their next
        collective names it); a rank stopped by a communication failure
        says which rank failed, or when it last heard from each."""
        if self._collectives is None or trainer.world_size == 1:
            return
        rank = trainer.global_rank
        if isinstance(exception, KeyboardInterrupt):  # not a failure
            self._collectives.report_failure('interrupted (Ctrl-C)')
            return
        if isinstance(exception, ConfigError):  # the command prints it
            self._collectives.report_failure(
                f"config key '{exception.config_key}': {exception.detail}")
            return
        text = f'{type(exception).__name__}: {exception}'
        if not isinstance(exception, DistributedError) and \
                not any(mark in str(exception) for mark in _COMM_FAILURES):
            self._collectives.report_failure(text)
            message = f'rank {rank} failed ({text[:200]}); told the others'
        else:
            failed = self._collectives.failed_ranks()
            message = f'rank {rank} stopped: ' + (
                'failed: ' + '; '.join(failed) if failed else
                'no rank reported a failure (killed?); ' +
                ('; '.join(self._collectives.last_heard()) or
                 'no heartbeat yet'))
        print(f'pyg-fastload: {message}', file=sys.stderr, flush=True)

    def _write(self, log_dir: Path, world_size: int) -> None:
        path = log_dir / DIST_STATS_FILENAME
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix('.tmp')
        stats: Dict[str, Any] = {'world_size': world_size}
        if self._negative_pool is not None:
            stats['negative_pool'] = self._negative_pool
        stats['epochs'] = self.records
        tmp.write_text(json.dumps(stats, indent=2))
        tmp.replace(path)
