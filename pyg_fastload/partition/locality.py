r"""How local sampling stays under a partition, measured by sampling:

* HopGNN's micrograph locality ``R_micro``: for one root, the share of its
  sampled computation tree (disjoint sampling) whose non-root vertices live
  in the root's part, averaged over roots; and ``R_sub``: the same share of
  a whole mini-batch subgraph for each of its roots (about ``1/K`` when a
  batch mixes roots from every part) (HopGNN Table 1).
* ByteGNN's remote/local request ratio: each part samples one epoch from its
  own training seeds; a sampled node is a local request when the part owns
  it and a remote one otherwise (ByteGNN Fig. 13).
"""
from __future__ import annotations

import math
from typing import Dict, List, Sequence

import torch
from torch import Tensor
from tqdm.auto import tqdm

from ..graph.topology import CSCTopology
from ..sampling import FastNeighborSampler

__all__ = ['micrograph_locality', 'remote_local_ratio', 'locality_lines',
           'measure_locality']


def micrograph_locality(topology: CSCTopology, owner: Tensor,
                        roots: Tensor, num_neighbors: Sequence[int],
                        batch_size: int = 1024,
                        seed: int = 0) -> Dict[str, float]:
    r"""``{'R_micro', 'R_sub'}`` over :obj:`roots` (a shuffled sample of
    training nodes), sampled with :obj:`num_neighbors`."""
    gen = torch.Generator().manual_seed(seed)
    roots = roots[torch.randperm(roots.numel(), generator=gen)]
    disjoint = FastNeighborSampler(topology, list(num_neighbors),
                                   disjoint=True)
    joint = FastNeighborSampler(topology, list(num_neighbors))
    micro: List[Tensor] = []
    sub: List[Tensor] = []
    for batch in roots.split(batch_size):
        out = disjoint.sample(batch, gen)
        home = owner[batch][out.batch]  # the root's part, per vertex
        colocated = (owner[out.node] == home).long()
        colocated[:batch.numel()] = 0  # the roots themselves
        size = torch.bincount(out.batch, minlength=batch.numel())
        near = torch.bincount(out.batch, colocated, batch.numel())
        micro.append(near / size)
        out = joint.sample(batch, gen)
        parts = owner[out.node[batch.numel():]]  # non-root vertices
        per_part = torch.bincount(parts, minlength=int(owner.max()) + 1)
        sub.append(per_part[owner[batch]].double() / out.node.numel())
    return {'R_micro': float(torch.cat(micro).mean()),
            'R_sub': float(torch.cat(sub).mean())}


def remote_local_ratio(topology: CSCTopology, owner: Tensor,
                       train: Tensor, num_neighbors: Sequence[int],
                       batch_size: int = 1024, seed: int = 0,
                       progress: bool = True) -> Dict[str, float]:
    r"""One epoch per part from its own training seeds: ``{'remote',
    'local', 'ratio' (remote / local), 'load_balance' (max/mean of the
    requests each part receives)}``."""
    gen = torch.Generator().manual_seed(seed)
    sampler = FastNeighborSampler(topology, list(num_neighbors))
    num_parts = int(owner.max()) + 1
    remote = local = 0
    received = torch.zeros(num_parts, dtype=torch.long)
    total = sum(math.ceil(int((owner[train] == k).sum()) / batch_size)
                for k in range(num_parts))
    bar = tqdm(total=total, desc='sampling an epoch per part', unit='batch',
               disable=not progress, leave=False)
    with bar:
        for part in range(num_parts):
            seeds = train[owner[train] == part]
            seeds = seeds[torch.randperm(seeds.numel(), generator=gen)]
            for batch in seeds.split(batch_size):
                homes = owner[sampler.sample(batch, gen).node]
                mine = int((homes == part).sum())
                local += mine
                remote += homes.numel() - mine
                received += torch.bincount(homes, minlength=num_parts)
                bar.update()
    mean = float(received.double().mean())
    return {'remote': remote, 'local': local,
            'ratio': remote / max(local, 1),
            'load_balance': float(received.max()) / mean if mean else 1.0}


def locality_lines(report: Dict, over: str = '') -> List[str]:
    r"""A partition report's locality and request lines (``--report``);
    :obj:`over` says what was sampled (e.g. ``', all relations'``)."""
    lines = []
    for hops, value in report.get('locality', {}).items():
        lines.append(f"locality, {hops}: micrograph R_micro "
                     f"{value['R_micro']:.3f}, subgraph R_sub "
                     f"{value['R_sub']:.3f} (HopGNN Table 1{over})")
    requests = report.get('requests')
    if requests:
        lines.append(f"requests in one epoch per part, fan-outs "
                     f"{requests['num_neighbors']}: remote/local "
                     f"{requests['ratio']:.2f} ({requests['remote']:,} / "
                     f"{requests['local']:,}); load max/mean "
                     f"{requests['load_balance']:.3f} (ByteGNN Fig. 13)")
    return lines


def measure_locality(topology: CSCTopology, owner: Tensor, seeds: Tensor,
                     num_neighbors: Sequence[int], batch_size: int,
                     max_roots: int, seed: int, progress: bool) -> Dict:
    r"""A partition report's ``'locality'`` (micrograph and subgraph
    locality at 2 and 3 hops, from up to :obj:`max_roots` of :obj:`seeds`)
    and ``'requests'`` (remote/local requests of one epoch per part) for
    the parts :obj:`owner` gives the nodes of :obj:`topology`."""
    gen = torch.Generator().manual_seed(seed)
    roots = seeds[torch.randperm(seeds.numel(), generator=gen)[:max_roots]]
    return {
        'locality': {f'{len(fanouts)} hops': micrograph_locality(
            topology, owner, roots, fanouts, batch_size, seed)
            for fanouts in ((10, 5), (10, 5, 3))},
        'requests': dict(num_neighbors=list(num_neighbors),
                         **remote_local_ratio(topology, owner, seeds,
                                              num_neighbors, batch_size,
                                              seed, progress))}
