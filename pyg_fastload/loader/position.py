r"""Where a loader stands in its epochs (:class:`EpochPosition`), what
Lightning's stateful-loader protocol (``state_dict`` / ``load_state_dict``,
saved by ``ModelCheckpoint``) keeps of it, so that a run resumed from a
checkpoint taken mid-epoch draws the batches the uninterrupted run would
have drawn from there on.

An epoch's batches follow from its random draws alone (the index sampler's
permutation and the seed of every batch's stream, drawn when the epoch
starts), so the position is the random stream's state before some epoch,
the epochs drawn from it since, and the batches of the last one the
consumer took. A resumed loader sets its stream to that state, draws the
epochs again (draws only: nothing is sampled) and skips the batches taken:
batches sampled ahead but not taken (a pipeline's queues) are sampled
again, never lost. The state is the same on every rank of a run (the
ranks' streams start from one seed and take the same number of epochs and
batches), although the ranks' streams diverge (each permutes its own
seeds): so rank 0's checkpoint resumes every rank."""
from __future__ import annotations

from typing import Any, Dict, Optional

import torch

__all__ = ['EpochPosition']


class EpochPosition:
    r"""A loader's place in its epochs.

    Args:
        own_stream (bool): the loader draws from a generator of its own
            (its state before the first epoch is kept, the epochs since are
            drawn again on resume); else from torch's global generator,
            which other code draws from between epochs (its state before
            the last epoch is kept).
    """
    def __init__(self, own_stream: bool):
        self.own_stream = own_stream
        #: The stream's state before :attr:`epochs` epochs were drawn.
        self.start: Optional[torch.Tensor] = None
        self.epochs = 0
        #: Batches of the last epoch drawn, and those of the epochs before.
        self.size = 0
        self.before = 0
        #: Batches of the last epoch taken before a resume (not drawn).
        self.skipped = 0
        #: The consumer's counts of the last epoch (``'batches'`` taken).
        self.counts: Dict[str, float] = {'batches': 0}
        #: Batches the next epoch skips (a resumed position).
        self.resume_at = 0

    def begin(self, stream: torch.Generator) -> None:
        r"""An epoch's draws from :obj:`stream` start."""
        if self.start is None or not self.own_stream:
            self.start, self.epochs = stream.get_state(), 0

    def drawn(self, size: int, counts: Dict[str, float]) -> int:
        r"""The epoch holds :obj:`size` batches, whose consumer counts
        those it takes in :obj:`counts`; returns how many it skips."""
        self.before += self.size
        self.epochs += 1
        self.size, self.counts = size, counts
        self.skipped, self.resume_at = min(self.resume_at, size), 0
        return self.skipped

    @property
    def taken(self) -> int:
        r"""Batches of the last epoch drawn the consumer took."""
        return self.skipped + int(self.counts['batches'])

    def state(self, stream: torch.Generator) -> Dict[str, Any]:
        r"""``generator`` (the stream's state to draw from), ``epochs``
        (epochs to draw from it before the current one), ``batches`` (of
        the current one, taken) and ``sampled`` (batches taken in all,
        those of every epoch before the current one included)."""
        if self.start is None:  # nothing drawn yet
            return {'generator': stream.get_state(), 'epochs': 0,
                    'batches': 0, 'sampled': 0}
        if self.taken < self.size:  # mid-epoch
            return {'generator': self.start, 'epochs': self.epochs - 1,
                    'batches': self.taken, 'sampled': self.before +
                    self.taken}
        return {'generator': self.start, 'epochs': self.epochs,
                'batches': 0, 'sampled': self.before + self.size}

    def restore(self, state: Dict[str, Any]) -> None:
        r"""Continues from :obj:`state` (after its epochs were drawn
        again): the next epoch skips the batches taken."""
        self.start, self.epochs = state['generator'], state['epochs']
        self.before = state['sampled'] - state['batches']
        self.size = self.skipped = 0
        self.counts = {'batches': 0}
        self.resume_at = state['batches']
