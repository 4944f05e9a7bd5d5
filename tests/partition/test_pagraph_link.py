r"""PaGraph's parts for link prediction (``--task link``): every node is a
training node, each part holds its nodes' (L+1)-hop in-neighbourhoods, and
a part's share of a link split samples exactly as the whole graph."""
import numpy as np
import pytest
import torch

from pyg_fastload.io import open_dataset_dir, write_dataset_dir
from pyg_fastload.modes.link_split import LinkOptions, LinkSplit
from pyg_fastload.partition import open_partition, partition_dataset
from pyg_fastload.partition.pagraph_link import (PartRows, check_task,
                                                 part_links)

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
        links = part_links(_rows(graph, rows, end - start), 3, 2, None,
                           passing, labels)
        weight = links.negative_weight[0]
        assert torch.equal(weight, links.negative_weight[1])  # one type
        taken += links.labels.long()
        assert torch.equal(rows[links.label_index], labels[:, links.labels])
        assert bool((rows[links.label_index[1]] >= start).all())
        complete = weight.nonzero().view(-1)
        assert 0 < complete.numel() < rows.numel()  # not every row
        assert set(weight.unique().tolist()) == {0.0, 1.0}
        assert bool(weight[links.label_index].bool().all())
        local = rows[links.edge_index[None]]  # the part's edges in new ids
        assert torch.equal(local, passing[:, links.passing[None]])
        for mine, whole in zip(_trees(local, rows[complete], 2),
                               _trees(passing, rows[complete], 2)):
            assert mine == whole
    assert taken.tolist() == [1] * labels.size(1)  # each in one part


def _rows(graph, rows: torch.Tensor, owned: int) -> PartRows:
    return PartRows(graph.topology, {None: rows}, {None: owned},
                    {None: SIDE * SIDE})


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
        part_links(_rows(graph, rows, end - start), 3, 2, None,
                   torch.empty(2, 0, dtype=torch.long), label)
    with pytest.raises(ValueError, match='serves label edges sampled up to '
                       '2 hops, not 3'):
        part_links(_rows(graph, rows, end - start), 3, 3, None, label,
                   label)


@pytest.mark.parametrize('task, method, match', [
    ('edge', 'pagraph', "unknown --task 'edge'"),
    ('link', 'metis', 'the disjoint parts of --method metis serve every '
     'task'),
])
def test_a_task_partitioning_cannot_serve_is_refused(task, method, match):
    with pytest.raises(ValueError, match=match):
        check_task(task, method)
    check_task('node', method)


#: The relations of :func:`hetero_grid`: the grid's nodes are users and
#: items (every third node), its edges typed by their endpoints.
FOLLOWS = ('user', 'follows', 'user')
BUYS = ('user', 'buys', 'item')
REV = ('item', 'rev_buys', 'user')
SIMILAR = ('item', 'similar', 'item')


@pytest.fixture(scope='module')
def hetero_grid(tmp_path_factory):
    r"""``(dataset_dir, parts_dir)``: the grid with typed nodes, and 3
    PaGraph parts for link prediction with 2-hop sampling."""
    from torch_geometric.data import HeteroData

    from pyg_fastload.datasets.pyg_file import prepare_pyg
    root = tmp_path_factory.mktemp('hetero-grid')
    n = SIDE * SIDE
    is_item = torch.arange(n) % 3 == 0
    local = torch.zeros(n, dtype=torch.long)  # type-local ids
    local[is_item] = torch.arange(int(is_item.sum()))
    local[~is_item] = torch.arange(int((~is_item).sum()))
    edges = grid_edges()
    data = HeteroData()
    gen = torch.Generator().manual_seed(0)
    for node_type, where in (('user', ~is_item), ('item', is_item)):
        data[node_type].x = torch.randn(int(where.sum()), 4, generator=gen)
    for relation in (FOLLOWS, BUYS, REV, SIMILAR):
        keep = (is_item[edges[0]] == (relation[0] == 'item')) & \
            (is_item[edges[1]] == (relation[2] == 'item'))
        data[relation].edge_index = local[edges[:, keep]]
    torch.save(data, root / 'grid.pt')
    dataset = prepare_pyg(root / 'grid.pt', root / 'ds', progress=False).path
    partition_dataset(dataset, root / 'parts', 3, 'pagraph', num_hops=2,
                      progress=False, task='link')
    return dataset, root / 'parts'


def test_a_hetero_parts_links_sample_as_the_whole_graph(hetero_grid):
    r"""On a heterogeneous graph: each training label edge of the
    supervised relation lands in one part (its destination's); the trees
    over every relation of its endpoints and of every node a negative may
    be are those of the whole training graph."""
    from pyg_fastload.io import open_dataset_dir
    from pyg_fastload.distributed.rank_part import new_edge_ids
    dataset_dir, parts = hetero_grid
    topo = open_dataset_dir(dataset_dir).topology
    ds_edges = topo.relation_topology(BUYS).to_edge_index()
    split = LinkSplit(ds_edges, topo.num_nodes_of('item'),
                      LinkOptions(val_ratio=0.1, test_ratio=0.1), seed=0,
                      num_sources=topo.num_nodes_of('user'),
                      relation=(BUYS, REV))
    new_id = torch.from_numpy(np.load(parts / 'new_id.npy'))
    taken = None
    whole = []  # the training graph over every relation, global new ids
    for part in range(3):
        features, graph, book = open_partition(parts, part, local=True)
        first = {t: book.first_id(t) for t in book.node_types}
        if part == 0:
            passing = new_edge_ids(new_id, book,
                                   split.message_passing('train'), BUYS)
            labels = new_edge_ids(new_id, book,
                                  split.supervision('train')[0], BUYS)
            taken = torch.zeros(labels.size(1), dtype=torch.long)
            for relation in topo.edge_types:
                edges = {BUYS: passing, REV: passing.flip(0)}.get(
                    relation, new_edge_ids(
                        new_id, book,
                        topo.relation_topology(relation).to_edge_index(),
                        relation))
                whole.append(torch.stack([edges[0] + first[relation[0]],
                                          edges[1] + first[relation[2]]]))
            whole = torch.cat(whole, dim=1)
        rows = {t: features.get_tensor(attr_name='global_id', index=None,
                                       group_name=t) for t in book.node_types}
        owned = {t: book.part_range(part, t)[1] - book.part_range(part, t)[0]
                 for t in book.node_types}
        part_rows = PartRows(graph.topology, rows, owned,
                             book.num_nodes)
        links = part_links(part_rows, 3, 2, (BUYS, REV), passing, labels)
        taken += links.labels.long()
        label = torch.stack([rows['user'][links.label_index[0]],
                             rows['item'][links.label_index[1]]])
        assert torch.equal(label, labels[:, links.labels])
        start = book.part_range(part, 'item')[0]
        assert bool((label[1] >= start).all())  # into its own items
        assert set(links.edge_index) == {BUYS, REV}
        for relation, given in ((BUYS, passing), (REV, passing.flip(0))):
            src, _, dst = relation
            edges = links.edge_index[relation]
            assert torch.equal(torch.stack([rows[src][edges[0]],
                                            rows[dst][edges[1]]]),
                               given[:, links.passing[relation]])
        mine = []  # the part's training graph, global new ids
        for relation in topo.edge_types:
            edges = links.edge_index.get(relation)
            if edges is None:
                edges = graph.topology.relation_topology(
                    relation).to_edge_index()
            src, _, dst = relation
            mine.append(torch.stack([rows[src][edges[0]] + first[src],
                                     rows[dst][edges[1]] + first[dst]]))
        mine = torch.cat(mine, dim=1)
        complete = torch.cat([
            rows[t][weight.bool()] + first[t] for t, weight in
            zip(('user', 'item'), links.negative_weight)])
        assert 0 < complete.numel() < sum(r.numel() for r in rows.values())
        held = torch.cat([rows[t] + first[t] for t in rows])
        assert bool(torch.isin(torch.cat([label[0] + first['user'],
                                          label[1] + first['item']]),
                               complete).all())
        for part_tree, whole_tree in zip(_trees(mine, complete, 2),
                                         _trees(whole, complete, 2)):
            assert part_tree == whole_tree
        assert held.numel() < topo.num_nodes  # a local part
    assert taken.tolist() == [1] * labels.size(1)  # each in one part
