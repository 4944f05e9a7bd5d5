r"""Sampling where the topology lives (a GPU for DSP's and GIDS's device
sampling): every tensor a sampler makes is put on its topology's device.

On a machine without CUDA this is checked by sampling a CPU topology while
torch's default device is ``'meta'``: a tensor made without naming its device
would land on ``meta`` and fail to mix with the CPU arrays. The CUDA tests
(skipped without a GPU) sample on the device itself."""
from collections import Counter

import pytest
import torch
from scipy.stats import chisquare
from torch_geometric.data import Data
from torch_geometric.sampler import EdgeSamplerInput, NodeSamplerInput
from torch_geometric.sampler.base import NegativeSampling

from pyg_fastload import CSCTopology, FastNeighborSampler
from pyg_fastload.sampling import HeteroNeighborSampler, LayerWiseSampler

from ..helpers import random_graph, random_hetero_graph

#: CPU always; CUDA where there is one.
DEVICES = ['cpu', pytest.param('cuda', marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason='needs a CUDA device'))]


def timed_graph() -> Data:
    data = random_graph()
    gen = torch.Generator().manual_seed(5)
    data.w = torch.rand(data.num_edges, generator=gen)
    data.t = torch.randint(0, 100, (data.num_nodes, ), generator=gen)
    return data


NODE_SAMPLERS = {
    'uniform': lambda d: FastNeighborSampler(d, [5, 3]),
    'replace': lambda d: FastNeighborSampler(d, [5, 3], replace=True),
    'disjoint': lambda d: FastNeighborSampler(d, [5, 3], disjoint=True),
    'induced': lambda d: FastNeighborSampler(d, [5, 3],
                                             subgraph_type='induced'),
    'bidirectional': lambda d: FastNeighborSampler(
        d, [5, 3], subgraph_type='bidirectional'),
    'weighted': lambda d: FastNeighborSampler(d, [5, 3], weight_attr='w'),
    'weighted_replace': lambda d: FastNeighborSampler(
        d, [5, 3], weight_attr='w', replace=True),
    'temporal': lambda d: FastNeighborSampler(d, [5, 3], time_attr='t',
                                              disjoint=True),
    'temporal_last': lambda d: FastNeighborSampler(
        d, [5, 3], time_attr='t', disjoint=True, temporal_strategy='last'),
    'all': lambda d: FastNeighborSampler(d, [-1, 2]),
    'layer_wise': lambda d: LayerWiseSampler(d, [20, 30]),
    'layer_wise_weighted': lambda d: LayerWiseSampler(d, [20, 30],
                                                      weight_attr='w'),
}

LINK_CASES = {
    'no_negatives': (dict(), None, False),
    'binary': (dict(), NegativeSampling('binary', 2), False),
    'binary_strict': (dict(), NegativeSampling('binary', 2), True),
    'triplet_strict': (dict(disjoint=True), NegativeSampling('triplet', 2),
                       True),
    'weighted_negatives': (dict(), NegativeSampling(
        'binary', 1, dst_weight=torch.rand(200)), False),
    'temporal': (dict(time_attr='t', disjoint=True),
                 NegativeSampling('binary', 1), False),
}


def same_output(a, b) -> None:
    for key in ('node', 'row', 'col', 'edge', 'batch'):
        x, y = getattr(a, key), getattr(b, key)
        assert (x is None) == (y is None), key
        if x is not None:
            assert y.device.type == 'cpu', key
            assert torch.equal(x, y), key


def under_meta_default(run):
    torch.set_default_device('meta')
    try:
        return run()
    finally:
        torch.set_default_device(None)


def same_link_sampling(sampler, inputs, neg, strict, same) -> None:
    r"""Link sampling of :obj:`inputs` gives the same output and metadata
    under a ``meta`` default device as without (:obj:`same` compares the
    outputs)."""
    def run():
        return sampler.sample_from_edges(
            inputs, neg, generator=torch.Generator().manual_seed(1),
            strict=strict)
    ref = run()
    out = under_meta_default(run)
    same(ref, out)
    for x, y in zip(ref.metadata, out.metadata):
        assert (x is None) == (y is None)
        if x is not None:
            assert torch.equal(x, y)


@pytest.mark.parametrize('name', sorted(NODE_SAMPLERS))
def test_node_sampling_makes_every_tensor_on_the_topology_device(name):
    sampler = NODE_SAMPLERS[name](timed_graph())
    inputs = NodeSamplerInput(None, torch.arange(0, 40, 3))

    def run():
        return sampler.sample_from_nodes(
            inputs, generator=torch.Generator().manual_seed(1))
    same_output(run(), under_meta_default(run))


@pytest.mark.parametrize('name', sorted(LINK_CASES))
def test_link_sampling_makes_every_tensor_on_the_topology_device(name):
    data = timed_graph()
    options, neg, strict = LINK_CASES[name]
    sampler = FastNeighborSampler(data, [5, 3], **options)
    label = data.edge_index[:, :16]
    time = data.t[label[0]] + 50 if 'time_attr' in options else None
    inputs = EdgeSamplerInput(None, label[0], label[1], time=time)
    same_link_sampling(sampler, inputs, neg, strict, same_output)


def test_topology_moves_every_array_and_keeps_missing_ones():
    topo = CSCTopology.from_edge_index(torch.tensor([[2, 0, 1], [1, 2, 0]]))
    assert topo.edge_id is not None and topo.edge_weight is None
    assert topo.to('cpu') is topo
    moved = topo.to('meta')
    assert moved.device.type == 'meta' and moved.num_nodes == 3
    assert moved.indices.device.type == 'meta'
    assert moved.edge_id.device.type == 'meta' and moved.edge_weight is None
    assert topo.device.type == 'cpu'  # the original stays where it was


@pytest.mark.reliability(
    fault='two loaders of one graph copying its topology to a device at '
          'once (threads)',
    behaviour='one copy is made, under a lock, and both get it (was: each '
              'made its own, the second thrown away after taking the '
              "device's memory)")
def test_a_topology_copied_from_two_threads_at_once_is_copied_once(
        monkeypatch):
    import threading

    from pyg_fastload.graph import topology as module
    topo = CSCTopology.from_edge_index(torch.tensor([[2, 0, 1], [1, 2, 0]]))
    made = []
    both_copying = threading.Event()
    real = module.CSCTopology

    def made_together(**arrays):  # each copy waits for the other's
        made.append(arrays['indptr'].device)
        if len(made) == 2:
            both_copying.set()
        both_copying.wait(timeout=2)  # in vain: one copy at a time
        return real(**arrays)
    monkeypatch.setattr(module, 'CSCTopology', made_together)
    got = [None, None]

    def copy(i):
        got[i] = topo.to('meta')
    threads = [threading.Thread(target=copy, args=(i, )) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert got[0] is got[1] is topo._copies[torch.device('meta')]
    assert made == [torch.device('meta')]


def test_sampler_refuses_shared_memory_off_the_cpu(graph):
    with pytest.raises(ValueError, match=r"'share_memory=True'.*meta.*"
                       r"num_workers=0"):
        FastNeighborSampler(graph, [3], share_memory=True, device='meta')


def timed_hetero_graph():
    r"""The helpers' mag-like graph with paper and author times
    (institutions have none: no time constraint, as in pyg-lib)."""
    data = random_hetero_graph()
    gen = torch.Generator().manual_seed(5)
    data['paper'].t = torch.randint(0, 100, (120, ), generator=gen)
    data['author'].t = torch.randint(0, 100, (80, ), generator=gen)
    return data


HETERO_SAMPLERS = {
    'uniform': dict(),
    'replace': dict(replace=True),
    'disjoint': dict(disjoint=True),
    'induced': dict(subgraph_type='induced'),
    'bidirectional': dict(subgraph_type='bidirectional'),
    'temporal': dict(time_attr='t', disjoint=True),
    'temporal_last': dict(time_attr='t', disjoint=True,
                          temporal_strategy='last'),
    'all': dict(num_neighbors=[-1, 2]),
    'per_relation': dict(num_neighbors={
        e: [4, 0] if e[1] == 'cites' else [2, 3]
        for e in random_hetero_graph().edge_types}),
}


def same_hetero_output(a, b) -> None:
    for key in ('node', 'row', 'col', 'edge', 'batch', 'num_sampled_nodes',
                'num_sampled_edges'):
        x, y = getattr(a, key), getattr(b, key)
        assert (x is None) == (y is None), key
        if x is None:
            continue
        assert x.keys() == y.keys(), key
        for name in x:
            if isinstance(x[name], torch.Tensor):
                assert y[name].device.type == 'cpu', (key, name)
                assert torch.equal(x[name], y[name]), (key, name)
            else:
                assert x[name] == y[name], (key, name)


@pytest.mark.parametrize('name', sorted(HETERO_SAMPLERS))
def test_hetero_sampling_makes_every_tensor_on_the_topology_device(name):
    options = dict(HETERO_SAMPLERS[name])
    sampler = HeteroNeighborSampler(timed_hetero_graph(),
                                    options.pop('num_neighbors', [4, 2]),
                                    **options)
    inputs = NodeSamplerInput(None, torch.arange(0, 40, 3),
                              input_type='paper')

    def run():
        return sampler.sample_from_nodes(
            inputs, generator=torch.Generator().manual_seed(1))
    same_hetero_output(run(), under_meta_default(run))


@pytest.mark.parametrize('name', sorted(LINK_CASES))
def test_hetero_link_sampling_makes_every_tensor_on_the_topology_device(
        name):
    data = timed_hetero_graph()
    options, neg, strict = LINK_CASES[name]
    if neg is not None and neg.dst_weight is not None:  # the papers'
        neg = NegativeSampling('binary', 1, dst_weight=torch.rand(120))
    sampler = HeteroNeighborSampler(data, [4, 2], **options)
    edge_type = ('author', 'writes', 'paper')
    label = data[edge_type].edge_index[:, :16]
    time = data['author'].t[label[0]] + 50 if 'time_attr' in options \
        else None
    inputs = EdgeSamplerInput(None, label[0], label[1], time=time,
                              input_type=edge_type)
    same_link_sampling(sampler, inputs, neg, strict, same_hetero_output)


def test_a_hetero_topology_moves_to_a_device_once():
    sampler = HeteroNeighborSampler(random_hetero_graph(), [2])
    topo = sampler.topology
    moved = topo.to('meta')
    assert moved is topo.to('meta') and topo.to('cpu') is topo
    assert moved.node_types == topo.node_types
    assert moved.edge_types == topo.edge_types
    for name in topo.ARRAYS + ('src_type', 'dst_type', 'dst_rels',
                               'dst_rel_ptr'):
        value = getattr(moved, name)
        assert value is None or value.device.type == 'meta', name
    assert topo.indptr.device.type == 'cpu'  # the original stays
    on_meta = HeteroNeighborSampler(random_hetero_graph(), [2],
                                    device='meta')
    assert on_meta.device.type == 'meta'
    assert on_meta.fanout.device.type == 'meta'


def star(num_leaves: int, weights=None) -> Data:
    r"""Leaves ``1..num_leaves`` all pointing at node 0."""
    src = torch.arange(1, num_leaves + 1)
    data = Data(edge_index=torch.stack([src, torch.zeros_like(src)]),
                num_nodes=num_leaves + 1)
    if weights is not None:
        data.w = weights
    return data


@pytest.mark.parametrize('device', DEVICES)
@pytest.mark.parametrize('replace', [False, True])
def test_uniform_draws_are_uniform_on_the_device(device, replace):
    sampler = FastNeighborSampler(star(12), [4], replace=replace,
                                  disjoint=True, device=device)
    assert sampler.device.type == device
    seeds = torch.zeros(3000, dtype=torch.long)  # 3000 independent trees
    out = sampler.sample(seeds, torch.Generator(device).manual_seed(0))
    assert out.node.device.type == device
    leaves = out.node[out.row].cpu()
    assert leaves.numel() == 3000 * 4 and bool((leaves >= 1).all())
    if not replace:  # four distinct leaves per tree
        trees = out.batch[out.row].cpu()
        assert torch.unique(trees * 13 + leaves).numel() == leaves.numel()
    counts = Counter(leaves.tolist())
    assert chisquare([counts[v] for v in range(1, 13)]).pvalue > 1e-3


@pytest.mark.parametrize('device', DEVICES)
def test_weighted_draws_follow_the_weights_on_the_device(device):
    weights = torch.arange(1, 9, dtype=torch.float)
    sampler = FastNeighborSampler(star(8, weights), [1], replace=True,
                                  disjoint=True, weight_attr='w',
                                  device=device)
    out = sampler.sample(torch.zeros(4000, dtype=torch.long),
                         torch.Generator(device).manual_seed(0))
    counts = Counter(out.node[out.row].cpu().tolist())
    expected = (weights.double() / weights.sum() * 4000).tolist()
    assert chisquare([counts[v] for v in range(1, 9)],
                     expected).pvalue > 1e-3


@pytest.mark.parametrize('device', DEVICES)
def test_device_sampling_is_reproducible_and_valid(device, graph):
    sampler = FastNeighborSampler(graph, [4, 3], device=device)
    seeds = torch.arange(0, 60, 2)
    first = sampler.sample_from_nodes(
        NodeSamplerInput(None, seeds),
        generator=torch.Generator().manual_seed(3))
    again = sampler.sample_from_nodes(
        NodeSamplerInput(None, seeds),
        generator=torch.Generator().manual_seed(3))
    assert first.node.device.type == device
    for key in ('node', 'row', 'col', 'edge'):
        assert torch.equal(getattr(first, key), getattr(again, key))
    node, row, col, edge = (getattr(first, k).cpu()
                            for k in ('node', 'row', 'col', 'edge'))
    assert torch.equal(graph.edge_index[:, edge],
                       torch.stack([node[row], node[col]]))
    assert torch.equal(node[:seeds.numel()], seeds)


def test_a_topology_is_copied_once_per_device():
    topo = CSCTopology.from_edge_index(torch.tensor([[2, 0, 1], [1, 2, 0]]))
    assert topo.to('meta') is topo.to('meta')
    assert topo.nbytes() == 4 * 8 + 3 * 4 + 3 * 4  # indptr, indices, ids


@pytest.mark.skipif(not torch.cuda.is_available(), reason='needs a CUDA '
                    'device')
@pytest.mark.parametrize('options', [
    dict(num_neighbors=[-1, -1]),
    dict(num_neighbors=[-1, 3], time_attr='t', disjoint=True,
         temporal_strategy='last'),
])
def test_draws_without_randomness_equal_the_cpus_on_the_gpu(options):
    r"""Where no random stream is drawn (every in-edge; the most recent
    ones), the GPU's batches are the CPU's, id for id."""
    data = timed_graph()
    inputs = NodeSamplerInput(None, torch.arange(0, 40, 3))
    on_cpu = FastNeighborSampler(data, **options).sample_from_nodes(inputs)
    on_gpu = FastNeighborSampler(data, **options, device='cuda'
                                 ).sample_from_nodes(inputs)
    assert on_gpu.node.is_cuda
    for key in ('node', 'row', 'col', 'edge', 'batch'):
        x, y = getattr(on_cpu, key), getattr(on_gpu, key)
        assert (x is None) == (y is None)
        if x is not None:
            assert torch.equal(x, y.cpu()), key
