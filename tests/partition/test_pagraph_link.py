r"""PaGraph's parts for link prediction (``--task link``): every node is a
training node, each part holds its nodes' (L+1)-hop in-neighbourhoods, and
a part's share of a link split samples exactly as the whole graph."""
import numpy as np
import pytest
import torch

from pyg_fastload.io import open_dataset_dir, write_dataset_dir
from pyg_fastload.modes.link_split import LinkOptions, LinkSplit
from pyg_fastload.partition import open_partition, partition_dataset
from pyg_fastload.partition.pagraph_link import check_task, part_links

from ..helpers import in_neighbourhood

SIDE = 16  # a SIDE x SIDE grid: neighbourhoods stay local


def grid_edges() -> torch.Tensor:
    r"""Both directions of every edge of the grid, plus a few long links."""
    ids = torch.arange(SIDE * SIDE).view(SIDE, SIDE)
    pairs = [torch.stack([ids[:, :-1].reshape(-1), ids[:, 1:].reshape(-1)]),
             torch.stack([ids[:-1].reshape(-1), ids[1:].reshape(-1)]),
             torch.tensor([[0, 37], [200, 91]])]
    edges = torch.cat(pairs, dim=1)
    return torch.cat([edges, edges.flip(0)], dim=1)


@pytest.fixture(scope='module')
def grid(tmp_path_factory):
    r"""``(dataset_dir, parts_dir)``: the grid, and 3 PaGraph parts for
    link prediction with 2-hop sampling."""
    root = tmp_path_factory.mktemp('grid')
    edges = grid_edges()
    n = SIDE * SIDE
    order = torch.argsort(edges[1] * n + edges[0])
    indptr = torch.zeros(n + 1, dtype=torch.long)
    indptr[1:] = torch.cumsum(torch.bincount(edges[1], minlength=n), 0)
    gen = torch.Generator().manual_seed(0)
    write_dataset_dir(root / 'ds', num_nodes=n, indptr=indptr,
                      indices=edges[0, order],
                      node_arrays={'x': torch.randn(n, 4, generator=gen)},
                      name='grid', source='a grid',
                      progress=False)
    partition_dataset(root / 'ds', root / 'parts', 3, 'pagraph', num_hops=2,
                      progress=False, task='link')
    return root / 'ds', root / 'parts'


def test_every_node_is_owned_with_its_reach_in_its_part(grid):
    dataset_dir, parts = grid
    topo = open_dataset_dir(dataset_dir).topology
    owner = torch.from_numpy(np.load(parts / 'owner.npy'))
    new_id = torch.from_numpy(np.load(parts / 'new_id.npy'))
    held_total = 0
    for part in range(3):
        features, _, _ = open_partition(parts, part)
        held = features.get_tensor(attr_name='global_id', index=None,
                                   group_name=None)
        own = (owner == part).nonzero().view(-1)
        assert own.numel() > 0
        # 3 hops: the 2 sampled from a label edge's source, one further
        need = torch.cat([own, in_neighbourhood(topo, own, 3)]).unique()
        assert set(new_id[need].tolist()) == set(held.tolist())
        held_total += held.numel()
    assert held_total < 3 * topo.num_nodes  # local parts, not copies


def _trees(edge_index: torch.Tensor, roots: torch.Tensor, depth: int):
    r"""Every root's ``depth``-hop in-edge tree as a set of edges."""
    trees = []
    for root in roots.tolist():
        frontier, edges = {root}, set()
        for _ in range(depth):
            hit = torch.isin(edge_index[1], torch.tensor(sorted(frontier)))
            found = {tuple(e) for e in edge_index[:, hit].t().tolist()}
            edges |= found
            frontier = {s for s, _ in found}
        trees.append(edges)
    return trees


def test_a_parts_links_sample_as_the_whole_graph(grid):
    r"""Each training label edge lands in one part (its destination's);
    the trees of its endpoints and of every node a negative may be are
    those of the whole training graph; negatives only among them."""
    dataset_dir, parts = grid
    topo = open_dataset_dir(dataset_dir).topology
    split = LinkSplit(topo.to_edge_index(), topo.num_nodes,
                      LinkOptions(val_ratio=0.1, test_ratio=0.1), seed=0)
    new_id = torch.from_numpy(np.load(parts / 'new_id.npy'))
    passing = new_id[split.message_passing('train')]
    labels = new_id[split.supervision('train')[0]]
    taken = torch.zeros(labels.size(1), dtype=torch.long)
    for part in range(3):
        features, graph, book = open_partition(parts, part, local=True)
        rows = features.get_tensor(attr_name='global_id', index=None,
                                   group_name=None)
        start, end = book.part_range(part)
        links = part_links(graph.topology, rows, end - start, 3, 2, passing,
                           labels, topo.num_nodes)
        taken += links.labels.long()
        assert torch.equal(rows[links.label_index], labels[:, links.labels])
        assert bool((rows[links.label_index[1]] >= start).all())
        complete = links.negative_weight.nonzero().view(-1)
        assert 0 < complete.numel() < rows.numel()  # not every row
        assert set(links.negative_weight.unique().tolist()) == {0.0, 1.0}
        assert bool(links.negative_weight[links.label_index].bool().all())
        local = rows[links.edge_index]  # the part's edges in new ids
        assert torch.equal(local, passing[:, links.passing])
        for mine, whole in zip(_trees(local, rows[complete], 2),
                               _trees(passing, rows[complete], 2)):
            assert mine == whole
    assert taken.tolist() == [1] * labels.size(1)  # each in one part


def test_a_label_edge_the_graph_lacks_is_named(grid):
    dataset_dir, parts = grid
    features, graph, book = open_partition(parts, 0, local=True)
    rows = features.get_tensor(attr_name='global_id', index=None,
                               group_name=None)
    start, end = book.part_range(0)
    held = set(rows.tolist())
    outside = next(i for i in range(SIDE * SIDE) if i not in held)
    label = torch.tensor([[outside], [start]])
    with pytest.raises(ValueError, match='1 training label edges come from '
                       'nodes whose 2-hop trees the part does not hold'):
        part_links(graph.topology, rows, end - start, 3, 2,
                   torch.empty(2, 0, dtype=torch.long), label, SIDE * SIDE)
    with pytest.raises(ValueError, match='serves label edges sampled up to '
                       '2 hops, not 3'):
        part_links(graph.topology, rows, end - start, 3, 3, label, label,
                   SIDE * SIDE)


@pytest.mark.parametrize('task, method, hetero, match', [
    ('edge', 'pagraph', False, "unknown --task 'edge'"),
    ('link', 'metis', False, 'the disjoint parts of --method metis serve '
     'every task'),
    ('link', 'pagraph', True, 'is for homogeneous datasets'),
])
def test_a_task_partitioning_cannot_serve_is_refused(task, method, hetero,
                                                     match):
    with pytest.raises(ValueError, match=match):
        check_task(task, method, hetero)
    check_task('node', method, hetero)
