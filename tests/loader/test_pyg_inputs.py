r"""Inputs PyG's loaders take, tried as a PyG user would: each is taken by
pyg_fastload's loaders too, with PyG's batches (issue 41, item 7)."""
import numpy as np
import pytest
import torch
from torch_geometric.data import Data
from torch_geometric.loader import LinkNeighborLoader, NeighborLoader
from torch_geometric.testing import MyFeatureStore, MyGraphStore
from torch_geometric.utils import index_sort
from torch_geometric.utils.sparse import index2ptr

from pyg_fastload import FastLinkNeighborLoader, FastNeighborLoader

from ..helpers import random_graph, random_hetero_graph, requires_torch_sparse


def global_edges(batch, edge_type=None):
    store = batch if edge_type is None else batch[edge_type]
    src = batch.n_id if edge_type is None else batch[edge_type[0]].n_id
    dst = batch.n_id if edge_type is None else batch[edge_type[-1]].n_id
    row, col = store.edge_index
    return sorted(zip(src[row].tolist(), dst[col].tolist()))


def link_batches(kind, data, num_neighbors, **kwargs):
    return list(kind(data, num_neighbors, batch_size=16, **kwargs))


def global_labels(batch, edge_type=None):
    store = batch if edge_type is None else batch[edge_type]
    src = batch.n_id if edge_type is None else batch[edge_type[0]].n_id
    dst = batch.n_id if edge_type is None else batch[edge_type[-1]].n_id
    row, col = store.edge_label_index
    return torch.stack([src[row], dst[col]])


def assert_same_link_batches(ours, ref, edge_type=None):
    r"""The same label edges, nodes and edges as PyG's batches (fan-outs
    of -1 or zero hops: nothing random)."""
    assert len(ours) == len(ref)
    for a, b in zip(ours, ref):
        store_a = a if edge_type is None else a[edge_type]
        store_b = b if edge_type is None else b[edge_type]
        assert torch.equal(store_a.input_id, store_b.input_id)
        assert torch.equal(global_labels(a, edge_type),
                           global_labels(b, edge_type))
        for node_type in ([None] if edge_type is None else b.node_types):
            n_a = a.n_id if node_type is None else a[node_type].n_id
            n_b = b.n_id if node_type is None else b[node_type].n_id
            assert set(n_a.tolist()) == set(n_b.tolist())
        assert global_edges(a, edge_type) == global_edges(b, edge_type)


@requires_torch_sparse
@pytest.mark.reliability(
    fault='a link loader on a graph without node features',
    behaviour="PyG's batches (n_id, edge_index, edge_label_index, no x)")
def test_link_loader_takes_a_graph_without_features():
    full = random_graph()
    data = Data(edge_index=full.edge_index, num_nodes=full.num_nodes)
    label = full.edge_index[:, :64]
    ours = link_batches(FastLinkNeighborLoader, data, [-1],
                        edge_label_index=label)
    ref = link_batches(LinkNeighborLoader, data, [-1],
                       edge_label_index=label)
    assert all('x' not in batch for batch in ours)
    assert_same_link_batches(ours, ref)
    for batch in ours:
        assert torch.equal(batch.n_id[batch.edge_label_index],
                           label[:, batch.input_id])


@requires_torch_sparse
def test_link_loader_takes_zero_hops():
    graph = random_graph()
    label = graph.edge_index[:, :64]
    ours = link_batches(FastLinkNeighborLoader, graph, [],
                        edge_label_index=label)
    ref = link_batches(LinkNeighborLoader, graph, [], edge_label_index=label)
    assert_same_link_batches(ours, ref)
    for a in ours:
        assert a.edge_index.size(1) == 0
        assert set(a.n_id.tolist()) == set(
            label[:, a.input_id].reshape(-1).tolist())
        assert torch.equal(a.x, graph.x[a.n_id])
    hetero = random_hetero_graph()
    edge_type = ('author', 'writes', 'paper')
    ours = link_batches(FastLinkNeighborLoader, hetero, [],
                        edge_label_index=edge_type)
    ref = link_batches(LinkNeighborLoader, hetero, [],
                       edge_label_index=edge_type)
    assert_same_link_batches(ours, ref, edge_type)
    for batch in ours:  # no hop, no hop's count
        assert all(batch[e].num_sampled_edges == [] for e in
                   hetero.edge_types)


@requires_torch_sparse
@pytest.mark.reliability(
    fault="label edges named by their ends, ('author', 'paper'), on a "
          "HeteroData (one or several edge types between them)",
    behaviour="the one edge type between them, PyG's batches; several or "
              "none: an error naming them")
def test_label_edge_type_named_by_its_ends():
    hetero = random_hetero_graph()
    edge_type = ('author', 'writes', 'paper')
    ours = link_batches(FastLinkNeighborLoader, hetero, [-1],
                        edge_label_index=('author', 'paper'))
    ref = link_batches(LinkNeighborLoader, hetero, [-1],
                       edge_label_index=('author', 'paper'))
    assert_same_link_batches(ours, ref, edge_type)
    label = hetero[edge_type].edge_index[:, :40]
    ours = link_batches(FastLinkNeighborLoader, hetero, [-1],
                        edge_label_index=(('author', 'paper'), label))
    ref = link_batches(LinkNeighborLoader, hetero, [-1],
                       edge_label_index=(('author', 'paper'), label))
    assert_same_link_batches(ours, ref, edge_type)
    hetero['author', 'reviews', 'paper'].edge_index = label
    with pytest.raises(ValueError, match=r"2 edge types from 'author' to "
                       r"'paper'.*'writes'.*'reviews'"):
        FastLinkNeighborLoader(hetero, [2], edge_label_index=('author',
                                                              'paper'))
    with pytest.raises(ValueError, match=r"0 edge types from 'paper' to "
                       r"'venue'"):
        FastLinkNeighborLoader(hetero, [2], edge_label_index=('paper',
                                                              'venue'))


def homogeneous_stores(graph):
    feature_store, graph_store = MyFeatureStore(), MyGraphStore()
    feature_store.put_tensor(graph.x, group_name=None, attr_name='x',
                             index=None)
    graph_store.put_edge_index(graph.edge_index, edge_type=None,
                               layout='coo',
                               size=(graph.num_nodes, graph.num_nodes))
    return feature_store, graph_store


@pytest.mark.reliability(
    fault="a store-backed temporal link loader whose 'time_attr' the "
          "feature store lacks",
    behaviour="an error naming 'time_attr' and where to put the times; "
              "with them there, temporal batches")
def test_store_link_loader_names_a_missing_time_attr():
    graph = random_graph()
    feature_store, graph_store = homogeneous_stores(graph)
    label = graph.edge_index[:, :32]

    def build():
        return FastLinkNeighborLoader(
            (feature_store, graph_store), [2], edge_label_index=label,
            edge_label_time=torch.full((32, ), 100.0), time_attr='time',
            batch_size=16)
    with pytest.raises(ValueError, match=r"time_attr='time'.* not a tensor "
                       r"of the feature store: put the node times there"):
        build()
    time = torch.arange(graph.num_nodes, dtype=torch.float)
    feature_store.put_tensor(time, group_name=None, attr_name='time',
                             index=None)
    for batch in build():  # every sampled neighbour not after 100
        assert batch.edge_index.size(1) > 0
        assert bool((time[batch.n_id[batch.edge_index[0]]] <= 100).all())


@requires_torch_sparse
@pytest.mark.parametrize('pipeline', [False, True])
def test_memmap_features_are_read_per_batch(tmp_path, monkeypatch,
                                            pipeline):
    graph = random_graph()
    path = tmp_path / 'x.npy'
    np.save(path, graph.x.numpy())
    memmap = np.load(path, mmap_mode='r')
    on_disk = Data(x=memmap, y=graph.y, edge_index=graph.edge_index)
    # never copied whole: every read takes a batch's rows
    rows_read = []
    take = np.take

    def counted_take(value, index, *args, **kwargs):
        if isinstance(value, np.memmap):
            rows_read.append(len(index))
        return take(value, index, *args, **kwargs)
    monkeypatch.setattr(np, 'take', counted_take)

    def batches(data, kind=FastNeighborLoader, **kwargs):
        return list(kind(data, [3, 2], batch_size=32, shuffle=True,
                         generator=torch.Generator().manual_seed(0),
                         **kwargs))
    ours = batches(on_disk, pipeline=pipeline)
    assert rows_read and max(rows_read) < graph.num_nodes
    for a, b in zip(ours, batches(graph, pipeline=pipeline), strict=True):
        assert isinstance(a.x, torch.Tensor)
        assert torch.equal(a.n_id, b.n_id)
        assert torch.equal(a.x, b.x)
    for a, b in zip(batches(on_disk, NeighborLoader),
                    batches(graph, NeighborLoader), strict=True):
        assert torch.equal(a.x, graph.x[a.n_id])
    label = graph.edge_index[:, :64]
    ours = batches(on_disk, FastLinkNeighborLoader, edge_label_index=label,
                   pipeline=pipeline)
    for batch in ours:
        assert torch.equal(batch.x, graph.x[batch.n_id])


@requires_torch_sparse
@pytest.mark.parametrize('kind', [FastNeighborLoader, FastLinkNeighborLoader])
def test_hetero_stores_holding_csr_and_csc_relations(kind):
    hetero = random_hetero_graph()
    feature_store, graph_store = MyFeatureStore(), MyGraphStore()
    hetero['institution'].x = torch.randn(10, 6)  # PyG needs every type's
    for node_type in hetero.node_types:
        feature_store.put_tensor(hetero[node_type].x, group_name=node_type,
                                 attr_name='x', index=None)
    for at, edge_type in enumerate(hetero.edge_types):
        src, dst = edge_type[0], edge_type[-1]
        size = (hetero[src].num_nodes, hetero[dst].num_nodes)
        row, col = hetero[edge_type].edge_index
        layout = ('coo', 'csr', 'csc')[at % 3]
        if layout == 'csr':  # stored sorted by source
            row, perm = index_sort(row, max_value=size[0])
            index = (index2ptr(row, size[0]), col[perm])
        elif layout == 'csc':
            col, perm = index_sort(col, max_value=size[1])
            index = (row[perm], index2ptr(col, size[1]))
        else:
            index = (row, col)
        graph_store.put_edge_index(index, edge_type=edge_type, layout=layout,
                                   size=size)
    stores = (feature_store, graph_store)
    if kind is FastNeighborLoader:
        args = dict(input_nodes=('paper', torch.arange(40)), batch_size=8)
        ref_kind = NeighborLoader
    else:
        edge_type = ('author', 'writes', 'paper')
        label = hetero[edge_type].edge_index[:, :40]
        args = dict(edge_label_index=(edge_type, label), batch_size=8)
        ref_kind = LinkNeighborLoader
    ours = list(kind(stores, [-1, -1], **args))
    ref = list(ref_kind(stores, [-1, -1], **args))
    assert len(ours) == len(ref)
    for a, b in zip(ours, ref):
        for node_type in b.node_types:
            assert set(a[node_type].n_id.tolist()) == \
                set(b[node_type].n_id.tolist())
            order = a[node_type].n_id.argsort()
            ref_order = b[node_type].n_id.argsort()
            assert torch.equal(a[node_type].x[order],
                               b[node_type].x[ref_order])
        for edge_type in b.edge_types:
            assert global_edges(a, edge_type) == global_edges(b, edge_type)
