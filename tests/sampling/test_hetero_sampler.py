r"""The heterogeneous sampler against PyG's expectations: per-type ids index
the right rows and edges, seeds come first, per-relation fan-outs bound the
draws, which are uniform (or weighted) per relation."""
import re
from collections import Counter

import pytest
import torch
from scipy.stats import chisquare
from torch_geometric.data import HeteroData

from pyg_fastload.sampling import HeteroNeighborSampler

from ..helpers import random_hetero_graph, requires_torch_sparse

PAPER = 'paper'
CITES = ('paper', 'cites', 'paper')
WRITES = ('author', 'writes', 'paper')


def _check_batch(data, out, seeds, fanouts):
    r"""Every sampled edge exists in its relation, with its edge id; the
    seeds come first; per-hop counts add up; fan-outs bound the draws."""
    assert torch.equal(out.node[PAPER][:seeds.numel()], seeds)
    for node_type, nodes in out.node.items():
        assert sum(out.num_sampled_nodes[node_type]) == nodes.numel()
        if out.batch is None:  # one tree: every node once
            assert nodes.unique().numel() == nodes.numel()
    for edge_type, row in out.row.items():
        src, _, dst = edge_type
        ei = data[edge_type].edge_index
        e_id, col = out.edge[edge_type], out.col[edge_type]
        assert torch.equal(ei[0, e_id], out.node[src][row])
        assert torch.equal(ei[1, e_id], out.node[dst][col])
        assert sum(out.num_sampled_edges[edge_type]) == row.numel()
        # a node is expanded once (at the hop it was reached), drawing at
        # most the fan-out along each relation
        if col.numel():
            assert int(torch.bincount(col).max()) <= max(fanouts[edge_type])
        if out.batch is not None:  # trees never mix
            assert torch.equal(out.batch[src][row], out.batch[dst][col])


@pytest.mark.parametrize('replace', [False, True])
@pytest.mark.parametrize('disjoint', [False, True])
def test_batches_index_the_source_graph(hetero_graph, replace, disjoint):
    sampler = HeteroNeighborSampler(hetero_graph, [4, 3], replace=replace,
                                    disjoint=disjoint)
    seeds = torch.tensor([5, 0, 77, 31])
    out = sampler.sample_hetero(PAPER, seeds,
                                torch.Generator().manual_seed(3))
    fanouts = {e: [4, 3] for e in hetero_graph.edge_types}
    _check_batch(hetero_graph, out, seeds, fanouts)
    assert set(out.num_sampled_nodes) == set(hetero_graph.node_types)
    assert out.num_sampled_nodes[PAPER][0] == 4  # only papers are seeds
    assert out.num_sampled_nodes['author'][0] == 0
    # authors reached at hop 1 through 'writes'; institutions only at hop 2
    assert out.num_sampled_nodes['author'][1] > 0
    assert out.num_sampled_nodes['institution'][1] == 0


def test_fanout_dicts_of_zeros_sample_none_and_name_unknown_ones(
        hetero_graph):
    zeros = {e: [0, 0] for e in hetero_graph.edge_types}
    sampler = HeteroNeighborSampler(hetero_graph, {**zeros, CITES: [5, 5]})
    out = sampler.sample_hetero(PAPER, torch.arange(10))
    assert out.row[CITES].numel() > 0
    assert all(out.row[e].numel() == 0 for e in hetero_graph.edge_types
               if e != CITES)
    assert set(out.node) == set(hetero_graph.node_types)
    assert out.node['author'].numel() == 0
    with pytest.raises(ValueError, match=r"edge type\(s\) \[\('paper', "
                       r"'buys', 'paper'\)\]"):
        HeteroNeighborSampler(hetero_graph, {('paper', 'buys', 'paper'): [1]})
    with pytest.raises(ValueError, match='the number of hops must be the '
                       'same across all edge types'):  # PyG's words
        HeteroNeighborSampler(hetero_graph, {CITES: [1], WRITES: [1, 2]})


@pytest.mark.reliability(
    fault='a heterogeneous num_neighbors dict that leaves out an edge type '
          '(a misspelt relation name)',
    behaviour="PyG's error, 'Missing number of neighbors for edge type', "
              "naming the relations left out (was: sampled silently as "
              "[0, 0], never sampled)")
def test_fanout_dicts_that_leave_out_relations_are_refused(hetero_graph):
    from pyg_fastload import FastNeighborLoader
    left_out = [e for e in hetero_graph.edge_types if e != CITES]
    with pytest.raises(ValueError, match=f"^Missing number of neighbors "
                       f"for edge type '{re.escape(str(left_out[0]))}'"):
        HeteroNeighborSampler(hetero_graph, {CITES: [5, 5]})
    with pytest.raises(ValueError, match=re.escape(str(left_out))):
        FastNeighborLoader(hetero_graph, {CITES: [5, 5]},
                           input_nodes=PAPER, batch_size=4)


def test_per_relation_fanouts_are_exact_at_high_degree():
    # paper 0 has 10 citing papers and 6 authors: fan-outs 3 and 2
    data = HeteroData()
    data['paper'].num_nodes = 11
    data['author'].num_nodes = 6
    data['paper', 'cites', 'paper'].edge_index = torch.stack(
        [torch.arange(1, 11), torch.zeros(10, dtype=torch.long)])
    data['author', 'writes', 'paper'].edge_index = torch.stack(
        [torch.arange(6), torch.zeros(6, dtype=torch.long)])
    for replace in (False, True):
        sampler = HeteroNeighborSampler(
            data, {CITES: [3], WRITES: [2]}, replace=replace)
        counts = {CITES: Counter(), WRITES: Counter()}
        trials = 2000
        gen = torch.Generator().manual_seed(4)
        for _ in range(trials):
            out = sampler.sample_hetero(PAPER, torch.tensor([0]), gen)
            assert out.row[CITES].numel() == 3
            assert out.row[WRITES].numel() == 2
            for e in (CITES, WRITES):
                counts[e].update(out.node[e[0]][out.row[e]].tolist())
        cited = [counts[CITES][i] for i in range(1, 11)]
        written = [counts[WRITES][i] for i in range(6)]
        assert chisquare(cited).pvalue > 1e-3  # uniform per relation
        assert chisquare(written).pvalue > 1e-3


def test_weights_are_followed_per_relation():
    data = HeteroData()
    data['paper'].num_nodes = 6
    data['author'].num_nodes = 4
    data['paper', 'cites', 'paper'].edge_index = torch.stack(
        [torch.arange(1, 6), torch.zeros(5, dtype=torch.long)])
    data['paper', 'cites', 'paper'].w = torch.tensor([0., 1., 1., 2., 4.])
    data['author', 'writes', 'paper'].edge_index = torch.stack(
        [torch.arange(4), torch.zeros(4, dtype=torch.long)])
    data['author', 'writes', 'paper'].w = torch.tensor([1., 0., 0., 3.])
    sampler = HeteroNeighborSampler(data, [1], weight_attr='w')
    gen = torch.Generator().manual_seed(5)
    cited, written = Counter(), Counter()
    trials = 3000
    for _ in range(trials):
        out = sampler.sample_hetero(PAPER, torch.tensor([0]), gen)
        cited.update(out.node[PAPER][out.row[CITES]].tolist())
        written.update(out.node['author'][out.row[WRITES]].tolist())
    assert cited[1] == 0 and written[1] == written[2] == 0
    assert chisquare([cited[i] for i in range(2, 6)],
                     [trials * w / 8 for w in (1, 1, 2, 4)]).pvalue > 1e-3
    assert chisquare([written[0], written[3]],
                     [trials / 4, trials * 3 / 4]).pvalue > 1e-3
    del data['author', 'writes', 'paper'].w
    with pytest.raises(ValueError, match=r"not an attribute of edge type "
                       r"\('author', 'writes', 'paper'\)"):
        HeteroNeighborSampler(data, [1], weight_attr='w')


def test_induced_and_bidirectional_subgraphs(hetero_graph):
    seeds = torch.arange(6)
    out = HeteroNeighborSampler(hetero_graph, [3, 2],
                                subgraph_type='induced').sample_hetero(
                                    PAPER, seeds)
    for edge_type in hetero_graph.edge_types:
        src, _, dst = edge_type
        ei = hetero_graph[edge_type].edge_index
        inside = torch.isin(ei[0], out.node[src]) & torch.isin(
            ei[1], out.node[dst])
        assert out.row[edge_type].numel() == int(inside.sum())
    out = HeteroNeighborSampler(hetero_graph, [3, 2],
                                subgraph_type='bidirectional').sample_hetero(
                                    PAPER, seeds)
    forward = set(zip(out.row[WRITES].tolist(), out.col[WRITES].tolist()))
    back = ('paper', 'rev_writes', 'author')
    reverse = set(zip(out.col[back].tolist(), out.row[back].tolist()))
    assert forward == reverse and forward


def test_deterministic_under_a_generator(hetero_graph):
    sampler = HeteroNeighborSampler(hetero_graph, [4, 3])
    runs = [sampler.sample_hetero(PAPER, torch.arange(8),
                                  torch.Generator().manual_seed(9))
            for _ in range(2)]
    for key in runs[0].node:
        assert torch.equal(runs[0].node[key], runs[1].node[key])
    for key in runs[0].edge:
        assert torch.equal(runs[0].edge[key], runs[1].edge[key])


@requires_torch_sparse
def test_full_neighbourhoods_equal_pygs(hetero_graph):
    from torch_geometric.loader import NeighborLoader
    seeds = torch.tensor([3, 50, 9])
    ours = HeteroNeighborSampler(hetero_graph, [-1, -1]).sample_hetero(
        PAPER, seeds)
    theirs = next(iter(NeighborLoader(hetero_graph, [-1, -1],
                                      input_nodes=(PAPER, seeds),
                                      batch_size=3)))
    for node_type in hetero_graph.node_types:
        assert set(ours.node[node_type].tolist()) == \
            set(theirs[node_type].n_id.tolist())
    for edge_type in hetero_graph.edge_types:
        assert sorted(ours.edge[edge_type].tolist()) == \
            sorted(theirs[edge_type].e_id.tolist())


@pytest.mark.reliability(
    fault='a HeteroData whose edge type names a node type it lacks, or whose '
          'relation holds ids beyond its node type',
    behaviour='an error naming the edge type, the node type and the bound')
@pytest.mark.parametrize('edit, match', [
    (lambda d: d['venue', 'hosts', 'paper'].__setattr__(
        'edge_index', torch.zeros(2, 1, dtype=torch.long)),
     "source node type 'venue' is not a node type"),
    (lambda d: d[WRITES].__setattr__('edge_index', torch.tensor([[80], [0]])),
     r"\('author', 'writes', 'paper'\).*source node id 80, outside \[0, 80"),
])
def test_bad_graphs_name_the_type(edit, match):
    data = random_hetero_graph()
    edit(data)
    with pytest.raises(ValueError, match=match):
        HeteroNeighborSampler(data, [2])
