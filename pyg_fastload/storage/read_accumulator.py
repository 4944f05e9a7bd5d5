r"""GIDS's storage access accumulator for direct reads (GIDS sections 3.2
and 4.2, Eq. 2-3), with CPU reader threads in place of GPU threads.

A storage submission (one batch's reads, issued together) pays a fixed
cost, starting and draining the reads, besides the reads themselves at the
device's peak rate. A small batch's submission is mostly that fixed cost.
The accumulator models the time of a submission of ``n`` reads as
``overhead + n / peak`` (fitted from timed submissions), derives the reads
a submission needs to run at a share ``p`` of the peak,
``peak * overhead * p / (1 - p)``, and when the batch being gathered reads
fewer, merges the storage rows of the next batches (already sampled by the
loader's look-ahead) into the same submission; their rows wait in a staged
buffer, bounded in bytes, until those batches are gathered.

Rows served by the host buffer or a static device cache never reach
storage ("redirected" accesses in GIDS): only the rows that miss them count
towards the threshold, which is GIDS's threshold raised by the redirected
accesses.
"""
from __future__ import annotations

import math
import threading
from collections import deque
from dataclasses import dataclass
from typing import Deque, Dict, Optional, Protocol, Sequence, Tuple

import torch
from torch import Tensor

from .tier_counters import TierCounters

__all__ = ['AccessModel', 'StorageAccumulator', 'Submissions']


class Submissions(Protocol):
    r"""What the accumulator reads through: a direct storage tier's
    submissions of sorted distinct rows
    (:class:`~pyg_fastload.storage.DirectStorage`)."""
    counters: TierCounters

    @property
    def row_bytes(self) -> int:
        r"""Bytes of one row."""

    def read_direct(self, rows: Tensor, out: Tensor,
                    requests: Optional[int] = None) -> None:
        r"""Reads sorted distinct :obj:`rows` into :obj:`out` in one
        submission."""

    def count_reads(self, rows: Tensor) -> int:
        r"""Reads a submission of sorted distinct :obj:`rows` issues."""

    def probe(self, count: int,
              generator: torch.Generator) -> Tuple[int, float]:
        r"""Times one uncounted submission of up to :obj:`count` random
        rows: ``(reads, seconds)``."""


class AccessModel:
    r"""The time of one storage submission of ``n`` reads,
    ``overhead + n / peak`` (GIDS Eq. 2-3: the initial and termination
    phases make the overhead, the steady phase runs at the peak rate),
    fitted by least squares over the last :obj:`window` submissions of
    each size class (reads within a factor of two: a run of similar
    batches does not crowd out the probe's spread of sizes), or given.

    Args:
        peak (float, optional): reads per second at the peak (with
            :obj:`overhead`: a fixed model, never refitted).
        overhead (float, optional): seconds a submission adds.
        window (int): submissions the fit keeps per size class.
    """
    def __init__(self, peak: Optional[float] = None,
                 overhead: Optional[float] = None, window: int = 8):
        if (peak is None) != (overhead is None):
            raise ValueError("give both 'peak' and 'overhead', or neither")
        if peak is not None and (peak <= 0 or overhead < 0):
            raise ValueError(f"'peak' = {peak} must be > 0 and "
                             f"'overhead' = {overhead} >= 0")
        self.fixed = peak is not None
        self.peak, self.overhead = peak, overhead
        self.window = window
        self._seen: Dict[int, Deque[Tuple[int, float]]] = {}

    @property
    def fitted(self) -> bool:
        return self.peak is not None

    def observe(self, reads: int, seconds: float) -> None:
        r"""One submission of :obj:`reads` reads took :obj:`seconds`."""
        if self.fixed or reads < 1 or seconds <= 0:
            return
        self._seen.setdefault(reads.bit_length(), deque(
            maxlen=self.window)).append((reads, seconds))
        seen = [pair for kept in self._seen.values() for pair in kept]
        sizes = [n for n, _ in seen]
        if min(sizes) == max(sizes):
            return
        count = len(seen)
        mean_n = sum(sizes) / count
        mean_t = sum(t for _, t in seen) / count
        cov = sum((n - mean_n) * (t - mean_t) for n, t in seen)
        var = sum((n - mean_n) ** 2 for n in sizes)
        slope = cov / var
        if slope <= 0:  # noise swamped the reads' cost: keep the last fit
            return
        self.peak = 1.0 / slope
        self.overhead = max(mean_t - slope * mean_n, 0.0)

    def reset(self) -> None:
        r"""Forgets a fitted model (the reads in flight changed)."""
        if not self.fixed:
            self._seen.clear()
            self.peak = self.overhead = None

    def rate(self, reads: int) -> float:
        r"""Reads per second a submission of :obj:`reads` reads achieves."""
        return reads / (self.overhead + reads / self.peak)

    def required(self, share: float) -> int:
        r"""Reads one submission needs to run at :obj:`share` of the peak
        (``share = (n / peak) / (overhead + n / peak)`` solved for ``n``)."""
        if not self.fitted:
            raise RuntimeError('the access model is not fitted yet')
        return math.ceil(self.peak * self.overhead * share / (1 - share))


def _same(announced: Tensor, ids: Tensor) -> bool:
    r"""Whether :obj:`ids` are the node ids of the batch :obj:`announced`
    (the same tensor, as the loader passes, or equal ones)."""
    return announced is ids or (announced.shape == ids.shape
                                and torch.equal(announced, ids))


@dataclass
class _Batch:
    ids: Tensor  # the node ids announced (retire() passes them again)
    rows: Tensor  # its sorted storage rows (what the static caches miss)
    reads: int  # the reads they take
    merged: bool = False  # read ahead in an earlier batch's submission


class StorageAccumulator:
    r"""GIDS's storage access accumulator of one
    :class:`~pyg_fastload.storage.DirectStorage` (which makes it when the
    store's read-ahead is set): when the batch being
    gathered needs fewer storage reads than :meth:`AccessModel.required`
    for :obj:`share` of the peak, the storage rows of announced batches
    join its submission until there are enough (at most
    :obj:`max_batches` batches in all, :obj:`max_bytes` bytes staged) and
    wait in a staged buffer until those batches are gathered, if the
    model promises at least :obj:`min_gain` more reads per second. A new
    merge starts only once the staged batches are gathered.

    The loader announces every sampled batch (:meth:`announce`, sampling
    thread) and retires it before gathering it (:meth:`retire`, loading
    thread); rows are the same whether they come from a merged submission,
    the staged buffer or a read of their own.

    Args:
        max_batches (int): the most batches one submission serves.
        max_bytes (int): bytes the staged rows may hold.
        share (float): the share ``p`` of the peak read rate aimed at.
        min_gain (float): the least relative gain in read rate the model
            must promise for a merge (staging rows costs CPU work that
            GIDS's GPU threads hide).
        model (AccessModel, optional): the access model (default: fitted
            from the storage's submissions, after a probe of
            :obj:`probe_sizes` random reads, each size
            :obj:`probe_rounds` times).
        probe_sizes (Sequence[int]): reads per probe submission.
        probe_rounds (int): submissions per probe size.
    """
    def __init__(self, max_batches: int, max_bytes: int,
                 share: float = 0.95, min_gain: float = 0.1,
                 model: Optional[AccessModel] = None,
                 probe_sizes: Sequence[int] = (4, 16, 64, 256, 1024),
                 probe_rounds: int = 3):
        if isinstance(max_batches, bool) or not isinstance(max_batches,
                                                           int) \
                or max_batches < 1:
            raise ValueError(f"'max_batches' = {max_batches!r} must be an "
                             f"int >= 1")
        if max_bytes < 1:
            raise ValueError(f"'max_bytes' = {max_bytes!r} must be >= 1")
        if not 0 < share < 1:
            raise ValueError(f"'share' = {share!r} must lie in (0, 1), "
                             f"e.g. 0.95 for 95% of the peak read rate")
        self.max_batches, self.max_bytes, self.share = (max_batches,
                                                        max_bytes, share)
        self.min_gain = min_gain
        self.model = model if model is not None else AccessModel()
        self.probe_sizes, self.probe_rounds = tuple(probe_sizes), probe_rounds
        self._queue: Deque[_Batch] = deque()
        self._lock = threading.Lock()  # announce() runs in another thread
        self._merged_left = 0  # staged batches not yet retired
        self._staged_rows = torch.empty(0, dtype=torch.long)
        self._staged: Optional[Tensor] = None
        self.counts: Dict[str, int] = dict.fromkeys(
            ('submissions', 'merged_submissions', 'merged_batches',
             'staged_rows', 'staged_served', 'redirected', 'announced'), 0)

    # The loader's look-ahead #################################################

    def announce(self, ids: Tensor, rows: Tensor, reads: int,
                 redirected: int) -> None:
        r"""A sampled batch (node :obj:`ids`) will read the sorted distinct
        storage :obj:`rows` in :obj:`reads` reads; the caches serve
        :obj:`redirected` of its rows."""
        with self._lock:
            self._queue.append(_Batch(ids, rows, reads))
            self.counts['announced'] += 1
            self.counts['redirected'] += redirected

    def retire(self, ids: Tensor) -> None:
        r"""The batch announced with :obj:`ids` is gathered next; batches
        announced before it and never retired (an epoch left early) are
        dropped. The staged rows go once every staged batch is gathered."""
        with self._lock:
            at = next((i for i, batch in enumerate(self._queue)
                       if _same(batch.ids, ids)), None)
            merged = False
            if at is not None:  # else not announced (no look-ahead)
                for _ in range(at + 1):
                    batch = self._queue.popleft()
                    self._merged_left -= batch.merged
                merged = batch.merged
            if not merged and self._merged_left == 0:
                self._staged_rows = self._staged_rows[:0]
                self._staged = None

    # Reading #################################################################

    def read(self, storage: Submissions, rows: Tensor, out: Tensor,
             requests: Optional[int] = None) -> None:
        r"""Reads sorted distinct :obj:`rows` of :obj:`storage` into
        :obj:`out`: staged rows from the staged buffer, the others in one
        submission that may carry the next batches' rows (counted as
        :obj:`requests` requested rows, default one per row)."""
        counters = storage.counters
        if requests is not None:
            counters.requests += requests - rows.numel()
        miss_at = None
        if self._staged_rows.numel() and rows.numel():
            at = torch.searchsorted(self._staged_rows, rows).clamp_(
                max=max(self._staged_rows.numel() - 1, 0))
            hit = self._staged_rows.index_select(0, at) == rows
            hit_at = hit.nonzero().view(-1)
            if hit_at.numel():
                out.index_copy_(0, hit_at.to(out.device),
                                self._staged.index_select(
                                    0, at.index_select(0, hit_at).to(
                                        self._staged.device)))
                counters.requests += hit_at.numel()
                self.counts['staged_served'] += hit_at.numel()
                miss_at = (~hit).nonzero().view(-1)
                rows = rows.index_select(0, miss_at)
        if rows.numel() == 0:
            return
        later = self._plan(storage, rows)
        if later is None and miss_at is None:
            storage.read_direct(rows, out)
            self.counts['submissions'] += 1
            return
        union = rows if later is None else torch.unique(
            torch.cat([rows, later]))
        block = torch.empty((union.numel(), *out.shape[1:]),
                            dtype=out.dtype, device=out.device)
        storage.read_direct(union, block, requests=rows.numel())
        self.counts['submissions'] += 1
        mine = torch.searchsorted(union, rows)
        target = (torch.arange(rows.numel()) if miss_at is None
                  else miss_at)
        out.index_copy_(0, target.to(out.device),
                        block.index_select(0, mine.to(block.device)))
        if later is not None:
            staged = torch.searchsorted(union, later)
            self._staged_rows = later
            self._staged = block.index_select(0, staged.to(block.device))
            self.counts['staged_rows'] += later.numel()

    def _plan(self, storage: Submissions,
              rows: Tensor) -> Optional[Tensor]:
        r"""The sorted distinct rows of the next announced batches to read
        along with :obj:`rows` and stage, or :obj:`None`."""
        with self._lock:
            if self._merged_left or not self._queue or \
                    self.max_batches < 2:
                return None
            waiting = list(self._queue)[:self.max_batches - 1]
        if not self.model.fitted:
            self.probe(storage)
            if not self.model.fitted:
                return None
        need = self.model.required(self.share)
        own = reads = storage.count_reads(rows)
        if reads >= need:
            return None
        staged, chosen = 0, []  # rows and reads counted once per batch
        for batch in waiting:
            staged += batch.rows.numel()
            if staged * storage.row_bytes > self.max_bytes:
                break
            chosen.append(batch)
            reads += batch.reads
            if reads >= need:
                break
        if not chosen or self.model.rate(reads) < \
                (1 + self.min_gain) * self.model.rate(own):
            return None  # not worth the staging
        with self._lock:
            for batch in chosen:
                batch.merged = True
            self._merged_left = len(chosen)
        self.counts['merged_submissions'] += 1
        self.counts['merged_batches'] += len(chosen)
        return torch.unique(torch.cat([batch.rows for batch in chosen]))

    def probe(self, storage: Submissions, seed: int = 0) -> None:
        r"""Fits the access model from timed submissions of random reads
        of :obj:`storage` (not counted as reads of the batches)."""
        generator = torch.Generator().manual_seed(seed)
        for _ in range(self.probe_rounds):
            for size in self.probe_sizes:
                reads, seconds = storage.probe(size, generator)
                self.model.observe(reads, seconds)

    def reset_counts(self) -> None:
        r"""Zeroes the counts of :meth:`stats` (not the model)."""
        self.counts = dict.fromkeys(self.counts, 0)

    def stats(self) -> Dict[str, float]:
        r"""Submissions, merges and the model: ``submissions`` (storage
        submissions), ``merged_submissions`` (those that carried later
        batches' rows), ``merged_batches`` (batches read ahead that way),
        ``staged_rows`` / ``staged_served`` (rows read ahead / served from
        the staged buffer), ``redirected`` (announced rows the caches
        serve), ``announced`` (batches), ``staged_bytes`` (held now),
        ``required_reads``, ``peak_reads_per_s`` and ``overhead_s`` (the
        model; 0 before it is fitted)."""
        out: Dict[str, float] = dict(self.counts)
        staged = self._staged
        out['staged_bytes'] = 0 if staged is None else (
            staged.numel() * staged.element_size())
        fitted = self.model.fitted
        out['required_reads'] = (self.model.required(self.share) if fitted
                                 else 0)
        out['peak_reads_per_s'] = self.model.peak if fitted else 0.0
        out['overhead_s'] = self.model.overhead if fitted else 0.0
        return out
