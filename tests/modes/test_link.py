r"""``task: link``: RandomLinkSplit-style splits (no evaluation edge carries
messages where it is scored), fixed evaluation negatives, and the link
loaders of the data module."""
import pytest
import torch
from torch_geometric.data import Data
from torch_geometric.utils import to_undirected

from pyg_fastload.config import SettingError
from pyg_fastload.lightning import FastLoadDataModule, LinkOptions
from pyg_fastload.modes.link_split import LinkSplit, is_undirected
from pyg_fastload.partition import partition_dataset


def undirected_graph(num_nodes=300, num_edges=1500, seed=0):
    gen = torch.Generator().manual_seed(seed)
    edge_index = torch.randint(num_nodes, (2, num_edges), generator=gen)
    edge_index = edge_index[:, edge_index[0] != edge_index[1]]
    return Data(x=torch.randn(num_nodes, 8, generator=gen),
                edge_index=to_undirected(edge_index, num_nodes=num_nodes),
                num_nodes=num_nodes)


def pairs(edge_index):
    return set(zip(*edge_index.tolist()))


def links(edge_index):
    r"""Undirected links as sorted pairs."""
    return {tuple(sorted(p)) for p in pairs(edge_index)}


@pytest.mark.reliability(
    fault='a validation or test edge (either direction) in the message '
          'passing graph of the split that scores it, splits that overlap '
          'or lose edges',
    behaviour='train/val graphs hold only training links, the test graph '
              'training and validation links, both directions; the splits '
              'partition the links')
def test_splits_never_leak_evaluation_edges_into_message_passing():
    graph = undirected_graph()
    split = LinkSplit(graph.edge_index, graph.num_nodes, LinkOptions(
        val_ratio=0.1, test_ratio=0.2), seed=0)
    assert split.undirected
    train, val, test = (links(split.edges[s]) for s in
                        ('train', 'val', 'test'))
    assert not train & val and not train & test and not val & test
    assert train | val | test == links(graph.edge_index)
    assert len(val) == int(0.1 * len(links(graph.edge_index)))
    for name, allowed in (('train', train), ('val', train),
                          ('test', train | val)):
        graph_edges = split.message_passing(name)
        assert links(graph_edges) == allowed, name
        assert pairs(graph_edges) == pairs(graph_edges.flip(0))  # both ways
    # the same split on every rank (same seed), another with another seed
    again = LinkSplit(graph.edge_index, graph.num_nodes, LinkOptions(
        val_ratio=0.1, test_ratio=0.2), seed=0)
    assert torch.equal(again.edges['val'], split.edges['val'])
    other = LinkSplit(graph.edge_index, graph.num_nodes, LinkOptions(
        val_ratio=0.1, test_ratio=0.2), seed=1)
    assert not torch.equal(other.edges['val'], split.edges['val'])


def test_directed_graphs_split_edges_one_way():
    edge_index = torch.tensor([[0, 1, 2, 3, 4, 5, 6, 7, 8, 9] * 3,
                               list(range(1, 11)) * 3])
    edge_index[1] = (edge_index[1] + torch.arange(30) // 10 * 3) % 12
    assert not is_undirected(edge_index, 12)
    split = LinkSplit(edge_index, 12, LinkOptions(val_ratio=0.2,
                                                  test_ratio=0.2), seed=0)
    assert not split.undirected
    assert split.edges['train'].size(1) + split.edges['val'].size(1) + \
        split.edges['test'].size(1) == edge_index.size(1)
    assert torch.equal(split.message_passing('train'), split.edges['train'])


@pytest.mark.reliability(
    fault='evaluation negatives that are true edges, that change between '
          'epochs, or a group not led by its true edge',
    behaviour='each evaluation edge is followed by eval_negatives fixed '
              'non-edges of the whole graph from its source; labels 1 then '
              '0s; the same on every call')
def test_evaluation_candidates_are_fixed_non_edges():
    graph = undirected_graph()
    options = LinkOptions(eval_edges=50, eval_negatives=20)
    split = LinkSplit(graph.edge_index, graph.num_nodes, options, seed=3)
    index, label = split.supervision('val')
    assert index.size(1) == 50 * 21 == label.numel()
    groups = index.view(2, 50, 21)
    assert bool((groups[0] == groups[0, :, :1]).all())  # one source each
    assert pairs(groups[:, :, 0].reshape(2, -1)) <= pairs(split.edges['val'])
    negatives = pairs(groups[:, :, 1:].reshape(2, -1))
    assert not negatives & pairs(graph.edge_index)
    assert torch.equal(label.view(50, 21)[:, 0], torch.ones(50))
    assert label.view(50, 21)[:, 1:].sum() == 0
    again = LinkSplit(graph.edge_index, graph.num_nodes, options, seed=3)
    assert torch.equal(again.supervision('val')[0], index)


@pytest.mark.reliability(
    fault='careless or huge link options (an unknown negative mode, a '
          'fractional, infinite or NaN ratio, no training edges left, a '
          'million negatives per evaluation edge, task link on a partitioned '
          'mode)',
    behaviour='a SettingError naming the link.* key before anything is '
              'allocated')
def test_link_options_are_checked():
    cases = [(dict(neg_sampling='pairs'), 'link.neg_sampling'),
             (dict(neg_sampling='triplet', neg_ratio=1.5), 'link.neg_ratio'),
             (dict(neg_sampling='triplet', neg_ratio=float('inf')),
              'link.neg_ratio'),  # was an OverflowError
             (dict(neg_ratio=float('nan')), 'link.neg_ratio'),
             (dict(neg_ratio=float('inf')), 'link.neg_ratio'),
             (dict(val_ratio=0.6, test_ratio=0.5), 'link.test_ratio'),
             (dict(eval_negatives=0), 'link.eval_negatives'),
             (dict(undirected='yes'), 'link.undirected')]
    for kwargs, key in cases:
        with pytest.raises(SettingError) as info:
            LinkOptions(**kwargs)
        assert info.value.key == key
    graph = undirected_graph()
    for options, match in ((dict(eval_negatives=300), 'give fewer than the '
                            'nodes'),
                           (dict(eval_edges=0, eval_negatives=10**6),
                            'lower link.eval_edges')):
        split = LinkSplit(graph.edge_index, 300 if 'fewer' in match
                          else 2 * 10**6, LinkOptions(**options), seed=0)
        with pytest.raises(SettingError, match=match) as info:
            split.supervision('val')
        assert info.value.key == 'link.eval_negatives'
    with pytest.raises(Exception, match="'link' options need task: link"):
        FastLoadDataModule(graph, link=LinkOptions())
    with pytest.raises(Exception, match="task 'link' with mode 'dsp' draws "
                       "the link split over the whole graph.*give "
                       "'dataset'"):
        FastLoadDataModule(None, task='link', mode='dsp',
                           partitions='parts', progress=False)
    with pytest.raises(Exception, match="task 'link' with mode 'hopgnn': "
                       "HopGNN routes each seed node"):
        FastLoadDataModule(graph, task='link', mode='hopgnn',
                           partitions='parts', progress=False)
    with pytest.raises(Exception, match="'dsp' draws negatives over the "
                       "whole graph.*leave it out") as info:
        FastLoadDataModule(graph, task='link', mode='dsp', partitions='parts',
                           link=LinkOptions(strict_negatives=True),
                           progress=False)
    assert info.value.config_key == 'data.link.strict_negatives'


@pytest.mark.reliability(
    fault='PaGraph parts made for node training (or for fewer hops) given '
          'to a link fit (homogeneous or heterogeneous graphs)',
    behaviour='refused when the data module is made, naming '
              'data.partitions (the partition command to run) or '
              'data.num_neighbors')
def test_pagraph_links_need_parts_made_for_them(tiny_dir, tmp_path):
    dataset_dir, _ = tiny_dir
    made = {}
    for task, hops in (('node', 2), ('link', 1)):
        made[task] = tmp_path / task
        partition_dataset(dataset_dir, made[task], 2, 'pagraph',
                          num_hops=hops, progress=False, task=task)
    for parts, task, key, match in (
            ('node', 'link', 'partitions', "holds PaGraph parts for task "
             "'node', and this run's task is 'link'.*--method pagraph "
             "--task link --num-hops 2 --num-parts 2"),
            ('link', 'node', 'partitions', "for task 'link', and this "
             "run's task is 'node'"),
            ('link', 'link', 'num_neighbors', "2 hops sampled from the "
             "PaGraph parts .* which hold 1-hop neighbourhoods")):
        with pytest.raises(Exception, match=match) as info:
            FastLoadDataModule(str(dataset_dir), task=task, mode='pagraph',
                               partitions=str(made[parts]),
                               num_neighbors=[4, 3], progress=False)
        assert info.value.config_key == f'data.{key}'
    from pyg_fastload.datasets import generate_hetero
    from pyg_fastload.datasets.pyg_file import prepare_pyg
    torch.save(generate_hetero('hetero-tiny'), tmp_path / 'hetero.pt')
    hetero_dir = prepare_pyg(tmp_path / 'hetero.pt', tmp_path / 'hetero',
                             progress=False).path
    partition_dataset(hetero_dir, tmp_path / 'hetero-node', 2, 'pagraph',
                      progress=False)
    with pytest.raises(Exception, match="holds PaGraph parts for task "
                       "'node', and this run's task is 'link'") as info:
        FastLoadDataModule(str(hetero_dir), task='link', mode='pagraph',
                           partitions=str(tmp_path / 'hetero-node'),
                           link=LinkOptions(
                               edge_type=['author', 'writes', 'paper'],
                               rev_edge_type=['paper', 'rev_writes',
                                              'author']),
                           progress=False)
    assert info.value.config_key == 'data.partitions'


@pytest.mark.reliability(
    fault='a link batch sampling over an edge its split must not see '
          '(the edge it scores, or a test edge in validation)',
    behaviour='no sampled edge of a train or val batch is a held-out link; '
              'test batches see validation links but no test link; '
              'evaluation batches hold whole groups')
def test_data_module_link_loaders_sample_only_their_graph():
    graph = undirected_graph()
    module = FastLoadDataModule(
        graph, task='link', num_neighbors=[4, 3], batch_size=64,
        eval_batch_size=100, link=LinkOptions(eval_edges=30,
                                              eval_negatives=9),
        progress=False)
    module.setup('fit')
    split = module.loading.task.split
    held = {s: links(split.edges[s]) for s in ('val', 'test')}
    seen_val = False
    for name in ('train', 'val', 'test'):
        loader = getattr(module, f'{name}_dataloader')()
        count = 0
        for batch in loader:
            sampled = links(batch.n_id[batch.edge_index])
            assert not sampled & held['test'], name
            if name != 'test':
                assert not sampled & held['val'], name
            else:
                seen_val |= bool(sampled & held['val'])
            if name == 'train':
                assert batch.edge_label.numel() == 2 * batch.input_id.numel()
            else:
                assert batch.input_id.numel() % 10 == 0
                count += batch.input_id.numel()
        if name != 'train':
            assert count == 30 * 10
    assert seen_val  # the test graph does carry validation links


def timed_undirected_graph(seed=0):
    r"""``(edge_index, time)``: an undirected graph whose two directions
    share a time, a third of its links repeated at a later time."""
    graph = undirected_graph(num_nodes=200, num_edges=800, seed=seed)
    src, dst = graph.edge_index
    one_way = graph.edge_index[:, src < dst]
    gen = torch.Generator().manual_seed(seed)
    time = torch.randint(0, 1000, (one_way.size(1), ), generator=gen)
    again = one_way[:, ::3]
    one_way = torch.cat([one_way, again], dim=1)
    time = torch.cat([time, time[::3] + 1000])
    return torch.cat([one_way, one_way.flip(0)], dim=1), time.repeat(2)


@pytest.mark.reliability(
    fault='a temporal link split whose label edges or message-passing '
          'edges lose their times, take another edge\'s, or let a held-out '
          'link (at any time) carry messages',
    behaviour='the links split as without times; each split holds every '
              'edge of its links at its own time (evaluation: each distinct '
              '(link, time) once, negatives at its time); the graph store '
              'of a split carries its edges\' times in CSC order')
def test_a_timed_split_keeps_every_edge_with_its_time():
    from pyg_fastload.graph.topology import CSCTopology
    from pyg_fastload.storage import CSCGraphStore, TieredFeatureStore
    edge_index, time = timed_undirected_graph()
    options = LinkOptions(val_ratio=0.1, test_ratio=0.2, eval_edges=0,
                          eval_negatives=3)
    split = LinkSplit(edge_index, 200, options, seed=0, edge_time=time)
    plain = LinkSplit(edge_index, 200, options, seed=0)
    assert split.undirected
    timed = set(zip(*edge_index.tolist(), time.tolist()))
    link = {s: links(plain.edges[s]) for s in ('train', 'val', 'test')}
    for s in link:
        assert torch.equal(split.edges[s], plain.edges[s])
        edges, times = split.timed[s]
        triples = list(zip(*edges.tolist(), times.tolist()))
        mine = [e for e in timed if tuple(sorted(e[:2])) in link[s]]
        assert sorted(triples) == sorted(mine), s  # all, at their times
    stores = (TieredFeatureStore(), CSCGraphStore(
        CSCTopology.from_edge_index(edge_index, 200)))
    for s, allowed in (('train', link['train']),
                       ('test', link['train'] | link['val'])):
        graph_store = split.graph(stores, s)[1]
        src, dst = graph_store.topology.to_edge_index()
        carried = list(zip(src.tolist(), dst.tolist(),
                           graph_store.edge_array('time').tolist()))
        assert sorted(carried) == sorted(
            e for e in timed if tuple(sorted(e[:2])) in allowed), s
    index, label = split.supervision('train')
    assert label is None and sorted(zip(*index.tolist(), split.label_time(
        'train').tolist())) == sorted(zip(*split.timed['train'][0].tolist(),
                                          split.timed['train'][1].tolist()))
    index, label = split.supervision('val')
    groups = index.view(2, -1, 4)
    when = split.label_time('val').view(-1, 4)
    assert bool((when == when[:, :1]).all())  # negatives at its time
    positives = list(zip(*groups[:, :, 0].tolist(), when[:, 0].tolist()))
    assert len(positives) == len(set(positives))  # distinct (link, time)
    assert set(positives) == {(min(u, v), max(u, v), t)
                              for u, v, t in timed
                              if tuple(sorted((u, v))) in link['val']}
    assert torch.equal(label.view(-1, 4)[:, 0], torch.ones(len(positives)))
