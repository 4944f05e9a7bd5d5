r"""The sampling scratch a topology moved to a GPU leaves room for
(:meth:`~pyg_fastload.sampling.HopSampler.scratch_bytes`) against what
sampling one batch allocates: on the CPU, the peak of the allocations torch's
profiler records; on a GPU, the caching allocator's peak."""
import torch
from torch.profiler import ProfilerActivity, profile
from torch_geometric.data import HeteroData
from torch_geometric.sampler import NodeSamplerInput

from pyg_fastload.graph.topology import CSCTopology
from pyg_fastload.sampling import (
    FastNeighborSampler,
    HeteroNeighborSampler,
    LaborSampler,
    LayerWiseSampler,
)

from ..helpers import requires_cuda

NODES, EDGES, BATCH = 20_000, 400_000, 512


def hetero_graph() -> HeteroData:
    gen = torch.Generator().manual_seed(0)
    data = HeteroData()
    data['paper'].num_nodes = NODES // 2
    data['author'].num_nodes = NODES // 2
    for relation in (('paper', 'cites', 'paper'),
                     ('author', 'writes', 'paper'),
                     ('paper', 'rev_writes', 'author')):
        data[relation].edge_index = torch.randint(0, NODES // 2,
                                                  (2, EDGES // 3),
                                                  generator=gen)
    return data


def samplers(device=None):
    r"""``(name, sampler, sample one batch)`` of every kind, on
    :obj:`device`."""
    gen = torch.Generator().manual_seed(0)
    edge_index = torch.randint(0, NODES, (2, EDGES), generator=gen)
    plain = CSCTopology.from_edge_index(edge_index, NODES)
    weighted = CSCTopology.from_edge_index(
        edge_index, NODES, edge_weight=torch.rand(EDGES, generator=gen))
    kinds = {
        'uniform': (FastNeighborSampler, plain, [15, 10, 5], {}),
        'replace': (FastNeighborSampler, plain, [15, 10, 5],
                    dict(replace=True)),
        'disjoint': (FastNeighborSampler, plain, [15, 10],
                     dict(disjoint=True)),
        'bidirectional': (FastNeighborSampler, plain, [15, 10],
                          dict(subgraph_type='bidirectional')),
        'bidirectional disjoint': (
            FastNeighborSampler, plain, [15, 10],
            dict(subgraph_type='bidirectional', disjoint=True)),
        'induced': (FastNeighborSampler, plain, [5, 5],
                    dict(subgraph_type='induced')),
        'all in-edges': (FastNeighborSampler, plain, [-1, 5], {}),
        'weighted': (FastNeighborSampler, weighted, [15, 10], {}),
        'weighted replace': (FastNeighborSampler, weighted, [15, 10],
                             dict(replace=True)),
        'layer-wise': (LayerWiseSampler, plain, [4000, 4000], {}),
        'labor': (LaborSampler, plain, [15, 10, 5], {}),
        'labor-1': (LaborSampler, weighted, [15, 10],
                    dict(importance_sampling=1)),
    }
    seeds = torch.randperm(NODES, generator=gen)[:BATCH]
    for name, (kind, topology, fanouts, options) in kinds.items():
        sampler = kind(topology, fanouts, device=device, batch_size=BATCH,
                       **options)
        yield name, sampler, lambda s=sampler: s.sample(seeds)
    sampler = HeteroNeighborSampler(hetero_graph(), [10, 5],
                                    batch_size=BATCH)
    yield 'heterogeneous', sampler, lambda: sampler.sample_from_nodes(
        NodeSamplerInput(None, seeds % (NODES // 2), input_type='paper'))


def peak_cpu_bytes(sample) -> int:
    r"""The most bytes the allocations of :obj:`sample` held at once, from
    the allocations and frees torch's profiler records."""
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as p:
        sample()
    changes = sorted((e.time_range.start, e.cpu_memory_usage
                      if e.name == '[memory]' else e.self_cpu_memory_usage)
                     for e in p.events())
    held = peak = 0
    for _, change in changes:
        held += change
        peak = max(peak, held)
    return peak


def test_the_scratch_estimate_covers_what_sampling_allocates():
    measured = {}
    for name, sampler, sample in samplers():
        # the first batch: the relabelling arrays are allocated in it
        measured[name] = (peak_cpu_bytes(sample),
                          sampler.scratch_bytes(BATCH))
    assert all(0 < peak <= estimate for peak, estimate in
               measured.values()), measured
    assert len(measured) == 13


def test_the_scratch_estimate_grows_with_the_fanouts_and_the_batch():
    edge_index = torch.randint(0, NODES, (2, EDGES),
                               generator=torch.Generator().manual_seed(0))
    topology = CSCTopology.from_edge_index(edge_index, NODES)
    small, wide = (FastNeighborSampler(topology, fanouts)
                   for fanouts in ([5, 5], [15, 10]))
    assert small.scratch_bytes(64) < small.scratch_bytes(1024) < \
        wide.scratch_bytes(1024)
    relabelling = 2 * NODES * 4
    assert small.scratch_bytes(0) == relabelling  # nothing drawn


@requires_cuda
def test_the_scratch_estimate_covers_the_gpu_peak():
    device = torch.device('cuda', torch.cuda.current_device())
    measured = {}
    for name, sampler, sample in samplers(device):
        if sampler.device != device:
            continue  # heterogeneous sampling stays on the CPU here
        torch.cuda.synchronize(device)
        before = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        sample()
        torch.cuda.synchronize(device)
        measured[name] = (torch.cuda.max_memory_allocated(device) - before,
                          sampler.scratch_bytes(BATCH))
    assert all(peak <= estimate for peak, estimate in measured.values()), \
        measured
    assert len(measured) == 10
