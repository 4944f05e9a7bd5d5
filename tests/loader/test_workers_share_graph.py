r"""Several loaders over one graph, sampling at once in worker processes
and in threads, serve exactly the batches a sequential loader serves."""
import io
import pickle
import threading

import pytest
import torch
import torch_geometric.transforms as T
from torch_geometric.data import HeteroData

from pyg_fastload import FastLinkNeighborLoader, FastNeighborLoader

from ..helpers import random_graph

RATES = ('user', 'rates', 'movie')


def movielens_like(seed: int = 0) -> HeteroData:
    r"""PyG's temporal link prediction example's graph in small: users
    (one-hot features) rate movies (features) at times, with the reverse
    relation; many more ratings than one batch holds."""
    gen = torch.Generator().manual_seed(seed)
    data = HeteroData()
    data['user'].x = torch.eye(60)
    data['movie'].x = torch.randn(400, 8, generator=gen)
    rates = data[RATES]
    rates.edge_index = torch.stack([
        torch.randint(0, 60, (20000, ), generator=gen),
        torch.randint(0, 400, (20000, ), generator=gen)])
    rates.time = torch.randint(0, 10**6, (20000, ), generator=gen)
    rates.edge_label = torch.randint(0, 5, (20000, ), generator=gen).float()
    data = T.ToUndirected()(data)
    del data['movie', 'rev_rates', 'user'].edge_label
    return data


def temporal_loaders(data: HeteroData, **kwargs) -> list:
    r"""The example's three loaders (train, val, test label edges, by time)
    over one ``data``, ``temporal_strategy='last'`` (no random draw, so
    every way of loading gives the same batches)."""
    rates = data[RATES]
    splits = torch.arange(600).view(3, 200)
    return [FastLinkNeighborLoader(
        data, num_neighbors=[5, 3],
        edge_label_index=(RATES, rates.edge_index[:, split]),
        edge_label=rates.edge_label[split],
        edge_label_time=rates.time[split], time_attr='time',
        temporal_strategy='last', disjoint=True, batch_size=32, **kwargs)
        for split in splits]


def assert_same_hetero(batch: HeteroData, expected: HeteroData) -> None:
    for node_type in expected.node_types:
        assert torch.equal(batch[node_type].n_id, expected[node_type].n_id)
        assert torch.equal(batch[node_type].x, expected[node_type].x)
    for edge_type in expected.edge_types:
        assert torch.equal(batch[edge_type].edge_index,
                           expected[edge_type].edge_index)
        assert torch.equal(batch[edge_type].e_id, expected[edge_type].e_id)
    for key in ('input_id', 'edge_label_index', 'edge_label',
                'edge_label_time'):
        assert torch.equal(batch[RATES][key], expected[RATES][key])


def assert_same_data(batch, expected) -> None:
    assert sorted(batch.keys()) == sorted(expected.keys())
    for key in expected.keys():
        if isinstance(expected[key], torch.Tensor):
            assert torch.equal(batch[key], expected[key]), key
        else:
            assert batch[key] == expected[key], key


def assert_holds_no_graph(batch, data) -> None:
    r"""A batch holds its own tensors only, fewer entries than the graph's
    edge lists (not the graph's topology, which a worker process would
    send with every batch)."""
    graph = sum(store.edge_index.numel() for store in data.edge_stores)
    held = 0

    class Count(pickle.Pickler):
        def persistent_id(self, value):
            nonlocal held
            if isinstance(value, torch.Tensor):
                held += value.numel()
                return id(value)
            return None

    Count(io.BytesIO()).dump(batch)
    assert held < graph, f'the batch holds {held:,} tensor entries'


def interleaved(loaders: list) -> list:
    r"""Every loader's batches, taken one from each loader in turn."""
    out = [[] for _ in loaders]
    iterators = [iter(loader) for loader in loaders]
    while any(iterator is not None for iterator in iterators):
        for k, iterator in enumerate(iterators):
            batch = None if iterator is None else next(iterator, None)
            if batch is None:
                iterators[k] = None
            else:
                out[k].append(batch)
    return out


@pytest.mark.reliability(
    fault='several loaders over one graph sampling at once in worker '
          'processes (PyG\'s temporal link prediction example: three '
          'loaders, persistent workers)',
    behaviour='every batch equals the sequential loader\'s; a batch '
              'carries no copy of the graph (was: the graph\'s cached '
              'topology travelled with every batch, and a worker moving it '
              'to shared memory while sampling read freed memory: '
              'IndexError or a wrong batch)')
def test_worker_processes_of_three_loaders_give_the_sequential_batches():
    data = movielens_like()
    expected = [list(loader) for loader in
                temporal_loaders(data, pipeline=False)]
    loaders = temporal_loaders(data, num_workers=2, persistent_workers=True)
    for _ in range(2):  # the workers persist into the second epoch
        got = interleaved(loaders)
        for batches, references in zip(got, expected):
            assert len(batches) == len(references)
            for batch, reference in zip(batches, references):
                assert_same_hetero(batch, reference)
                assert_holds_no_graph(batch, data)
    assert_holds_no_graph(expected[0][0], data)
    for loader in loaders:  # ends the workers now (the garbage collector
        loader._iterator = None  # would wait seconds for each)


def test_worker_processes_of_homogeneous_loaders_give_the_sequential_batches():
    data = random_graph(num_nodes=2000, num_edges=20000)

    def loaders(**kwargs) -> list:  # every neighbour: no random draw
        return [FastNeighborLoader(data, [-1], batch_size=10,
                                   input_nodes=torch.arange(100), **kwargs),
                FastLinkNeighborLoader(data, [-1], batch_size=10,
                                       edge_label_index=data.edge_index[
                                           :, :100], **kwargs)]
    expected = [list(loader) for loader in loaders(pipeline=False)]
    got = interleaved(loaders(num_workers=2))
    for batches, references in zip(got, expected):
        assert len(batches) == len(references)
        for batch, reference in zip(batches, references):
            assert_same_data(batch, reference)
            assert_holds_no_graph(batch, data)


def test_loaders_in_threads_give_the_sequential_batches():
    data, graph = movielens_like(), random_graph(num_nodes=100)

    def loaders(**kwargs) -> list:  # the last one draws at random, seeded
        return temporal_loaders(data, **kwargs) + [
            FastNeighborLoader(graph, [4, 3], batch_size=20, shuffle=True,
                               generator=torch.Generator().manual_seed(0),
                               **kwargs)]
    expected = [list(loader) for loader in loaders(pipeline=False)]
    # Each loader samples in a thread of its own, all at once; pipelined
    # loaders sample in their stage threads too.
    got = [None] * (2 * len(expected))
    runs = [(i, loader) for settings in (
        dict(pipeline=True, sampling_workers=2), dict(pipeline=False))
        for i, loader in enumerate(loaders(**settings))]

    def run(slot: int, loader) -> None:
        got[slot] = list(loader)

    threads = [threading.Thread(target=run, args=(slot, loader))
               for slot, (_, loader) in enumerate(runs)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for (i, _), batches in zip(runs, got):
        assert batches is not None and len(batches) == len(expected[i])
        for batch, reference in zip(batches, expected[i]):
            if isinstance(reference, HeteroData):
                assert_same_hetero(batch, reference)
            else:
                assert_same_data(batch, reference)
            assert_holds_no_graph(batch, data if i < 3 else graph)


def test_a_topology_for_workers_has_no_private_array_left():
    loader = temporal_loaders(movielens_like(), num_workers=2)[0]
    topology = loader.link_sampler.topology
    arrays = [value for value in vars(topology).values()
              if isinstance(value, torch.Tensor)]
    assert len(arrays) > 4 and all(array.is_shared() for array in arrays)
