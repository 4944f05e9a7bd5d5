r"""LABOR through DSP's collective sampling: the owners of a hop's frontier
draw with the variates every other rank would (one seed the ranks share per
batch, hashed with the vertex's new id), so a rank's collective batch is the
batch one machine draws on the whole graph with that seed."""
from datetime import timedelta

import pytest
import torch

from pyg_fastload.distributed import Collectives, DistContext
from pyg_fastload.distributed.dsp import open_dsp_rank
from pyg_fastload.partition.part_dirs import full_topology
from pyg_fastload.sampling import LaborSampler, SamplerChoice

from ..helpers import new_id_topology
from .ranks import run_ranks

pytestmark = pytest.mark.timeout(240)


class _Seeded(LaborSampler):
    r"""One machine's LABOR with a given batch seed."""
    seed = 0

    def batch_seed(self, generator):
        return self.seed


def _draw(rank, world, parts_dir, fanouts, shared):
    coll = Collectives(DistContext.current(timedelta(seconds=30)))
    dsp = open_dsp_rank(parts_dir, coll)
    sampler = dsp.sampler(fanouts, choice=SamplerChoice.of('labor'))
    seeds = dsp.seeds('train')[:24]
    batches = []
    for batch in range(2):
        gen = torch.Generator().manual_seed(10 * rank + batch)
        if dsp.target is None:
            out = sampler.sample(seeds, gen)
            edges = set(zip(out.node[out.row].tolist(),
                            out.node[out.col].tolist()))
            nodes = {None: out.node.tolist()}
        else:
            out = sampler.sample_hetero(dsp.target, seeds, gen)
            edges = {(e, s, d) for e in out.row for s, d in zip(
                out.node[e[0]][out.row[e]].tolist(),
                out.node[e[2]][out.col[e]].tolist())}
            nodes = {t: v.tolist() for t, v in out.node.items()}
        batches.append((sampler.batch_seed(None), nodes, edges))
    dsp.close()
    return type(sampler).__name__, seeds.tolist(), batches


@pytest.mark.parametrize('kind', ['homogeneous', 'heterogeneous'])
def test_collective_labor_draws_what_one_machine_draws(kind, metis_parts,
                                                       hetero_parts,
                                                       tiny_dir):
    if kind == 'homogeneous':
        parts = metis_parts
        whole, target = full_topology(parts), None
    else:
        dataset_dir, parts = hetero_parts
        whole, target = new_id_topology(dataset_dir, parts)
    local = _Seeded(whole, [4, 3])
    results = run_ranks(_draw, 2, parts, [4, 3], None)
    seeds_used = set()
    for rank in range(2):
        status, value = results[rank]
        assert status == 'ok', value
        name, seeds, batches = value
        assert 'LaborSampler' in name and 'Collective' in name
        for seed, nodes, edges in batches:
            seeds_used.add((rank, seed))
            local.seed = seed
            if target is None:
                ref = local.sample(torch.tensor(seeds))
                want_nodes = {None: ref.node.tolist()}
                want = set(zip(ref.node[ref.row].tolist(),
                               ref.node[ref.col].tolist()))
            else:
                ref = local.sample_hetero(target, torch.tensor(seeds))
                want_nodes = {t: v.tolist() for t, v in ref.node.items()}
                want = {(e, s, d) for e in ref.row for s, d in zip(
                    ref.node[e[0]][ref.row[e]].tolist(),
                    ref.node[e[2]][ref.col[e]].tolist())}
            assert edges == want
            for node_type, ids in want_nodes.items():
                assert sorted(nodes[node_type]) == sorted(ids)
    # both ranks drew batch i with the same seed, batch 2 with another
    by_rank = [[s for r, s in sorted(seeds_used) if r == rank]
               for rank in range(2)]
    assert len({s for _, s in seeds_used}) == 2, seeds_used
    assert sorted(by_rank[0]) == sorted(by_rank[1])
