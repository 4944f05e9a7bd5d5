r"""Seeds and label edges given as Python lists, tuples and NumPy arrays
(issue 47, item 6): taken as PyG's loaders take them, with PyG's batches;
where PyG fails or reads them wrongly, refused naming the argument, the
value's type and the fix."""
import numpy as np
import pytest
import torch
from torch_geometric.loader import LinkNeighborLoader, NeighborLoader

from pyg_fastload import FastLinkNeighborLoader, FastNeighborLoader

from ..helpers import random_graph, random_hetero_graph, requires_torch_sparse

IDS = [5, 17, 3, 42, 8, 29, 11]


def node_batches(kind, data, input_nodes):
    return list(kind(data, [-1], input_nodes=input_nodes, batch_size=3))


def assert_same_node_batches(ours, ref, node_type=None):
    r"""PyG's seeds (``input_id``, ``batch_size``, the first ``n_id``s) and
    sampled nodes (one hop of every neighbour: nothing random)."""
    assert len(ours) == len(ref)
    for a, b in zip(ours, ref):
        seeds_a = a if node_type is None else a[node_type]
        seeds_b = b if node_type is None else b[node_type]
        size = seeds_b.batch_size
        assert seeds_a.batch_size == size
        assert torch.equal(seeds_a.input_id, seeds_b.input_id)
        assert torch.equal(seeds_a.n_id[:size], seeds_b.n_id[:size])
        for store in ([None] if node_type is None else b.node_types):
            n_a = a.n_id if store is None else a[store].n_id
            n_b = b.n_id if store is None else b[store].n_id
            assert sorted(n_a.tolist()) == sorted(n_b.tolist())


#: Seeds PyG's NeighborLoader takes as node ids, and their count.
TAKEN = {
    'list': (IDS, 7),
    'tuple': (tuple(IDS), 7),
    'range': (range(10, 20), 10),
    'NumPy int64': (np.array(IDS), 7),
    'NumPy int32': (np.array(IDS, dtype=np.int32), 7),
    'floats of whole ids': ([float(i) for i in IDS], 7),
    'NumPy float64': (np.array(IDS, dtype=np.float64), 7),
    'column list': ([[i] for i in IDS], 7),
    'list of 0-d tensors': ([torch.tensor(i) for i in IDS], 7),
    'empty list': ([], 0),
}


@requires_torch_sparse
@pytest.mark.parametrize('name', list(TAKEN))
def test_list_and_numpy_input_nodes_give_pygs_batches(name):
    r"""A list, tuple, range or NumPy array of node ids gives PyG's
    batches, homogeneous and as ``(node type, ids)``."""
    seeds, count = TAKEN[name]
    data = random_graph(num_nodes=60, num_edges=300)
    ours = node_batches(FastNeighborLoader, data, seeds)
    assert_same_node_batches(ours, node_batches(NeighborLoader, data, seeds))
    assert sum(batch.batch_size for batch in ours) == count
    hetero = random_hetero_graph()
    ours = node_batches(FastNeighborLoader, hetero, ('paper', seeds))
    ref = node_batches(NeighborLoader, hetero, ('paper', seeds))
    assert_same_node_batches(ours, ref, 'paper')
    assert sum(batch['paper'].batch_size for batch in ours) == count


@requires_torch_sparse
def test_reversed_numpy_view_gives_the_batches_of_its_copy():
    r"""A NumPy view with a negative stride (``ids[::-1]``, which
    ``torch.from_numpy`` refuses) is read as its copy."""
    data = random_graph(num_nodes=60, num_edges=300)
    view = np.array(IDS)[::-1]
    ours = node_batches(FastNeighborLoader, data, view)
    ref = node_batches(NeighborLoader, data, view.copy())
    assert_same_node_batches(ours, ref)
    assert torch.cat([b.n_id[:b.batch_size] for b in ours]).tolist() == \
        IDS[::-1]


MASK = [i % 4 == 0 for i in range(60)]

#: Seeds PyG refuses (``None``) or misreads (the seeds PyG's batch has),
#: the error ours raises, and what its message says.
REFUSED = {
    'bool list': (MASK, [int(v) for v in MASK[:3]], ValueError,
                  r"^'input_nodes' is a list of booleans \(a mask\?\), "
                  r"which PyG's loaders read as node ids .*"
                  r"torch\.as_tensor\(mask\)"),
    'bool NumPy': (np.array(MASK), [int(v) for v in MASK[:3]], ValueError,
                   r"^'input_nodes' is a NumPy array of booleans .*"
                   r"np\.flatnonzero\(mask\)"),
    'int': (7, None, TypeError,
            r"^'input_nodes' is a single number \(7, an int\), not a "
            r"sequence of node ids: pass input_nodes=\[7\]"),
    'NumPy int64 scalar': (np.int64(7), None, TypeError,
                           r"^'input_nodes' is a single number \(7, an "
                           r"int64\).*input_nodes=\[7\]"),
    '0-d tensor': (torch.tensor(7), None, TypeError,
                   r"^'input_nodes' is a tensor with no dimensions "
                   r"\(tensor\(7\)\): pass a 1-D tensor"),
    'fractional floats': ([1.5, 3.0], [1, 3], TypeError,
                          r"^'input_nodes' is a list holding 1\.5, which is "
                          r"not a node id: PyG would cut it to an integer"),
    'NumPy strings': (np.array(['1', '3']), None, TypeError,
                      r"^'input_nodes' is a NumPy array of dtype <U1: pass "
                      r"integer node ids \(e\.g\. input_nodes\.astype"),
    'ragged list': ([[1], [3, 4]], None, TypeError,
                    r"^'input_nodes' is a list that is not a sequence of "
                    r"node ids .*torch\.tensor\(\[0, 5, 7\]\)"),
}


@requires_torch_sparse
@pytest.mark.reliability(
    fault="'input_nodes' as a bool list or NumPy mask (PyG reads its "
          "True/False as node ids 1/0), a single number or 0-d tensor, "
          "fractional floats (PyG truncates them), NumPy strings or a "
          "ragged list",
    behaviour="an error naming 'input_nodes', the value's type and the "
              "fix (a mask as a tensor, [id], integer ids); lists, tuples, "
              "ranges and NumPy ids give PyG's batches")
@pytest.mark.parametrize('name', list(REFUSED))
def test_input_nodes_pyg_refuses_or_misreads_are_refused(name):
    r"""Seeds that PyG refuses with an error that does not name them, or
    silently reads as other seeds, are refused by name."""
    seeds, pyg_seeds, error, match = REFUSED[name]
    data = random_graph(num_nodes=60, num_edges=300)
    if pyg_seeds is None:
        with pytest.raises(Exception):
            node_batches(NeighborLoader, data, seeds)
    else:  # what PyG serves instead of the seeds meant
        first = node_batches(NeighborLoader, data, seeds)[0]
        assert first.n_id[:first.batch_size].tolist() == pyg_seeds
    with pytest.raises(error, match=match):
        FastNeighborLoader(data, [-1], input_nodes=seeds, batch_size=3)
    with pytest.raises(error, match=match.replace('^', '')):
        FastNeighborLoader(random_hetero_graph(), [-1],
                           input_nodes=('paper', seeds), batch_size=3)


@requires_torch_sparse
def test_mask_tensor_still_selects_nodes():
    r"""A boolean mask *tensor* selects its nodes, as in PyG (the refusal
    above is for lists and NumPy arrays alone)."""
    data = random_graph(num_nodes=60, num_edges=300)
    mask = torch.tensor(MASK)
    ours = node_batches(FastNeighborLoader, data, mask)
    assert_same_node_batches(ours, node_batches(NeighborLoader, data, mask))
    assert torch.cat([b.n_id[:b.batch_size] for b in ours]).tolist() == \
        mask.nonzero().view(-1).tolist()


EDGE_TYPE = ('author', 'writes', 'paper')


def label_inputs(edges):
    r"""``edge_label_index`` as a list, a NumPy array, a tuple of lists and
    a pair of tensors, with the conversion each message names."""
    return {
        'list': (edges.tolist(), r'got a list .*'
                 r'pass torch\.tensor\(edge_label_index\)'),
        'NumPy': (edges.numpy(), r'got a NumPy array .*'
                  r'pass torch\.from_numpy\(edge_label_index\)'),
        'tuple of lists': (tuple(edges.tolist()), r'got a tuple .*'
                           r'pass torch\.tensor\(edge_label_index\)'),
        'pair of tensors': ((edges[0], edges[1]), r'got a tuple .*'
                            r'pass torch\.stack\(edge_label_index\)'),
    }


@requires_torch_sparse
@pytest.mark.reliability(
    fault="'edge_label_index' as a list, NumPy array or pair of tensors, "
          "'edge_label' as a list (PyG's LinkNeighborLoader fails on them: "
          "\"'list' object has no attribute 'clone'\")",
    behaviour="a TypeError naming the argument, the type and the "
              "conversion (torch.tensor, torch.from_numpy, torch.stack); "
              "a homogeneous list is no longer called an edge type")
def test_list_label_edges_name_the_conversion():
    r"""Label edges PyG's link loader fails on are refused naming the
    conversion to a tensor."""
    data = random_graph(num_nodes=60, num_edges=300)
    edges = data.edge_index[:, :10]
    for name, (value, match) in label_inputs(edges).items():
        with pytest.raises(Exception):
            LinkNeighborLoader(data, [2], edge_label_index=value)
        with pytest.raises(TypeError, match=r"^'edge_label_index' must be "
                           r"a \[2, num_edges\] tensor, " + match):
            FastLinkNeighborLoader(data, [2], edge_label_index=value)
    hetero = random_hetero_graph()
    for name, (value, match) in label_inputs(
            hetero[EDGE_TYPE].edge_index[:, :10]).items():
        with pytest.raises(Exception):
            LinkNeighborLoader(hetero, [2], edge_label_index=(EDGE_TYPE,
                                                               value))
        with pytest.raises(TypeError, match=r"^'edge_label_index' must be "
                           r"a \[2, num_edges\] tensor for edge type "
                           r"\('author', 'writes', 'paper'\), " + match):
            FastLinkNeighborLoader(hetero, [2],
                                   edge_label_index=(EDGE_TYPE, value))
    labels = [1] * 10
    with pytest.raises(Exception):
        LinkNeighborLoader(data, [2], edge_label_index=edges,
                           edge_label=labels)
    with pytest.raises(TypeError, match=r"^'edge_label' must be a tensor of "
                       r"one label per label edge, got a list .*pass "
                       r"torch\.tensor\(edge_label\)"):
        FastLinkNeighborLoader(data, [2], edge_label_index=edges,
                               edge_label=labels)
    with pytest.raises(TypeError, match=r"^'edge_label' must be a tensor "
                       r"of one label per label edge \(every edge of "
                       r"\('author', 'writes', 'paper'\)\), got a list"):
        FastLinkNeighborLoader(hetero, [2], edge_label_index=EDGE_TYPE,
                               edge_label=[1] * 300)


def test_a_node_type_on_a_homogeneous_graph_is_named():
    with pytest.raises(ValueError, match=r"'input_nodes=\('paper', \[1, 2\]\)' "
                       "names a node type, which only heterogeneous graphs "
                       "have: this graph is homogeneous"):
        FastNeighborLoader(random_graph(), [2], input_nodes=('paper', [1, 2]),
                           batch_size=2)
