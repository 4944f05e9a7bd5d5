r"""ByteGNN's GNN-tailored partitioning (GNN-P): blocks grown around the
labelled nodes, then assigned greedily for locality and train/val/test
balance.

*Blocks.* A multi-source BFS of :obj:`num_hops` hops along in-edges starts
from every training, validation and test node (the block centres, which
keep their own id); a node takes the first block id that reaches it, the
smallest id when several arrive in the same hop. Nodes no centre reaches
are blocks of their own (the notes' first suggestion).

*Assignment (Alg. 2).* Blocks are sorted by ``max(|train|, |val|, |test|)``
(descending), then by size (descending: every block holds one labelled node,
so the first key alone is degenerate), then by centre id; each block ``B``
goes to the part ``j`` maximising::

    CE[j] * BS[j],  CE[j] = edges(P_j -> B) / (|P_j| + 1),
    BS[j] = 1 - alpha |P_j(train)| / C(train) - beta |P_j(val)| / C(val)
              - gamma |P_j(test)| / C(test),

where ``C(s) = |V(s)| / K`` and ``edges(P_j -> B)`` counts the in-edges of
``B``'s nodes from nodes of ``P_j`` (the requests sampling from ``B``
makes). When every ``CE`` is 0 the larger ``BS`` wins, then the smaller
part. [ours] A part already holding ``(1 + slack) C(s)`` nodes of a split
``s`` takes no more blocks containing that split's nodes (the paper states
balance as the goal but gives no mechanism that guarantees it), and blocks
are streamed in batches (at most 4096 blocks, and at least 256 batches):
the edge counts of a batch are taken against the parts as they stood when
the batch began (the balance counts are exact), which keeps the loop
vectorised.
"""
from __future__ import annotations

from typing import List, Optional, Sequence

import numpy as np
import torch
from torch import Tensor
from tqdm.auto import tqdm

from ..graph.ranges import expand_ranges
from ..graph.topology import CSCTopology

__all__ = ['gnnp_blocks', 'gnnp_assign']

_CHUNK = 1 << 22  # frontier edges expanded at once (bounds memory)


def _in_edges(topology: CSCTopology, nodes: Tensor) -> Tensor:
    start = topology.indptr[nodes]
    degree = topology.indptr[nodes + 1] - start
    return expand_ranges(start, degree), degree


def gnnp_blocks(topology: CSCTopology, centres: Tensor,
                num_hops: int) -> Tensor:
    r"""The block of every node: the id of the first centre whose
    :obj:`num_hops`-hop in-neighbourhood BFS reaches it (the smallest on a
    tie, a centre's own id for a centre), the node's own id if none does.
    """
    n = topology.num_nodes
    block = torch.full((n, ), -1, dtype=torch.long)
    block[centres] = centres
    frontier = centres
    for _ in range(num_hops):
        best = torch.full((n, ), n, dtype=torch.long)
        reached: List[Tensor] = []
        for chunk in frontier.split(max(1, _CHUNK // 64)):
            edges, degree = _in_edges(topology, chunk)
            nbr = topology.indices[edges].long()
            ids = block[chunk].repeat_interleave(degree)
            free = block[nbr] < 0
            nbr, ids = nbr[free], ids[free]
            best.scatter_reduce_(0, nbr, ids, 'amin')
            reached.append(nbr.unique())
        frontier = torch.cat(reached).unique() if reached else frontier[:0]
        block[frontier] = best[frontier]
        if frontier.numel() == 0:
            break
    alone = (block < 0).nonzero().view(-1)
    block[alone] = alone
    return block


def _split_counts(block: Tensor, masks: Sequence[Optional[Tensor]],
                  n: int) -> List[Tensor]:
    return [torch.zeros(n, dtype=torch.long) if m is None else
            torch.bincount(block[m], minlength=n) for m in masks]


def gnnp_assign(topology: CSCTopology, masks: Sequence[Optional[Tensor]],
                num_parts: int, num_hops: int,
                weights: Sequence[float] = (1 / 3, 1 / 3, 1 / 3),
                slack: float = 0.05, batch: Optional[int] = None,
                progress: bool = True) -> np.ndarray:
    r"""The part of every node under GNN-P.

    Args:
        topology (CSCTopology): the graph.
        masks: the ``(train, val, test)`` boolean masks (``None`` for a
            split the dataset lacks).
        num_parts (int): the number of parts.
        num_hops (int): the BFS depth of the blocks (the sampling depth).
        weights: ``(alpha, beta, gamma)`` of the balance term.
        slack (float): a part stops taking a split's nodes at
            ``(1 + slack)`` times its fair share of that split.
        batch (int, optional): blocks whose edge counts are taken together
            (default: ``min(4096, ceil(num_blocks / 256))``).
        progress (bool): show a progress bar.
    """
    if len(masks) != 3 or len(weights) != 3:
        raise ValueError("'masks' and 'weights' each need 3 entries "
                         "(train, val, test)")
    if slack < 0 or (batch is not None and batch < 1):
        raise ValueError(f"'slack' = {slack!r} must be >= 0 and 'batch' = "
                         f"{batch!r} >= 1")
    n, k = topology.num_nodes, num_parts
    labelled = torch.zeros(n, dtype=torch.bool)
    for m in masks:
        if m is not None:
            labelled |= m.bool()
    block = gnnp_blocks(topology, labelled.nonzero().view(-1), num_hops)
    size = torch.bincount(block, minlength=n)
    split = _split_counts(block, [None if m is None else m.bool()
                                  for m in masks], n)
    key = torch.stack(split).amax(0)
    ids = size.nonzero().view(-1)  # the blocks (non-empty ids)
    # Sort: key desc, size desc, id asc (np.lexsort: last key is primary).
    order = torch.from_numpy(np.lexsort(
        (ids.numpy(), -size[ids].numpy(), -key[ids].numpy())))
    blocks = ids[order]
    rank = torch.empty(n, dtype=torch.long)
    rank[blocks] = torch.arange(blocks.numel())
    nodes = torch.argsort(rank[block], stable=True)  # grouped by block
    bounds = torch.zeros(blocks.numel() + 1, dtype=torch.long)
    torch.cumsum(size[blocks], 0, out=bounds[1:])

    if batch is None:
        batch = min(4096, -(-blocks.numel() // 256))
    totals = [float(s.sum()) for s in split]
    share = [t / k for t in totals]
    inv_t, inv_v, inv_s = (w / c if c > 0 else 0.0
                           for w, c in zip(weights, share))
    cap_t, cap_v, cap_s = ((1 + slack) * c for c in share)
    owner = torch.full((n, ), -1, dtype=torch.long)
    part_size, part_t, part_v, part_s = ([0] * k for _ in range(4))
    bar = tqdm(total=blocks.numel(), desc='GNN-P blocks', unit='block',
               disable=not progress, leave=False)
    for lo in range(0, blocks.numel(), batch):
        hi = min(lo + batch, blocks.numel())
        members = nodes[bounds[lo]:bounds[hi]]
        local = torch.repeat_interleave(torch.arange(hi - lo),
                                        size[blocks[lo:hi]])
        edges, degree = _in_edges(topology, members)
        src_part = owner[topology.indices[edges].long()]
        dst = local.repeat_interleave(degree)
        seen = src_part >= 0
        ce = torch.bincount(dst[seen] * k + src_part[seen],
                            minlength=(hi - lo) * k).view(-1, k).tolist()
        sizes = size[blocks[lo:hi]].tolist()
        t_of, v_of, s_of = (c[blocks[lo:hi]].tolist() for c in split)
        chosen = []
        for i, row in enumerate(ce):
            t, v, s = t_of[i], v_of[i], s_of[i]
            best, best_key = -1, None
            for j in range(k):
                pt, pv, ps = part_t[j], part_v[j], part_s[j]
                if (t and pt and pt + t > cap_t) or \
                        (v and pv and pv + v > cap_v) or \
                        (s and ps and ps + s > cap_s):
                    continue  # would overfill a split: not this part
                bal = 1.0 - inv_t * pt - inv_v * pv - inv_s * ps
                cand = (row[j] / (part_size[j] + 1) * bal, bal,
                        -part_size[j])
                if best_key is None or cand > best_key:
                    best, best_key = j, cand
            if best < 0:  # every part is full for this block: least loaded
                best = min(range(k), key=lambda j: (
                    inv_t * part_t[j] + inv_v * part_v[j] +
                    inv_s * part_s[j], part_size[j]))
            chosen.append(best)
            part_size[best] += sizes[i]
            part_t[best] += t
            part_v[best] += v
            part_s[best] += s
        owner[members] = torch.tensor(chosen).repeat_interleave(
            torch.tensor(sizes))
        bar.update(hi - lo)
    bar.close()
    return owner.numpy()
