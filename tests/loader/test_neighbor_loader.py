import pytest
import torch
from torch_geometric.data import Data, HeteroData
from torch_geometric.nn import GraphSAGE
from torch_geometric.testing import MyFeatureStore, MyGraphStore

from pyg_fastload import FastNeighborLoader

from ..helpers import random_graph, requires_torch_sparse


def pyg_loader(*args, **kwargs):
    from torch_geometric.loader import NeighborLoader
    return NeighborLoader(*args, **kwargs)


def global_edges(batch):
    return set(zip(batch.n_id[batch.edge_index[0]].tolist(),
                   batch.n_id[batch.edge_index[1]].tolist()))


def test_batches_slice_every_attribute(graph):
    loader = FastNeighborLoader(graph, [4, 3], input_nodes=graph.train_mask,
                                batch_size=16)
    seeds = graph.train_mask.nonzero().view(-1)
    assert len(loader) == (seeds.numel() + 15) // 16
    seen = []
    for batch in loader:
        assert torch.equal(batch.x, graph.x[batch.n_id])
        assert torch.equal(batch.y, graph.y[batch.n_id])
        assert torch.equal(batch.train_mask, graph.train_mask[batch.n_id])
        assert torch.equal(batch.edge_attr, graph.edge_attr[batch.e_id])
        assert torch.equal(graph.edge_index[:, batch.e_id],
                           batch.n_id[batch.edge_index])
        assert batch.n_id.dtype == batch.e_id.dtype == torch.long
        assert batch.edge_index.dtype == torch.long
        # With a mask, `input_id` holds the seed node ids (as in PyG):
        assert torch.equal(batch.n_id[:batch.batch_size], batch.input_id)
        assert sum(batch.num_sampled_nodes) == batch.num_nodes
        assert sum(batch.num_sampled_edges) == batch.num_edges
        seen.append(batch.input_id)
    assert torch.equal(torch.cat(seen), seeds)
    # With an index, `input_id` holds positions into it:
    loader = FastNeighborLoader(graph, [2], input_nodes=seeds.flip(0),
                                batch_size=16)
    for batch in loader:
        assert torch.equal(batch.n_id[:batch.batch_size],
                           seeds.flip(0)[batch.input_id])


def test_same_seed_same_batches(graph):
    def run(seed):
        torch.manual_seed(seed)
        loader = FastNeighborLoader(graph, [3, 2], batch_size=32,
                                    shuffle=True)
        return [b.n_id for b in loader]

    a, b, c = run(0), run(0), run(1)
    assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
    assert not all(torch.equal(x, y)
                   for x, y in zip(a, c, strict=True))


def test_generator_drives_shuffle_and_sampling(graph):
    def run(seed):
        gen = torch.Generator().manual_seed(seed)
        loader = FastNeighborLoader(graph, [3], batch_size=50, shuffle=True,
                                    generator=gen)
        return [b.n_id for b in loader]

    assert all(torch.equal(x, y)
               for x, y in zip(run(4), run(4), strict=True))


def test_drop_last_and_disjoint(graph):
    loader = FastNeighborLoader(graph, [2, 2], batch_size=64, drop_last=True,
                                disjoint=True)
    assert len(loader) == graph.num_nodes // 64
    batch = next(iter(loader))
    assert batch.batch.numel() == batch.num_nodes
    assert torch.equal(batch.batch[:64], torch.arange(64))


def test_transform_is_applied(graph):
    loader = FastNeighborLoader(graph, [2], batch_size=10,
                                transform=lambda b: b.update({'tag': 1}))
    assert next(iter(loader)).tag == 1


def test_feature_and_graph_store_input(graph):
    feature_store, graph_store = MyFeatureStore(), MyGraphStore()
    feature_store.put_tensor(graph.x, group_name=None, attr_name='x',
                             index=None)
    feature_store.put_tensor(graph.y, group_name=None, attr_name='y',
                             index=None)
    graph_store.put_edge_index(graph.edge_index, edge_type=None,
                               layout='coo',
                               size=(graph.num_nodes, graph.num_nodes))
    loader = FastNeighborLoader((feature_store, graph_store), [3, 2],
                                input_nodes=torch.arange(20), batch_size=10)
    for batch in loader:
        assert torch.equal(batch.x, graph.x[batch.n_id])
        assert torch.equal(batch.y, graph.y[batch.n_id])
        assert torch.equal(graph.edge_index[:, batch.e_id],
                           batch.n_id[batch.edge_index])


def test_multiprocess_workers(graph):
    loader = FastNeighborLoader(graph, [3], batch_size=50, num_workers=2)
    batches = list(loader)
    assert sum(b.batch_size for b in batches) == graph.num_nodes
    for batch in batches:
        assert torch.equal(batch.x, graph.x[batch.n_id])


def test_graphsage_forward_runs():
    data = random_graph(num_features=16)
    model = GraphSAGE(16, 32, num_layers=2, out_channels=4)
    batch = next(iter(FastNeighborLoader(data, [5, 5], batch_size=32)))
    out = model(batch.x, batch.edge_index)[:batch.batch_size]
    assert out.shape == (32, 4)


@requires_torch_sparse
def test_structure_matches_pyg_neighbor_loader():
    data = random_graph(num_features=16)
    kwargs = dict(num_neighbors=[4, 3], input_nodes=data.train_mask,
                  batch_size=16)
    ours = next(iter(FastNeighborLoader(data, **kwargs)))
    ref = next(iter(pyg_loader(data, **kwargs)))
    ref_keys = set(ref.keys()) - {'num_sampled_nodes', 'num_sampled_edges'}
    assert ref_keys <= set(ours.keys())
    for key in ref_keys:
        a, b = getattr(ours, key), getattr(ref, key)
        assert type(a) is type(b), key
        if isinstance(a, torch.Tensor):
            assert a.dtype == b.dtype and a.dim() == b.dim(), key
    assert ours.batch_size == ref.batch_size
    assert torch.equal(ours.n_id[:ours.batch_size],
                       ref.n_id[:ref.batch_size])
    assert torch.equal(ours.input_id, ref.input_id)
    # Same orientation: edge_index[0] is the sampled neighbour (source).
    for batch in (ours, ref):
        assert torch.equal(data.edge_index[:, batch.e_id],
                           batch.n_id[batch.edge_index])
    model = GraphSAGE(16, 32, num_layers=2, out_channels=4)
    for batch in (ours, ref):
        out = model(batch.x, batch.edge_index)[:batch.batch_size]
        assert out.shape == (16, 4)


@requires_torch_sparse
@pytest.mark.parametrize('subgraph_type', ['directional', 'induced'])
def test_all_neighbors_equal_pyg_neighbor_loader(subgraph_type):
    data = random_graph()
    kwargs = dict(num_neighbors=[-1, -1], batch_size=25,
                  subgraph_type=subgraph_type)
    for ours, ref in zip(FastNeighborLoader(data, **kwargs),
                         pyg_loader(data, **kwargs), strict=True):
        assert torch.equal(ours.n_id[:ours.batch_size],
                           ref.n_id[:ref.batch_size])
        assert set(ours.n_id.tolist()) == set(ref.n_id.tolist())
        assert global_edges(ours) == global_edges(ref)
        assert ours.num_edges == ref.num_edges
        assert torch.equal(ours.e_id.sort().values, ref.e_id.sort().values)


@pytest.mark.reliability(
    fault='bad loader arguments (seeds, fan-outs, batch size, hetero input)',
    behaviour='errors naming the argument and the value')
def test_errors_name_the_argument(graph):
    with pytest.raises(ValueError, match='num_neighbors'):
        FastNeighborLoader(graph, [], batch_size=4)
    with pytest.raises(ValueError, match=r'num_neighbors\[0\]'):
        FastNeighborLoader(graph, [-3], batch_size=4)
    with pytest.raises(IndexError, match='input_nodes'):
        FastNeighborLoader(graph, [2], input_nodes=torch.tensor([0, 10**6]))
    with pytest.raises(IndexError, match='input_nodes'):
        FastNeighborLoader(graph, [2], input_nodes=torch.tensor([-1]))
    with pytest.raises(TypeError, match='input_nodes'):
        FastNeighborLoader(graph, [2], input_nodes=torch.tensor([0.5]))
    with pytest.raises(ValueError, match='mask of length 3'):
        FastNeighborLoader(graph, [2], input_nodes=torch.ones(3, dtype=bool))
    with pytest.raises(ValueError, match='batch_size'):
        FastNeighborLoader(graph, [2], batch_size=0)
    bad = Data(x=torch.randn(4, 2), edge_index=torch.tensor([[0, 9], [1, 2]]),
               num_nodes=4)
    with pytest.raises(ValueError, match='node id 9'):
        FastNeighborLoader(bad, [2])
    no_x = Data(edge_index=graph.edge_index, num_nodes=graph.num_nodes)
    with pytest.raises(ValueError, match="'x'"):
        FastNeighborLoader(no_x, [2])
    with pytest.raises(ValueError, match="must name the seeds' node type"):
        FastNeighborLoader(HeteroData(), [2])


def test_hop_counts_allow_trim_to_layer():
    # Nodes and edges come hop by hop, so PyG's trim_to_layer computes the
    # same seed outputs with far less work.
    data = random_graph(num_features=16)
    model = GraphSAGE(16, 32, num_layers=2, out_channels=4).eval()
    batch = next(iter(FastNeighborLoader(data, [5, 5], batch_size=32)))
    full = model(batch.x, batch.edge_index)[:batch.batch_size]
    trimmed = model(batch.x, batch.edge_index,
                    num_sampled_nodes_per_hop=batch.num_sampled_nodes,
                    num_sampled_edges_per_hop=batch.num_sampled_edges)
    assert torch.allclose(full, trimmed[:batch.batch_size], atol=1e-5)


@requires_torch_sparse
def test_sparse_adjacency_built_in_the_loading_stage():
    # The layout that measured fastest for SAGE/GCN on CPU
    # (`pyg-fastload bench model`): PyG's ToSparseTensor as the transform,
    # which runs in the feature-loading stage, off the model's path.
    import torch_geometric.transforms as T
    data = random_graph(num_features=16)
    model = GraphSAGE(16, 32, num_layers=2, out_channels=4).eval()
    torch.manual_seed(0)
    plain = next(iter(FastNeighborLoader(data, [5, 5], batch_size=32)))
    torch.manual_seed(0)
    sparse = next(iter(FastNeighborLoader(
        data, [5, 5], batch_size=32, pipeline=True,
        transform=T.ToSparseTensor(remove_edge_index=False))))
    assert torch.equal(plain.n_id, sparse.n_id)
    assert torch.allclose(model(plain.x, plain.edge_index),
                          model(sparse.x, sparse.adj_t), atol=1e-5)


@pytest.mark.reliability(
    fault='a `Data` whose `x` has fewer rows than nodes',
    behaviour=('`ValueError` naming both sizes (was: batches holding the '
               'whole matrix)'))
def test_feature_rows_must_match_the_node_count():
    from pyg_fastload import FastNeighborLoader
    data = random_graph(num_nodes=20, num_edges=60)
    data.x = data.x[:15]  # 15 rows for 20 nodes
    with pytest.raises(ValueError, match=r"'data\.x' has 15 rows but the "
                       r"graph has num_nodes = 20"):
        FastNeighborLoader(data, [2], batch_size=4)


@pytest.mark.reliability(
    fault="`data.x` or `data.y` replaced by new tensors after the loader was "
          "built (features normalised afterwards)",
    behaviour="the loader serves the new tensors, as PyG's does (was: the "
              "ones held at construction, silently)")
@pytest.mark.parametrize('pipeline', [False, True])
def test_replaced_features_and_labels_are_served(graph, pipeline):
    loader = FastNeighborLoader(graph, [3, 2], batch_size=50,
                                pipeline=pipeline)
    first = next(iter(loader))
    assert torch.equal(first.x, graph.x[first.n_id])
    graph.x = (graph.x - graph.x.mean(0)) / graph.x.std(0)  # normalised
    graph.y = graph.y + 10
    graph.z = torch.randn(graph.num_nodes, 2)  # an attribute added later
    for batch in loader:
        assert torch.equal(batch.x, graph.x[batch.n_id])
        assert torch.equal(batch.y, graph.y[batch.n_id])
        assert torch.equal(batch.z, graph.z[batch.n_id])
    del graph.x  # no feature matrix left: PyG's join slices the rest
    batch = next(iter(loader))
    assert 'x' not in batch and torch.equal(batch.y, graph.y[batch.n_id])


@pytest.mark.reliability(
    fault="`temporal_strategy='last'` or `is_sorted=True` (accepted and "
          "ignored before)",
    behaviour="`temporal_strategy='last'` without `time_attr`: "
              "`ValueError` naming both; `is_sorted=True` on an "
              "unsorted `edge_index`: `ValueError` naming the first edge out "
              "of order (a sorted one gives the same batches)")
def test_temporal_strategy_and_is_sorted_are_not_ignored(graph):
    with pytest.raises(ValueError, match="'temporal_strategy=\"last\"'.*"
                       "set 'time_attr'"):
        FastNeighborLoader(graph, [2], temporal_strategy='last')
    with pytest.raises(ValueError, match="'is_sorted=True'.*not sorted by "
                       "destination"):
        FastNeighborLoader(graph, [2], is_sorted=True)
    order = torch.argsort(graph.edge_index[1], stable=True)
    graph.edge_index = graph.edge_index[:, order]
    graph.edge_attr = graph.edge_attr[order]
    batches = [next(iter(FastNeighborLoader(
        graph, [3, 2], batch_size=16, is_sorted=flag,
        generator=torch.Generator().manual_seed(0)))) for flag in (False,
                                                                   True)]
    assert torch.equal(batches[0].n_id, batches[1].n_id)
    assert torch.equal(batches[0].edge_index, batches[1].edge_index)


@pytest.mark.reliability(
    fault="`input_nodes` given as a set; a sparse or meta-device `x`",
    behaviour="`TypeError`/`ValueError` naming the argument and the fix "
              "(was: raw torch errors)")
def test_unordered_seeds_and_valueless_features_are_refused(graph):
    with pytest.raises(TypeError, match="'input_nodes' is a set, which has "
                       "no order"):
        FastNeighborLoader(graph, [2], input_nodes={1, 2})
    sparse = graph.clone()
    sparse.x = graph.x.to_sparse()
    with pytest.raises(ValueError, match="'data.x' is a torch.sparse_coo "
                       "tensor: give a dense tensor"):
        FastNeighborLoader(sparse, [2])
    meta = graph.clone()
    meta.x = torch.empty(graph.num_nodes, 8, device='meta')
    with pytest.raises(ValueError, match="'data.x' is a tensor on the meta "
                       "device"):
        FastNeighborLoader(meta, [2])


@pytest.mark.reliability(
    fault="`num_workers` with `multiprocessing_context='spawn'` and "
          "`generator=`",
    behaviour="the workers load every batch (the generator stays in the "
              "main process; was: the workers died)")
def test_spawned_workers_with_a_generator(graph):
    loader = FastNeighborLoader(graph, [3, 2], batch_size=50, num_workers=1,
                                multiprocessing_context='spawn',
                                generator=torch.Generator().manual_seed(0))
    batches = list(loader)
    assert sum(int(b.batch_size) for b in batches) == graph.num_nodes
    assert loader.generator is not None  # kept here


@pytest.mark.reliability(
    fault="an edge_index passed as 'input_nodes', or 'edge_label_index' "
          "passed to the node loader",
    behaviour='an error naming the shape or the argument and '
              'FastLinkNeighborLoader (was: 2-row seeds flattened, a '
              'TypeError from DataLoader)')
def test_link_level_input_is_refused_naming_the_link_loader(graph):
    with pytest.raises(ValueError, match=r"'input_nodes' has shape \[2, "
                       r"\d+\] \(an edge_index\? .*FastLinkNeighbor"):
        FastNeighborLoader(graph, [2], input_nodes=graph.edge_index)
    cube = torch.zeros(4, 1, 1, dtype=torch.long)
    with pytest.raises(ValueError, match=r"shape \[4, 1, 1\]"):
        FastNeighborLoader(graph, [2], input_nodes=cube)
    for key in ('edge_label_index', 'neg_sampling_ratio'):
        with pytest.raises(TypeError, match=f"no '{key}': for link-level "
                           f"loading use pyg_fastload.FastLinkNeighbor"):
            FastNeighborLoader(graph, [2], **{key: graph.edge_index})
    # a column of ids, as mask.nonzero() gives, is one seed per row
    column = graph.train_mask.nonzero()
    loader = FastNeighborLoader(graph, [2], input_nodes=column,
                                batch_size=column.size(0))
    assert torch.equal(next(iter(loader)).n_id[:column.size(0)],
                       column.view(-1))
