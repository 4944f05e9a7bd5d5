r"""Sampling ahead of the feature join, so a window-buffered cache knows the
next batches' nodes before it must evict (GIDS window buffering)."""
from __future__ import annotations

from collections import deque
from typing import Any, Callable, Iterator

__all__ = ['LookaheadIterator']


class LookaheadIterator:
    r"""Keeps up to :obj:`depth` sampled batches ahead of the one it
    returns, calling :obj:`on_sampled` when a batch enters the window and
    :obj:`join` when it leaves it.

    Args:
        iterator (Iterator): yields sampled batches in order.
        depth (int): batches sampled ahead of the current one.
        on_sampled (callable): called with every sampled batch.
        join (callable): turns a sampled batch into the final mini-batch.
    """
    def __init__(self, iterator: Iterator, depth: int,
                 on_sampled: Callable[[Any], None],
                 join: Callable[[Any], Any]):
        self.iterator = iterator
        self.depth = depth
        self.on_sampled = on_sampled
        self.join = join
        self.window: deque = deque()
        self.exhausted = False

    def __iter__(self) -> 'LookaheadIterator':
        return self

    def __next__(self) -> Any:
        while not self.exhausted and len(self.window) <= self.depth:
            try:
                out = next(self.iterator)
            except StopIteration:
                self.exhausted = True
                break
            self.on_sampled(out)
            self.window.append(out)
        if not self.window:
            raise StopIteration
        return self.join(self.window.popleft())

    def __len__(self) -> int:
        return len(self.iterator)
