import json

import numpy as np
import pytest
import torch

from pyg_fastload import CSCTopology
from pyg_fastload.io import DatasetFormatError, open_dataset_dir
from pyg_fastload.partition import (
    METHODS,
    PartitionBook,
    load_book,
    open_partition,
    partition_dataset,
)
from pyg_fastload.partition.part_format import concat_csc

from ..helpers import in_neighbourhood, usage_exit


@pytest.fixture(scope='module')
def parts(tmp_path_factory, tiny_dir):
    dataset_dir, _ = tiny_dir
    out = {}
    for method in METHODS:
        path = tmp_path_factory.mktemp(method) / 'parts'
        partition_dataset(dataset_dir, path, 4, method, progress=False)
        out[method] = path
    return dataset_dir, out


@pytest.mark.parametrize('method', METHODS)
def test_every_node_has_one_owner_and_ranges_are_contiguous(parts, method):
    dataset_dir, paths = parts
    path = paths[method]
    owner = np.load(path / 'owner.npy')
    new_id = np.load(path / 'new_id.npy')
    offsets = np.load(path / 'offsets.npy')
    n = open_dataset_dir(dataset_dir).num_nodes
    assert owner.shape == (n, ) and set(np.unique(owner)) == {0, 1, 2, 3}
    assert np.array_equal(np.sort(new_id), np.arange(n))  # a permutation
    assert offsets[0] == 0 and offsets[-1] == n
    # part k owns exactly the new ids [offsets[k], offsets[k + 1])
    book = load_book(path)
    assert isinstance(book, PartitionBook) and not book.hetero
    assert torch.equal(book.owner(torch.from_numpy(new_id)),
                       torch.from_numpy(owner))


@pytest.mark.parametrize('method', ['metis', 'bytegnn', 'hash', 'random'])
def test_parts_round_trip_rows_and_edges(parts, method):
    dataset_dir, paths = parts
    dataset = open_dataset_dir(dataset_dir)
    new_id = torch.from_numpy(np.load(paths[method] / 'new_id.npy'))
    order = torch.argsort(new_id)
    x, y = dataset.arrays['x'], dataset.arrays['y']
    topo = dataset.topology
    edges = set(zip(new_id[topo.indices.long()].tolist(),
                    new_id[topo.destinations()].tolist()))
    seen = set()
    for part in range(4):
        features, graph, book = open_partition(paths[method], part)
        start, end = book.part_range(part)
        own = order[start:end]  # original ids of the part, in new-id order
        assert torch.equal(features.get_tensor(attr_name='x', index=None,
                                               group_name=None), x[own])
        assert torch.equal(features.get_tensor(attr_name='y', index=None,
                                               group_name=None), y[own])
        local = graph.topology
        dst = local.destinations() + start
        seen |= set(zip(local.indices.long().tolist(), dst.tolist()))
    assert seen == edges  # every edge once, in new ids, at its owner


@pytest.mark.reliability(
    fault=('a partition file corrupted, a part missing or from another run, '
           'a part index out of range'),
    behaviour='an error naming the file or the argument, before training')
def test_bad_partition_directories_are_refused(parts, tmp_path):
    import shutil
    dataset_dir, paths = parts
    path = tmp_path / 'parts'
    shutil.copytree(paths['hash'], path)
    with pytest.raises(ValueError, match=r"'part' = 4 must be an int in "
                       r"\[0, 4\)"):
        open_partition(path, 4)
    # a part of another run (the metis partition of the same dataset)
    shutil.rmtree(path / 'part-1')
    shutil.copytree(paths['metis'] / 'part-1', path / 'part-1')
    with pytest.raises(DatasetFormatError, match='another run'):
        open_partition(path, 1)
    shutil.rmtree(path / 'part-2')
    with pytest.raises(DatasetFormatError, match='part 2 is not in'):
        open_partition(path, 2)
    offsets = path / 'offsets.npy'
    np.save(offsets, np.array([0, 1, 2, 3, 2000]))
    with pytest.raises(DatasetFormatError, match=r'offsets\.npy: does not '
                       'match its checksum'):
        open_partition(path, 0)
    meta = json.loads((path / 'partition.json').read_text())
    meta['format_version'] = 7
    (path / 'partition.json').write_text(json.dumps(meta))
    with pytest.raises(DatasetFormatError, match='format_version 7'):
        open_partition(path, 0)


def test_a_failed_partition_leaves_nothing(tiny_dir, tmp_path, monkeypatch):
    from pyg_fastload.partition import part_writers as parts_module
    dataset_dir, _ = tiny_dir

    def fail(*args, **kwargs):
        raise RuntimeError('killed')

    monkeypatch.setattr(parts_module, 'write_dataset_dir', fail)
    with pytest.raises(RuntimeError, match='killed'):
        partition_dataset(dataset_dir, tmp_path / 'parts', 2, 'hash',
                          progress=False)
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(FileExistsError, match='overwrite'):
        partition_dataset(dataset_dir, tmp_path, 2, 'hash', progress=False)


def test_partition_command(tiny_dir, tmp_path, capsys):
    from pyg_fastload.lightning.command import main
    dataset_dir, _ = tiny_dir
    main(['partition', str(dataset_dir), '--num-parts', '2', '--method',
          'random', '--out', str(tmp_path / 'p'), '--no-progress'])
    out = capsys.readouterr().out
    assert '2 parts (random) of 2,000 nodes' in out
    assert 'replicas' not in out  # the parts hold every node once
    with usage_exit(capsys, 'already exists'):
        main(['partition', str(dataset_dir), '--num-parts', '2', '--out',
              str(tmp_path / 'p')])


@pytest.mark.reliability(
    fault='PaGraph parts that each replicate most of the graph '
          '(homogeneous or heterogeneous, for nodes or links)',
    behaviour='the replication factor printed, and a warning naming the '
              'share and the alternatives')
@pytest.mark.parametrize('hetero', [False, True])
def test_partition_command_reports_pagraph_replicas(tiny_dir, tmp_path,
                                                    capsys, hetero):
    from pyg_fastload.lightning.command import main
    from pyg_fastload.partition.part_dirs import read_partition_meta
    dataset_dir, _ = tiny_dir
    task = ['--num-hops', '2']
    if hetero:  # link parts: every node's 3-hop neighbourhood
        from pyg_fastload.datasets import \
            prepare_hetero_preset
        dataset_dir = prepare_hetero_preset('hetero-tiny', tmp_path / 'ds',
                                            progress=False).path
        task += ['--task', 'link']
    main(['partition', str(dataset_dir), '--num-parts', '2', '--method',
          'pagraph', '--out', str(tmp_path / 'p'), '--no-progress', *task])
    captured = capsys.readouterr()
    meta = read_partition_meta(tmp_path / 'p')
    held, nodes = meta['held_nodes'], meta['dataset']['num_nodes']
    assert nodes == (742 if hetero else 2000)
    factor = sum(held) / nodes
    assert factor > 1.0
    assert f"replicas: the parts hold {factor:.2f}x the graph's nodes, up " \
        f"to {max(held) / nodes:.1%}" in captured.out
    assert max(held) / nodes > 0.5  # 2 hops reach most of this graph
    assert f'warning: a part holds {max(held) / nodes:.1%} of the graph' in \
        captured.err and 'dsp, hopgnn' in captured.err
    assert f"{2 + hetero}-hop neighbourhood" in captured.err


def test_report_measures_cut_and_balance(parts, capsys):
    from pyg_fastload.lightning.command import main
    dataset_dir, paths = parts
    main(['partition', '--report', str(paths['metis']), '--batch-size', '64',
          '--no-progress'])
    out = capsys.readouterr().out
    assert 'metis, 4 parts: edge cut' in out and 'max/mean' in out
    metis = json.loads((paths['metis'] / 'report.json').read_text())
    from pyg_fastload.partition import partition_report
    hashed = partition_report(paths['hash'], batch_size=64, progress=False)
    dataset = open_dataset_dir(dataset_dir)
    assert sum(p['nodes'] for p in metis['parts']) == dataset.num_nodes
    assert sum(p['edges'] for p in metis['parts']) == dataset.num_edges
    assert sum(p['train_mask'] for p in metis['parts']) == int(
        dataset.arrays['train_mask'].sum())
    # hash scatters neighbours: about 3/4 of the edges cross 4 parts
    assert hashed['edge_cut'] == pytest.approx(0.75, abs=0.03)
    assert metis['edge_cut'] < 0.5 * hashed['edge_cut']
    assert metis['balance']['train_mask'] <= 1.05
    # locality (HopGNN; 64 roots per batch, a small share of a subgraph):
    # a batch mixes all parts, so R_sub is about 1/4;
    # a root's own tree stays in its METIS part far more often, and under
    # hash no more often than chance
    for hops in ('2 hops', '3 hops'):
        loc = metis['locality'][hops]
        assert loc['R_sub'] == pytest.approx(0.25, abs=0.05)
        assert loc['R_micro'] >= 2 * loc['R_sub']
        assert hashed['locality'][hops]['R_micro'] < 0.3
    # requests (ByteGNN): under hash 3 of 4 sampled nodes are remote
    # (remote/local about 3); METIS keeps more local (tiny: 1.86 vs 2.90,
    # 3 hops of (10, 5, 3) reach most of its 2,000 nodes)
    assert hashed['requests']['ratio'] == pytest.approx(3.0, abs=0.5)
    assert metis['requests']['ratio'] < 0.8 * hashed['requests']['ratio']
    with usage_exit(capsys, '--num-parts, --out needed'):
        main(['partition', str(dataset_dir)])
    # cut and balance only: the same, without sampling
    main(['partition', '--report', str(paths['metis']), '--no-locality',
          '--no-progress'])
    quick = json.loads((paths['metis'] / 'report.json').read_text())
    assert 'locality' not in quick and 'requests' not in quick
    assert quick['edge_cut'] == metis['edge_cut']
    assert quick['parts'] == metis['parts']


def test_pagraph_parts_are_self_reliant(parts):
    dataset_dir, paths = parts
    dataset = open_dataset_dir(dataset_dir)
    topo = dataset.topology
    new_id = torch.from_numpy(np.load(paths['pagraph'] / 'new_id.npy'))
    order = torch.argsort(new_id)
    train = dataset.arrays['train_mask']
    trained, replicas = [], 0
    for part in range(4):
        features, graph, book = open_partition(paths['pagraph'], part)
        get = lambda name: features.get_tensor(attr_name=name, index=None,
                                               group_name=None)
        rows = get('global_id')  # new id of every row: own, then replicas
        start, end = book.part_range(part)
        assert torch.equal(rows[:end - start], torch.arange(start, end))
        assert torch.equal(get('x'), dataset.arrays['x'][order[rows]])
        mask = get('train_mask')
        assert not bool(mask[end - start:].any())  # replicas never train
        roots = order[rows[mask]]  # the part's training nodes
        trained.append(roots)
        replicas += rows.numel() - (end - start)
        # Sampling 2 hops from them with -1 fan-outs stays in the part:
        # every node reached is stored, with all its in-edges if it is
        # less than 2 hops away.
        stored = set(rows.tolist())
        assert set(new_id[in_neighbourhood(topo, roots, 2)].tolist()) \
            <= stored
        one_hop = torch.cat([roots, in_neighbourhood(topo, roots, 1)])
        local = graph.topology
        lists = {int(rows[i]): local.indices[local.indptr[i]:
                                             local.indptr[i + 1]].tolist()
                 for i in range(rows.numel())}
        for node in one_hop.unique().tolist():
            start_, end_ = topo.indptr[node], topo.indptr[node + 1]
            expected = new_id[topo.indices[start_:end_].long()].tolist()
            assert sorted(lists[int(new_id[node])]) == sorted(expected)
    every = torch.cat(trained).sort().values
    assert torch.equal(every, train.nonzero().view(-1))  # once each
    report = __import__('pyg_fastload.partition', fromlist=['x']) \
        .partition_report(paths['pagraph'], progress=False)
    assert report['replication'] == pytest.approx(replicas / 2000)
    assert report['balance']['train_mask'] <= 1.05
    # nodes held by several parts are owned evenly among them
    assert report['balance']['nodes'] <= 1.1
    assert sum(p['nodes'] for p in report['parts']) == 2000


@pytest.mark.parametrize('method', ['pagraph', 'metis'])
def test_local_parts_serve_rows_of_the_original_graph(parts, method):
    from pyg_fastload import FastNeighborLoader
    dataset_dir, paths = parts
    dataset = open_dataset_dir(dataset_dir)
    topo = dataset.topology
    new_id = torch.from_numpy(np.load(paths[method] / 'new_id.npy'))
    order = torch.argsort(new_id)  # original id of every new id
    for part in range(4):
        features, graph, _ = open_partition(paths[method], part, local=True)
        train = features.get_tensor(attr_name='train_mask', index=None,
                                    group_name=None)
        loader = FastNeighborLoader((features, graph), [-1, -1],
                                    input_nodes=train, batch_size=64)
        for batch in loader:
            original = order[batch.global_id]
            assert torch.equal(batch.x, dataset.arrays['x'][original])
            assert bool(dataset.arrays['train_mask'][
                original[:batch.batch_size]].all())
            src, dst = original[batch.edge_index]
            edges = set(zip(src.tolist(), dst.tolist()))
            assert edges <= set(zip(topo.indices.long().tolist(),
                                    topo.destinations().tolist()))
            if method == 'pagraph':  # self-reliant: every in-edge is there
                seeds = original[:batch.batch_size]
                need = {(int(s), int(d)) for d in seeds.tolist()
                        for s in topo.indices[topo.indptr[d]:
                                              topo.indptr[d + 1]].tolist()}
                assert need <= edges


def _tampered(source, out, edit):
    r"""A copy of the partition :obj:`source` with :obj:`edit(path, meta)`
    applied and every checksum in ``partition.json`` made to match."""
    import hashlib
    import shutil
    shutil.copytree(source, out)
    meta = json.loads((out / 'partition.json').read_text())
    edit(out, meta)
    if isinstance(meta.get('files'), dict):
        for name in meta['files']:
            meta['files'][name] = hashlib.sha256(
                (out / name).read_bytes()).hexdigest()
    (out / 'partition.json').write_text(json.dumps(meta))
    return out


def _offsets(value):
    return lambda path, meta: np.save(path / 'offsets.npy', value)


def _set(key, value):
    return lambda path, meta: meta.__setitem__(key, value)


@pytest.mark.parametrize('edit, match', [
    (_offsets(np.array([0., 500, 1000, 1500, 2000])), 'holds float64'),
    (_offsets(np.array([-5, 500, 1000, 1500, 2000])), 'start at 0'),
    (_offsets(np.array([0, 1500, 1000, 1500, 2000])), 'never decrease'),
    (_offsets(np.array([0, 500, 1000, 2000])),
     r'of shape \[4\], expected integers of shape \[5\]'),
    (_offsets(np.array([0, 500, 1000, 1500, 1999])), 'ends at 1999'),
    (lambda path, meta: np.save(path / 'offsets.npy', np.load(
        path / 'offsets.npy') + np.array([0, -10, 0, 0, 0])),
     r"part-0/meta\.json: 'partition\.owned' is \d+, the book says \d+"),
    (lambda path, meta: meta.pop('files'), "'files' is missing"),
    (_set('files', ['owner.npy']), "'files' is list, expected dict"),
    (_set('num_parts', '4'), "'num_parts' is str, expected int"),
    (_set('num_parts', 10**9), r"'num_parts' 1000000000 is outside"),
    (_set('method', 'magic'), "'method' 'magic' is not one of"),
    (lambda path, meta: meta['dataset'].update(num_nodes=-1),
     "'dataset.num_nodes' is -1"),
])
@pytest.mark.reliability(
    fault="a partition book or `partition.json` that lies with its checksums "
          "updated: `offsets.npy` float, negative, decreasing, of the wrong "
          "length or contradicting the parts; `files` missing or a list; "
          "`num_parts` a string or 10^9",
    behaviour="`DatasetFormatError` naming the file and the field, whose fix "
              "names the partition directory (was: accepted silently or raw "
              "Python errors)")
def test_partition_files_are_validated(parts, tmp_path, edit, match):
    _, paths = parts
    path = _tampered(paths['hash'], tmp_path / 'parts', edit)
    with pytest.raises(DatasetFormatError, match=match) as info:
        open_partition(path, 0)
    assert f'--out {path} ' in str(info.value)  # the directory, not a part


@pytest.mark.reliability(
    fault="a part directory (neighbour ids index the whole graph) opened as "
          "a dataset of its own",
    behaviour="`ValueError` naming the directory and `open_partition` (was: "
              "an IndexError while sampling)")
def test_a_part_is_not_opened_as_a_dataset(parts):
    from pyg_fastload.caching import open_dataset
    _, paths = parts
    with pytest.raises(ValueError, match="is a part of a partition: its "
                       "neighbour ids index 2000 nodes"):
        open_dataset(paths['hash'] / 'part-0')
    features, graph, _ = open_partition(paths['hash'], 0)
    assert graph.topology.num_nodes == features.get_tensor_size(
        group_name=None, attr_name='x', index=None)[0]


def test_parts_end_to_end_take_a_part_without_rows():
    first = CSCTopology(torch.tensor([0, 2, 3]), torch.tensor([4, 1, 0]), 2)
    empty = CSCTopology(torch.zeros(1, dtype=torch.long),
                        torch.empty(0, dtype=torch.long), 0)
    last = CSCTopology(torch.tensor([0, 1]), torch.tensor([2]), 1)
    whole = concat_csc([empty, first, empty, last])
    assert whole.indptr.tolist() == [0, 2, 3, 4]
    assert whole.indices.tolist() == [4, 1, 0, 2]
    assert whole.num_nodes == 3
