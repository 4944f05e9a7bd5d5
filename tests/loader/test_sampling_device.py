r"""The loaders' ``sampling_device``: the topology copied to a GPU, batches
sampled and returned there. Without CUDA the settings' checks run; the CUDA
tests (skipped here) sample on the device."""
import pytest
import torch

from pyg_fastload import (
    FastLinkNeighborLoader,
    FastNeighborLoader,
    FastNeighborSampler,
)
from pyg_fastload.caching import open_dataset

from ..helpers import random_graph, requires_cuda

NO_CUDA = pytest.mark.skipif(torch.cuda.is_available(),
                             reason='CUDA is available')


def node_batches(data, **options):
    loader = FastNeighborLoader(
        data, [4, 3], batch_size=32, shuffle=True,
        generator=torch.Generator().manual_seed(7), **options)
    return list(loader)


def test_sampling_on_the_cpu_named_gives_the_default_batches():
    data = random_graph()
    for a, b in zip(node_batches(data), node_batches(data,
                                                     sampling_device='cpu'),
                    strict=True):
        for key in ('n_id', 'e_id', 'edge_index', 'x', 'y'):
            assert torch.equal(a[key], b[key])
    link = [FastLinkNeighborLoader(data, [3], batch_size=64,
                                   neg_sampling_ratio=1.0,
                                   generator=torch.Generator().manual_seed(1),
                                   **options)
            for options in ({}, {'sampling_device': 'cpu'})]
    for a, b in zip(*link, strict=True):
        assert torch.equal(a.edge_label_index, b.edge_label_index)
        assert torch.equal(a.n_id, b.n_id)


@pytest.mark.parametrize('options, error, match', [
    (dict(sampling_device='cuda', device='cpu'), ValueError,
     r"'sampling_device=cuda' with 'device=cpu'.*device=None"),
    (dict(sampling_device='xla'), ValueError,
     r"'sampling_device=xla' is not supported"),
    (dict(sampling_device='bogus'), ValueError,
     r"'sampling_device='bogus'' is not a torch device"),
    pytest.param(dict(sampling_device='cuda'), ValueError,
                 r"'sampling_device=cuda' needs CUDA", marks=NO_CUDA),
])
@pytest.mark.parametrize('loader', [FastNeighborLoader,
                                    FastLinkNeighborLoader])
def test_bad_sampling_device_is_named(loader, options, error, match):
    with pytest.raises(error, match=match):
        loader(random_graph(), [3], **options)


@pytest.mark.reliability(
    fault="a hostile or careless `sampling_device` (True, a list, "
          "'cuda:-1', a GPU index past the machine's)",
    behaviour="ValueError naming `sampling_device=` and its value, before "
              "the topology is copied")
@pytest.mark.parametrize('value, match', [
    (True, 'is not a torch device'),
    (['cuda'], 'is not a torch device'),
    ('cuda:-1', 'is not a torch device'),
    ('cuda:99', r'needs CUDA|has \d+ GPU\(s\)'),
])
def test_hostile_sampling_devices_are_named(value, match):
    for loader in (FastNeighborLoader, FastLinkNeighborLoader):
        with pytest.raises(ValueError, match=match) as info:
            loader(random_graph(), [3], sampling_device=value)
        assert str(info.value).startswith("'sampling_device=")


def test_sampling_device_with_a_given_sampler_is_refused():
    data = random_graph()
    with pytest.raises(ValueError, match="build it with 'device'"):
        FastNeighborLoader(data, [3], sampling_device='cpu',
                           neighbor_sampler=FastNeighborSampler(data, [3]))


# On a GPU ####################################################################


def check_batch(batch, data) -> None:
    r"""Every tensor on the GPU; features, labels and edges those of
    :obj:`data` at the batch's ids."""
    for key, value in batch.items():
        if isinstance(value, torch.Tensor):
            assert value.is_cuda, key
    n_id, e_id = batch.n_id.cpu(), batch.e_id.cpu()
    assert torch.equal(batch.x.cpu(), data.x[n_id])
    assert torch.equal(batch.y.cpu(), data.y[n_id])
    assert torch.equal(data.edge_index[:, e_id], n_id[batch.edge_index.cpu()])


@requires_cuda
@pytest.mark.parametrize('pipeline', [False, True])
def test_batches_sampled_on_the_gpu_are_valid_and_reproducible(pipeline):
    data = random_graph()
    first = node_batches(data, sampling_device='cuda', pipeline=pipeline)
    again = node_batches(data, sampling_device='cuda', pipeline=False)
    assert len(first) == len(again) > 1
    for a, b in zip(first, again):
        check_batch(a, data)
        assert torch.equal(a.n_id, b.n_id)
        assert torch.equal(a.edge_index, b.edge_index)
        assert a.batch_size == 32 or a is first[-1]


@requires_cuda
def test_a_sampler_on_the_gpu_sends_its_batches_there():
    data = random_graph()
    sampler = FastNeighborSampler(data, [4, 3], device='cuda')
    loader = FastNeighborLoader(data, [4, 3], batch_size=50,
                                neighbor_sampler=sampler)
    assert loader.device.type == 'cuda'
    for batch in loader:
        check_batch(batch, data)
    with pytest.raises(ValueError, match="the sampler runs on cuda"):
        FastNeighborLoader(data, [4, 3], neighbor_sampler=sampler,
                           device='cpu')


@requires_cuda
@pytest.mark.parametrize('device_budget', [None, 0.3])
def test_gpu_sampling_reads_the_tiers(tiny_dir, device_budget):
    store, graph = open_dataset(tiny_dir[0], device='cuda', host_budget=0.3,
                                device_budget=device_budget)
    x = store.gather('x', torch.arange(store.get_tensor_size('x')[0]))
    loader = FastNeighborLoader((store, graph), [4, 3], batch_size=64,
                                sampling_device='cuda')
    for batch in loader:
        assert batch.n_id.is_cuda and batch.x.is_cuda
        assert torch.equal(batch.x, x[batch.n_id].to(batch.x.device))


@requires_cuda
@pytest.mark.parametrize('neg_sampling', ['binary', 'triplet'])
def test_link_batches_sampled_on_the_gpu_keep_strict_negatives(neg_sampling):
    data = random_graph()
    edges = set(map(tuple, data.edge_index.t().tolist()))
    loader = FastLinkNeighborLoader(
        data, [3, 2], batch_size=64, neg_sampling=neg_sampling,
        strict_negatives=True, disjoint=neg_sampling == 'triplet',
        sampling_device='cuda', generator=torch.Generator().manual_seed(0))
    for batch in loader:
        check_batch(batch, data)
        n_id = batch.n_id.cpu()
        if neg_sampling == 'binary':
            label = batch.edge_label.cpu()
            pairs = n_id[batch.edge_label_index.cpu()]
            assert all((tuple(p) in edges) == bool(y) for p, y in
                       zip(pairs.t().tolist(), label.tolist()))
        else:
            src = n_id[batch.src_index.cpu()]
            neg = n_id[batch.dst_neg_index.cpu()]
            assert all((s, d) not in edges for s, row in
                       zip(src.tolist(), neg.tolist()) for d in row)


@requires_cuda
def test_a_graph_held_on_the_gpu_is_sampled_and_sliced_there():
    data = random_graph()
    loader = FastNeighborLoader(data.to('cuda'), [4, 3], batch_size=40,
                                sampling_device='cuda')
    assert loader.device.type == 'cuda'
    for batch in loader:
        check_batch(batch, data)  # against the CPU copy


@requires_cuda
@pytest.mark.parametrize('task', ['node', 'link'])
def test_heterogeneous_batches_sampled_on_the_gpu_are_valid(hetero_graph,
                                                            task):
    data = hetero_graph
    edge_type = data.edge_types[0]
    common = dict(num_neighbors=[3, 2], batch_size=16,
                  sampling_device='cuda',
                  generator=torch.Generator().manual_seed(0))
    if task == 'node':
        loader = FastNeighborLoader(data, input_nodes=edge_type[2], **common)
    else:
        loader = FastLinkNeighborLoader(
            data, edge_label_index=(edge_type, data[edge_type].edge_index),
            neg_sampling='binary', **common)
    assert loader.device.type == 'cuda'
    for batch in loader:
        for node_type in batch.node_types:
            n_id = batch[node_type].n_id
            assert n_id.is_cuda
            if 'x' in data[node_type]:
                assert torch.equal(batch[node_type].x.cpu(),
                                   data[node_type].x[n_id.cpu()])
        for rel in batch.edge_types:  # every sampled edge is the graph's
            src, _, dst = rel
            local = batch[rel].edge_index.cpu()
            pairs = torch.stack([batch[src].n_id.cpu()[local[0]],
                                 batch[dst].n_id.cpu()[local[1]]])
            assert torch.equal(data[rel].edge_index[:, batch[rel].e_id.cpu()],
                               pairs)
