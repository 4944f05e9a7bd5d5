r"""LABOR (with its importance weights, LABOR-1) on every workload a loader
serves in one process: nodes and links, homogeneous and heterogeneous,
in time or not. Each batch's edges are edges of the graph, carry one weight
each, and in time no sampled edge is later than its tree's seed."""
import pytest
import torch

from pyg_fastload import FastLinkNeighborLoader, FastNeighborLoader

from ..helpers import random_graph, random_hetero_graph

LABOR_1 = {'class_path': 'labor', 'init_args': {'importance_sampling': 1}}


def _graph(hetero: bool, timed: bool):
    data = random_hetero_graph() if hetero else random_graph(
        num_nodes=300, num_edges=4000, seed=7)
    if timed:
        gen = torch.Generator().manual_seed(3)
        for store in (data.node_stores if hetero else [data]):
            store.time = torch.randint(0, 50, (store.num_nodes, ),
                                       generator=gen)
    return data


def _edges_of(data, edge_type=None):
    store = data if edge_type is None else data[edge_type]
    return set(zip(store.edge_index[0].tolist(),
                   store.edge_index[1].tolist()))


def _check(batch, data, hetero: bool, timed: bool) -> None:
    relations = batch.edge_types if hetero else [None]
    for edge_type in relations:
        store = batch if edge_type is None else batch[edge_type]
        src_store = batch if edge_type is None else batch[edge_type[0]]
        dst_store = batch if edge_type is None else batch[edge_type[2]]
        src = src_store.n_id[store.edge_index[0]]
        dst = dst_store.n_id[store.edge_index[1]]
        assert set(zip(src.tolist(), dst.tolist())) <= \
            _edges_of(data, edge_type)
        assert store.edge_weight.numel() == store.edge_index.size(1)
        assert bool((store.edge_weight > 0).all())
        if timed and store.edge_index.numel():
            # every sampled source is not later than its tree's seed time
            tree = src_store.batch[store.edge_index[0]]
            seed_time = (batch if not hetero else
                         batch[_seed_type(batch)]).seed_time
            assert bool((src_store.time[store.edge_index[0]] <=
                         seed_time[tree]).all())


def _seed_type(batch):
    return next(t for t in batch.node_types if 'seed_time' in batch[t])


@pytest.mark.parametrize('timed', [False, True])
@pytest.mark.parametrize('hetero', [False, True])
def test_labor_node_batches(hetero, timed):
    data = _graph(hetero, timed)
    seeds = ('paper', torch.arange(60)) if hetero else torch.arange(60)
    loader = FastNeighborLoader(
        data, [4, 3], input_nodes=seeds, batch_size=20,
        neighbor_sampler=LABOR_1, time_attr='time' if timed else None)
    batches = list(loader)
    assert len(batches) == 3
    for batch in batches:
        if timed:  # the node loader's seeds carry their times per tree
            store = batch['paper'] if hetero else batch
            store.seed_time = store.time[:store.batch_size]
        _check(batch, data, hetero, timed)


@pytest.mark.parametrize('timed', [False, True])
@pytest.mark.parametrize('hetero', [False, True])
def test_labor_link_batches(hetero, timed):
    data = _graph(hetero, timed)
    edge_type = ('author', 'writes', 'paper')
    index = data[edge_type].edge_index[:, :60] if hetero else \
        data.edge_index[:, :60]
    kwargs = {}
    if timed:
        src = data['author'].time if hetero else data.time
        kwargs = dict(time_attr='time', edge_label_time=src[index[0]] + 5)
    loader = FastLinkNeighborLoader(
        data, [4, 3], edge_label_index=(edge_type, index) if hetero
        else index, batch_size=20, neg_sampling='binary',
        neighbor_sampler=LABOR_1, **kwargs)
    for batch in loader:
        for edge_type in (batch.edge_types if hetero else [None]):
            store = batch if edge_type is None else batch[edge_type]
            assert store.edge_weight.numel() == store.edge_index.size(1)
        relations = batch.edge_types if hetero else [None]
        for relation in relations:
            store = batch if relation is None else batch[relation]
            src = (batch if relation is None else batch[relation[0]]).n_id[
                store.edge_index[0]]
            dst = (batch if relation is None else batch[relation[2]]).n_id[
                store.edge_index[1]]
            assert set(zip(src.tolist(), dst.tolist())) <= \
                _edges_of(data, relation)
