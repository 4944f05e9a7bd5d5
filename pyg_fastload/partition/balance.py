r"""Balancing the training nodes of a partition by swaps along the boundary
(what :mod:`.methods`' METIS and :mod:`.bounded`'s out-of-core METIS do
after METIS balanced all nodes)."""
from __future__ import annotations

import numpy as np

__all__ = ['TRAIN_TOLERANCE', 'balance_train']


#: The most training nodes a part may hold after :func:`balance_train`,
#: over their mean (METIS's default load imbalance, ``ufactor`` 30).
TRAIN_TOLERANCE = 1.03


def balance_train(owner: np.ndarray, xadj: np.ndarray, adjncy: np.ndarray,
                  train: np.ndarray, num_parts: int,
                  tolerance: float = TRAIN_TOLERANCE,
                  chunk_edges: int = 2**22) -> np.ndarray:
    r"""Moves training nodes out of the parts holding more than
    ``ceil(tolerance * mean)`` of them, into the part holding fewest, each
    swapped with a non-training node of that part, so that every part
    keeps its node count. The training nodes with the most neighbours in
    the receiving part (less those in their own) move first, and the
    non-training nodes with the most neighbours in the giving part come
    back (ties: the smaller id), so the cut grows little. Deterministic.

    Args:
        owner (np.ndarray): the part of every node (not changed).
        xadj, adjncy: the symmetric adjacency (:func:`symmetric_adjacency`).
        train (np.ndarray): the boolean training mask.
        num_parts (int): the number of parts.
        tolerance (float): the most training nodes a part may hold, over
            their mean.
        chunk_edges (int): the most edges whose gains are counted at once
            (the candidates' lists, in chunks).
    """
    owner = owner.copy()
    train = np.asarray(train, dtype=bool)
    mean = int(train.sum()) / num_parts
    cap = max(int(np.ceil(mean * tolerance)), int(np.ceil(mean)))

    def chunk_gain(nodes: np.ndarray, take: int, give: int) -> np.ndarray:
        # neighbours of each node in part `take` less those in `give`,
        # over the candidates' edges alone
        start, degree = xadj[nodes], xadj[nodes + 1] - xadj[nodes]
        first = np.cumsum(degree) - degree
        edges = np.repeat(start - first, degree) + np.arange(degree.sum())
        near = owner[adjncy[edges]]
        score = (near == take).astype(np.int8) - (near == give)
        which = np.repeat(np.arange(nodes.size), degree)
        return np.bincount(which, score, nodes.size).astype(np.int64)

    def gain(nodes: np.ndarray, take: int, give: int) -> np.ndarray:
        # in chunks of candidates holding at most `chunk_edges` edges
        # (one candidate at least)
        end = np.cumsum(xadj[nodes + 1] - xadj[nodes])
        score, begin = np.empty(nodes.size, dtype=np.int64), 0
        while begin < nodes.size:
            stop = max(begin + 1, int(np.searchsorted(
                end, end[begin - 1] + chunk_edges if begin else chunk_edges,
                'right')))
            score[begin:stop] = chunk_gain(nodes[begin:stop], take, give)
            begin = stop
        return score

    for _ in range(num_parts * num_parts):
        counts = np.bincount(owner[train], minlength=num_parts)
        give = int(np.argmax(counts))
        if counts[give] <= cap:
            break
        take = int(np.argmin(counts))
        wanted = int(min(counts[give] - cap, cap - counts[take]))
        out = np.flatnonzero(train & (owner == give))
        back = np.flatnonzero(~train & (owner == take))
        out = out[np.argsort(-gain(out, take, give), kind='stable')[:wanted]]
        back = back[np.argsort(gain(back, take, give),
                               kind='stable')[:out.size]]
        owner[out] = take
        owner[back] = give
    return owner
