r"""Random walks through DSP's collective sampling: each hop's walkers go to
the owners of their nodes, which draw their steps with the random walk's
``pick``. A rank's collective walks are walks one machine draws on the
whole graph: every step along an in-edge of the walker's node, as many
steps as one machine's (fewer only at a dead end), each step uniform over
the in-edges of where the walker is (chi-square at 0.999)."""
from collections import Counter
from datetime import timedelta

import pytest
import torch
from scipy.stats import chi2

from pyg_fastload.distributed import Collectives, DistContext
from pyg_fastload.distributed.dsp import open_dsp_rank
from pyg_fastload.partition.part_dirs import full_topology
from pyg_fastload.sampling import RandomWalkSampler, SamplerChoice

from .ranks import run_ranks

pytestmark = pytest.mark.timeout(240)

LENGTH = 3
BATCHES = 150


def _walks(out):
    r"""Every walk of a disjoint batch, node by node."""
    seeds = out.node[:int(out.batch.max()) + 1]  # (one tree per seed)
    walks = {tree: [node] for tree, node in enumerate(seeds.tolist())}
    for edge in range(out.row.numel()):  # one edge per walker per hop
        tree = int(out.batch[out.col[edge]])
        assert int(out.node[out.col[edge]]) == walks[tree][-1]
        walks[tree].append(int(out.node[out.row[edge]]))
    return list(walks.values())


def _draw(rank, world, parts_dir):
    coll = Collectives(DistContext.current(timedelta(seconds=30)))
    dsp = open_dsp_rank(parts_dir, coll)
    sampler = dsp.sampler([1] * LENGTH, choice=SamplerChoice.of(
        'random_walk'), disjoint=True)
    seeds = dsp.seeds('train')[:16]
    walks = []
    for batch in range(BATCHES):
        out = sampler.sample(seeds, torch.Generator().manual_seed(
            1000 * rank + batch))
        walks.extend(_walks(out))
    dsp.close()
    return type(sampler).__name__, walks


def _in_neighbours(topology, node):
    start, end = int(topology.indptr[node]), int(topology.indptr[node + 1])
    return topology.indices[start:end].tolist()


def test_collective_walks_are_one_machines_walks(metis_parts):
    whole = full_topology(metis_parts)
    results = run_ranks(_draw, 2, metis_parts)
    visits, steps = Counter(), Counter()
    for rank in range(2):
        status, value = results[rank]
        assert status == 'ok', value
        name, walks = value
        assert 'RandomWalkSampler' in name and 'Collective' in name
        for walk in walks:
            for node, nxt in zip(walk, walk[1:]):
                assert nxt in _in_neighbours(whole, node)
                visits[node] += 1
                steps[node, nxt] += 1
            if len(walk) <= LENGTH:  # ended early: only at a dead end
                assert not _in_neighbours(whole, walk[-1])
    # One machine's walks from the same nodes take the same number of
    # steps (dead ends aside, every walk its full length).
    local = RandomWalkSampler(whole, [1] * LENGTH, disjoint=True)
    out = local.sample(torch.tensor(sorted(visits)[:16]),
                       torch.Generator().manual_seed(0))
    for walk in _walks(out):
        assert len(walk) == LENGTH + 1 or not _in_neighbours(whole, walk[-1])
    # each step uniform over the in-edges of the walker's node, pooled
    # over the nodes walked from often enough (5 expected per neighbour)
    stat, dof, tested = 0.0, 0, 0
    for node, total in visits.items():
        nbrs = Counter(_in_neighbours(whole, node))
        degree = sum(nbrs.values())
        if total * min(nbrs.values()) < 5 * degree:
            continue
        tested += total
        for nbr, times in nbrs.items():
            expected = total * times / degree
            stat += (steps[node, nbr] - expected) ** 2 / expected
        dof += len(nbrs) - 1
    assert tested > 3000, tested
    assert chi2.sf(stat, dof) > 1e-3, (stat, dof)
