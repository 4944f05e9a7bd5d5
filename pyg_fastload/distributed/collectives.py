r"""Every collective pyg_fastload issues, each bounded by the context's
timeout and counted: agreeing on a number, gathering a few ints from every
rank, and exchanging variable-sized tensors with every other
rank (one message per peer).

All ranks must call the same collectives in the same order (the loaders
call them in lockstep). A collective that does not complete within the
timeout, or fails because a peer died, raises :class:`DistributedError`
naming the operation and any rank that reported its own failure
(:meth:`Collectives.report_failure`)."""
from __future__ import annotations

import hashlib
import math
from typing import Any, Callable, List, Optional, Sequence

import torch
import torch.distributed as dist
from torch import Tensor

from ..compat import process_group_store
from .context import DistContext, DistributedError
from .counters import TrafficCounters
from .heartbeat import FAILED as _FAILED, Heartbeat, silence_for

__all__ = ['Collectives', 'digest']


def digest(text: str) -> int:
    r"""A positive 63-bit digest of :obj:`text`: what ranks gather to
    compare strings in one collective (0 is free to mean "failed")."""
    value = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8],
                           'little') >> 1
    return value or 1



class Collectives:
    r"""The collectives of one rank.

    Args:
        context (DistContext): rank, world size and timeout.
        counters (TrafficCounters, optional): where traffic is counted.
        device (torch.device, optional): where tensors travel (default:
            the current CUDA device under NCCL, else the CPU).
        group (optional): the process group (default: the world's). Stages
            that issue collectives concurrently (sampling, feature loading,
            DDP's gradients) each need their own, so their collectives
            never interleave, unless they share a
        coordinator (LaunchCoordinator, optional): which launches each
            :meth:`exchange` in the leader's order, with the id ``(batch,
            stage, 0, phase)``: the batch counted by :meth:`begin_batch`,
            the phase by the exchanges within it.
        stage (int): this stage's number in those ids.
    """
    def __init__(self, context: DistContext,
                 counters: Optional[TrafficCounters] = None,
                 device: Optional[torch.device] = None,
                 group: Optional[Any] = None,
                 coordinator: Optional[Any] = None, stage: int = 0):
        self.context = context
        self.group = group
        self.coordinator = coordinator
        self.stage = stage
        self._batch = -1
        self._phase = 0
        self._heartbeat: Optional[Heartbeat] = None
        self.counters = counters if counters is not None \
            else TrafficCounters()
        if device is None:  # NCCL moves CUDA tensors only
            nccl = dist.is_initialized() and dist.get_backend() == 'nccl'
            device = torch.device('cuda', torch.cuda.current_device()) \
                if nccl else torch.device('cpu')
        self.device = torch.device(device)
        if context.is_distributed and not dist.is_initialized():
            raise DistributedError(
                f'world size {context.world_size} but no process group: '
                f'launch with torchrun or a Lightning DDP strategy')

    def new_stage(self) -> 'Collectives':
        r"""Collectives of the same ranks on a process group of their own
        (a collective: every rank calls it, in the same order), on gloo
        with CPU tensors whatever the world's backend: a stage runs in a
        loader thread beside the training step, and NCCL documents
        collectives of several communicators issued from several threads
        as unsafe (a hang), so under DDP on GPUs NCCL carries the gradients
        alone."""
        cpu = torch.device('cpu')
        if not self.context.is_distributed:
            return Collectives(self.context, self.counters, cpu)
        group = dist.new_group(timeout=self.context.timeout, backend='gloo')
        return Collectives(self.context, self.counters, cpu, group)

    @property
    def rank(self) -> int:
        return self.context.rank

    @property
    def world_size(self) -> int:
        return self.context.world_size

    # Failure reporting #######################################################

    def report_failure(self, message: str) -> None:
        r"""Tells the other ranks (through the process group's store) that
        this rank failed, so their next collective names it."""
        if not self.context.is_distributed:
            return
        try:
            store = process_group_store()
            store.set(f'{_FAILED}{self.rank}', message[:500])
        except Exception:  # the store may be gone too: nothing to tell
            pass

    def failed_ranks(self) -> List[str]:
        r"""``'rank R: message'`` for every rank that reported a failure."""
        found = []
        try:
            store = process_group_store()
            for rank in range(self.world_size):
                key = f'{_FAILED}{rank}'
                if rank != self.rank and store.check([key]):
                    found.append(f'rank {rank}: '
                                 f'{store.get(key).decode(errors="replace")}')
        except Exception:
            pass
        return found

    def start_heartbeat(self, silence: Optional[float] = None) -> None:
        r"""Starts this rank's heartbeat thread (:class:`Heartbeat`): a rank
        silent for :obj:`silence` seconds (default: :func:`silence_for` the
        timeout) is named, killed if it runs on this machine, and this rank
        stops, long before a collective's timeout would end it."""
        if not self.context.is_distributed or self._heartbeat is not None:
            return
        store = process_group_store()
        self._heartbeat = Heartbeat(
            store, self.rank, self.world_size,
            silence or silence_for(self.context.timeout.total_seconds()))
        self._heartbeat.start()

    def stop_heartbeat(self) -> None:
        r"""Stops the heartbeat, telling the others this rank is done."""
        if self._heartbeat is not None:
            self._heartbeat.stop()
            self._heartbeat = None

    def heartbeat(self, step: int) -> None:
        r"""Records the step this rank reached (named with its beats)."""
        if self._heartbeat is not None:
            self._heartbeat.step = step

    def last_heard(self) -> List[str]:
        r"""``'rank R: last heard N s ago at step S'`` for every other rank
        this rank's heartbeat has heard, the longest silent first."""
        if self._heartbeat is None:
            return []
        return self._heartbeat.last_heard()

    def wait(self, op: str, work: dist.Work) -> None:
        r"""Waits for the collective :obj:`work` (named :obj:`op`) within
        the timeout; a failure names the op and the failed or silent
        ranks."""
        try:
            work.wait(self.context.timeout)
        except Exception as exc:  # RuntimeError/DistBackendError
            failed = self.failed_ranks()
            seconds = self.context.timeout.total_seconds()
            heard = self.last_heard()
            cause = ('; failed: ' + '; '.join(failed)) if failed else (
                '; no rank reported a failure: a rank was killed, hangs, or '
                'takes another path' + (f" ({'; '.join(heard)})" if heard
                                        else ''))
            raise DistributedError(
                f"rank {self.rank}: collective '{op}' did not complete "
                f"within {seconds:g}s ({type(exc).__name__}: "
                f"{str(exc).splitlines()[0][:200]}){cause}") from None

    # Collectives #############################################################

    def all_reduce(self, value: Tensor, op: str,
                   reduce: dist.ReduceOp = dist.ReduceOp.SUM) -> Tensor:
        r"""``value`` reduced over the ranks (a new tensor)."""
        out = value.to(self.device).clone()
        if self.context.is_distributed:
            self.wait(op, dist.all_reduce(out, reduce, group=self.group,
                                              async_op=True))
            size = out.numel() * out.element_size()
            self.counters.add('control', size, size, self.world_size - 1)
        return out.cpu()

    def max_int(self, value: int, op: str) -> int:
        r"""The largest :obj:`value` over the ranks."""
        return int(self.all_reduce(torch.tensor([value]), op,
                                   dist.ReduceOp.MAX))

    def all_gather_ints(self, values: Sequence[int], op: str) -> Tensor:
        r"""``[world_size, len(values)]``: every rank's :obj:`values`."""
        mine = torch.tensor(list(values), dtype=torch.long,
                            device=self.device)
        if not self.context.is_distributed:
            return mine.view(1, -1).cpu()
        out = [torch.empty_like(mine) for _ in range(self.world_size)]
        self.wait(op, dist.all_gather(out, mine, group=self.group,
                                       async_op=True))
        size = mine.numel() * mine.element_size()
        self.counters.add('control', size * (self.world_size - 1),
                          size * (self.world_size - 1), self.world_size - 1)
        return torch.stack(out).cpu()

    def _launch(self, start: Callable[[], dist.Work]) -> dist.Work:
        r"""Starts a collective (:obj:`start` returns its work handle):
        at once, or when the coordinator's order reaches it."""
        if self.coordinator is None:
            return start()
        cid = (self._batch, self.stage, 0, self._phase)
        self._phase += 1
        return self.coordinator.run(cid, start)

    def begin_batch(self) -> None:
        r"""The stage starts its next batch (ids of ordered launches)."""
        self._batch += 1
        self._phase = 0

    def exchange(self, send: Sequence[Tensor], kind: str,
                 op: str) -> List[Tensor]:
        r"""Sends ``send[r]`` to rank ``r`` and returns what every rank sent
        here (``out[r]`` from rank ``r``): one all-to-all of the counts,
        one of the rows. Every tensor has the same dtype and trailing
        shape on every rank. With a coordinator, each all-to-all is
        launched in its order (ids ``(batch, stage, 0, phase)``) and
        awaited here, so other stages' collectives launch meanwhile."""
        if len(send) != self.world_size:
            raise ValueError(f"'send' needs {self.world_size} tensors (one "
                             f"per rank), got {len(send)}")
        if not self.context.is_distributed:
            return [send[0]]
        counts = torch.tensor([t.size(0) for t in send], device=self.device)
        got = torch.empty_like(counts)
        self.wait(f'{op}: counts', self._launch(
            lambda: dist.all_to_all_single(got, counts, group=self.group,
                                           async_op=True)))
        sizes_in, sizes_out = got.tolist(), counts.tolist()
        flat = torch.cat([t.to(self.device) for t in send])
        out = flat.new_empty((sum(sizes_in), *flat.shape[1:]))
        self.wait(op, self._launch(
            lambda: dist.all_to_all_single(out, flat, sizes_in, sizes_out,
                                           group=self.group,
                                           async_op=True)))
        row = math.prod(flat.shape[1:]) * flat.element_size()
        mine = self.rank
        self.counters.add(
            kind, sent=row * (sum(sizes_out) - sizes_out[mine]),
            received=row * (sum(sizes_in) - sizes_in[mine]),
            messages=sum(1 for r, c in enumerate(sizes_out)
                         if r != mine and c))
        return list(out.cpu().split(sizes_in))
