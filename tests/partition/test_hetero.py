r"""Partitioning heterogeneous dataset directories: typed contiguous new ids
per (part, node type), parts that are heterogeneous dataset directories,
balance of the target's training nodes, and the per-relation report."""
import json
import math
from collections import Counter

import numpy as np
import pytest
import torch

from pyg_fastload.datasets import (prepare_hetero_preset,
                                                  write_graph)
from pyg_fastload.io import DatasetFormatError, open_dataset_dir
from pyg_fastload.io.format import sha256_file
from pyg_fastload.partition import (HeteroPartitionBook, load_book,
                                    open_partition, partition_dataset,
                                    partition_report, renumber)
from pyg_fastload.partition.balance import balance_train
from pyg_fastload.partition.report import relation_key

from ..helpers import random_hetero_graph, usage_exit

METHODS = ('metis', 'bytegnn', 'hash', 'random')
K = 3


@pytest.fixture(scope='module')
def hetero_parts(tmp_path_factory):
    root = tmp_path_factory.mktemp('hetero')
    dataset = prepare_hetero_preset('hetero-tiny', root / 'ds',
                                    progress=False)
    paths = {}
    for method in METHODS:
        paths[method] = root / f'parts-{method}'
        partition_dataset(dataset.path, paths[method], K, method,
                          progress=False)
    return dataset.path, paths


def _edges(dataset):
    r"""Per relation, the multiset of (source, destination) global ids."""
    topo = dataset.topology
    out = {}
    for r, edge_type in enumerate(topo.edge_types):
        lo, hi = int(topo.edge_offset[r]), int(topo.edge_offset[r + 1])
        first = int(topo.segment_offset[r])
        count = int(topo.segment_offset[r + 1]) - first
        degree = topo.indptr[first + 1:first + count + 1] - \
            topo.indptr[first:first + count]
        dst_start = int(topo.node_offset[int(topo.dst_type[r])])
        dst = (torch.arange(count) + dst_start).repeat_interleave(degree)
        out[edge_type] = (topo.indices[lo:hi].long(), dst)
    return out


@pytest.mark.parametrize('method', METHODS)
def test_typed_ranges_are_contiguous_and_the_owner_a_range_check(
        hetero_parts, method):
    dataset_dir, paths = hetero_parts
    path = paths[method]
    dataset = open_dataset_dir(dataset_dir)
    topo = dataset.topology
    owner = np.load(path / 'owner.npy')
    new_id = np.load(path / 'new_id.npy')
    offsets = np.load(path / 'offsets.npy')
    n = topo.num_nodes
    assert owner.shape == (n, ) and set(np.unique(owner)) <= set(range(K))
    assert np.array_equal(np.sort(new_id), np.arange(n))  # a permutation
    assert offsets.shape == (len(topo.node_types), K + 1)
    book = load_book(path)
    assert isinstance(book, HeteroPartitionBook) and book.hetero
    assert torch.equal(book.owner(torch.from_numpy(new_id)),
                       torch.from_numpy(owner))  # global new ids
    for t, node_type in enumerate(topo.node_types):
        lo, hi = int(topo.node_offset[t]), int(topo.node_offset[t + 1])
        local = new_id[lo:hi] - lo  # every type keeps its global range
        assert np.array_equal(np.sort(local), np.arange(hi - lo))
        assert offsets[t, 0] == 0 and offsets[t, -1] == hi - lo
        assert np.all(np.diff(offsets[t]) >= 0)
        # part k owns exactly [offsets[t, k], offsets[t, k + 1]) of type t
        assert np.array_equal(
            np.searchsorted(offsets[t], local, side='right') - 1,
            owner[lo:hi])
        assert torch.equal(book.owner(torch.from_numpy(local), node_type),
                           torch.from_numpy(owner[lo:hi]))
        # within a (part, type) range, the original order is kept
        for k in range(K):
            mine = np.flatnonzero(owner[lo:hi] == k)
            assert np.array_equal(local[mine], np.arange(offsets[t, k],
                                                         offsets[t, k + 1]))
    assert torch.equal(book.node_type_of(torch.from_numpy(new_id)),
                       topo.node_type_of(torch.arange(n)))


@pytest.mark.parametrize('method', METHODS)
def test_every_node_and_edge_once_with_rows_round_tripping(hetero_parts,
                                                           method):
    dataset_dir, paths = hetero_parts
    dataset = open_dataset_dir(dataset_dir)
    topo = dataset.topology
    new_id = torch.from_numpy(np.load(paths[method] / 'new_id.npy'))
    order = torch.argsort(new_id)  # original global id of every new id
    expected = {e: Counter(zip(new_id[s].tolist(), new_id[d].tolist()))
                for e, (s, d) in _edges(dataset).items()}
    seen = {e: Counter() for e in topo.edge_types}
    rows = {t: 0 for t in topo.node_types}
    for part in range(K):
        features, graph, book = open_partition(paths[method], part)
        ds = open_dataset_dir(paths[method] / f'part-{part}',
                                     verify='checksum')
        assert ds.index_space == dataset.num_nodes
        assert torch.equal(ds.topology.node_offset, topo.node_offset)
        for t, node_type in enumerate(topo.node_types):
            start, end = book.part_range(part, node_type)
            assert ds.num_nodes[node_type] == end - start
            rows[node_type] += end - start
            lo = int(topo.node_offset[t])
            own = order[lo + start:lo + end] - lo  # original type-local ids
            for key, value in dataset.arrays[node_type].items():
                assert torch.equal(ds.arrays[node_type][key], value[own])
                assert torch.equal(features.get_tensor(
                    group_name=node_type, attr_name=key, index=None),
                    value[own])
        for edge_type, (src, dst) in _edges(ds).items():
            # the part's rows of the destination type, as global new ids
            dst = dst + book.part_range(part, edge_type[2])[0]
            assert torch.equal(book.owner(dst), torch.full_like(dst, part))
            seen[edge_type] += Counter(zip(src.tolist(), dst.tolist()))
    assert rows == dataset.num_nodes
    assert seen == expected  # no edge lost, none twice, in new ids


def test_metis_balances_the_targets_training_nodes(hetero_parts):
    dataset_dir, paths = hetero_parts
    report = partition_report(paths['metis'], progress=False)
    train = report['node_types']['paper']['train_mask']
    assert sum(train) == int(open_dataset_dir(dataset_dir).arrays[
        'paper']['train_mask'].sum())
    assert max(train) <= math.ceil(1.03 * sum(train) / K)  # the tolerance
    assert report['balance']['nodes'] <= 1.05  # METIS's node balance
    hashed = partition_report(paths['hash'], locality=False, progress=False)
    assert report['edge_cut'] < hashed['edge_cut']


def test_balance_train_swaps_and_keeps_node_counts():
    # a path 0-1-...-11, training nodes 0..5 all in part 0 of 2
    n = 12
    src = np.arange(n - 1)
    rows = [[] for _ in range(n)]
    for a in src:
        rows[a].append(a + 1)
        rows[a + 1].append(a)
    xadj = np.cumsum([0] + [len(r) for r in rows])
    adjncy = np.concatenate([np.array(r) for r in rows])
    owner = np.repeat([0, 1], 6)
    train = np.arange(n) < 6
    # within METIS's 3%: ceil(1.03 * 3) = 4 training nodes per part
    out = balance_train(owner, xadj, adjncy, train, 2)
    assert np.bincount(out[train], minlength=2).tolist() == [4, 2]
    assert np.bincount(out, minlength=2).tolist() == [6, 6]
    assert out[5] == 1 and out[6] == 0  # the boundary nodes moved first
    out = balance_train(owner, xadj, adjncy, train, 2, tolerance=1.0)
    assert np.bincount(out[train], minlength=2).tolist() == [3, 3]
    assert np.bincount(out, minlength=2).tolist() == [6, 6]
    assert out[5] == 1 and out[6] == 0  # the boundary nodes moved first
    assert np.array_equal(owner, np.repeat([0, 1], 6))  # not changed


@pytest.mark.parametrize('method', ['metis', 'hash'])
def test_report_edge_cut_is_the_brute_force_count(hetero_parts, method):
    dataset_dir, paths = hetero_parts
    dataset = open_dataset_dir(dataset_dir)
    owner = torch.from_numpy(np.load(paths[method] / 'owner.npy'))
    report = partition_report(paths[method], progress=False)
    total = cut = 0
    for edge_type, (src, dst) in _edges(dataset).items():
        row = report['relations'][relation_key(edge_type)]
        crossing = owner[src] != owner[dst]
        for part in range(K):  # stored with (and cut at) the destination
            here = owner[dst] == part
            assert row['edges'][part] == int(here.sum())
            assert row['cut_edges'][part] == int((crossing & here).sum())
        total += src.numel()
        cut += int(crossing.sum())
    assert report['edge_cut'] == pytest.approx(cut / total)
    types = report['node_types']
    for t, count in dataset.num_nodes.items():
        assert sum(types[t]['nodes']) == count
    requests = report['requests']
    assert requests['remote'] > 0 and requests['local'] > 0
    on_disk = json.loads((paths[method] / 'report.json').read_text())
    assert on_disk['relations'] == report['relations']


def test_same_seed_same_partition(hetero_parts, tmp_path):
    dataset_dir, paths = hetero_parts
    for method in ('metis', 'bytegnn'):
        again = tmp_path / method
        partition_dataset(dataset_dir, again, K, method, progress=False)
        for name in ('owner.npy', 'new_id.npy', 'offsets.npy'):
            assert sha256_file(again / name) == \
                sha256_file(paths[method] / name), (method, name)


def test_renumber_keeps_types_and_allows_empty_ranges():
    node_offset = torch.tensor([0, 4, 6])
    owner = np.array([1, 0, 1, 0, 1, 1])  # type 1: both nodes in part 1
    new_id, offsets = renumber(owner, 2, node_offset)
    assert new_id.tolist() == [2, 0, 3, 1, 4, 5]
    assert offsets.tolist() == [[0, 2, 4], [0, 0, 2]]
    book = HeteroPartitionBook({'a': torch.from_numpy(offsets[0]),
                                'b': torch.from_numpy(offsets[1])})
    assert book.owner(torch.arange(6)).tolist() == [0, 0, 1, 1, 1, 1]
    assert book.local(torch.arange(6)).tolist() == [0, 1, 0, 1, 0, 1]
    assert book.part_range(0, 'b') == (0, 0)
    assert book.global_ids(torch.tensor([1]), 'b').tolist() == [5]
    with pytest.raises(KeyError, match="'c' is not a node type"):
        book['c']
    with pytest.raises(ValueError, match='different part counts'):
        HeteroPartitionBook({'a': torch.tensor([0, 1, 2]),
                             'b': torch.tensor([0, 1])})


@pytest.mark.reliability(
    fault="partitioning a heterogeneous dataset with an unknown method, "
          "more parts than labelled nodes, 0 parts, bytegnn or pagraph "
          "without masks; a heterogeneous part opened in ids it is not "
          "stored in (local=); a part number out of range",
    behaviour="an error naming the option, the value and what to use, "
              "before anything is written")
def test_bad_input_is_refused(hetero_parts, tmp_path, capsys):
    dataset_dir, paths = hetero_parts
    with pytest.raises(ValueError, match=r"unknown partitioning --method "
                       r"'spectral': pass one of metis, pagraph, bytegnn"):
        partition_dataset(dataset_dir, tmp_path / 'b', 2, 'spectral')
    with pytest.raises(ValueError, match=r"'num_parts' = 401 is more than "
                       r"the 400 nodes of the labelled type 'paper'"):
        partition_dataset(dataset_dir, tmp_path / 'c', 401)
    with pytest.raises(ValueError, match=r"'num_parts' = 0 must be an int"):
        partition_dataset(dataset_dir, tmp_path / 'd', 0)
    assert not any(tmp_path.iterdir())  # refused before writing anything
    data = random_hetero_graph()
    del data['paper'].train_mask
    unmasked = write_graph(data, tmp_path / 'nomask', name='t',
                                 source='t', progress=False)
    with pytest.raises(ValueError, match=r"--method bytegnn .* has no "
                       r"masks; use --method metis"):
        partition_dataset(unmasked.path, tmp_path / 'e', 2, 'bytegnn')
    with pytest.raises(ValueError, match=r"--method pagraph streams the "
                       r"training nodes .* no 'train_mask'; use --method "
                       r"metis"):
        partition_dataset(unmasked.path, tmp_path / 'a', 2, 'pagraph')
    # open_partition opens a heterogeneous part typed, in the whole
    # graph's ids (PaGraph's in their own rows)
    assert isinstance(open_partition(paths['hash'], 0)[2],
                      HeteroPartitionBook)
    with pytest.raises(ValueError, match='other methods. parts keep the '
                       'whole graph.s ids'):
        open_partition(paths['hash'], 0, local=True)
    with pytest.raises(ValueError, match=r"'part' = 3 must be an int"):
        open_partition(paths['hash'], K)
    from pyg_fastload.lightning.command import main
    with usage_exit(capsys, 'more than the 400 nodes'):
        main(['partition', str(dataset_dir), '--num-parts', '401', '--out',
              str(tmp_path / 'f'), '--no-progress'])


@pytest.mark.reliability(
    fault="a heterogeneous partition's book (offsets.npy) cut short, a "
          "part's meta.json whose index_space is negative, too small or "
          "not a mapping, or a part missing one of the partition's "
          "relations",
    behaviour="refused by the book's checksum, or naming index_space and "
              "the file, or the part's relations against partition.json's")
def test_corrupted_hetero_book_is_refused(hetero_parts, tmp_path):
    import shutil
    _, paths = hetero_parts
    path = tmp_path / 'parts'
    shutil.copytree(paths['hash'], path)
    offsets = np.load(path / 'offsets.npy')
    np.save(path / 'offsets.npy', offsets[:, :-1])
    with pytest.raises(DatasetFormatError, match='does not match its '
                       'checksum'):
        open_partition(path, 0)
    # a part whose relations are not the partition's (one missing)
    other = tmp_path / 'relations'
    shutil.copytree(paths['hash'], other)
    listed = json.loads((other / 'partition.json').read_text())
    listed['edge_types'] = listed['edge_types'][1:]
    (other / 'partition.json').write_text(json.dumps(listed))
    with pytest.raises(DatasetFormatError, match=r"part-1/meta\.json.*"
                       r"relations .* are not the partition's"):
        open_partition(other, 1)
    part = path / 'part-0'
    meta = json.loads((part / 'meta.json').read_text())
    for bad in ({t: -1 for t in meta['index_space']},
                {t: 0 for t in meta['index_space']}, [1, 2]):
        (part / 'meta.json').write_text(json.dumps(dict(meta,
                                                        index_space=bad)))
        with pytest.raises(DatasetFormatError, match='index_space'):
            open_dataset_dir(part)


def test_command_partitions_and_reports(hetero_parts, tmp_path, capsys):
    from pyg_fastload.lightning.command import main
    dataset_dir, _ = hetero_parts
    out = tmp_path / 'parts'
    main(['partition', str(dataset_dir), '--num-parts', '2', '--out',
          str(out), '--no-progress'])
    printed = capsys.readouterr().out
    assert 'of a heterogeneous graph' in printed and 'paper' in printed
    main(['partition', '--report', str(out), '--no-progress'])
    printed = capsys.readouterr().out
    assert 'author__writes__paper' in printed and 'train' in printed
    assert 'remote/local' in printed


def test_a_parts_own_topology_keeps_its_inner_edges(hetero_parts):
    r"""What a part's caches rank its rows on: every relation's in-edges
    whose source the part holds too, in the part's own row ids."""
    from pyg_fastload.graph.local import local_hetero_topology
    _, paths = hetero_parts
    _, graph, book = open_partition(paths['metis'], 1)
    topo = graph.topology
    rows = {t: book.part_range(1, t) for t in book.node_types}
    local = local_hetero_topology(topo, rows)
    assert {t: local.num_nodes_of(t) for t in local.node_types} == \
        {t: end - start for t, (start, end) in rows.items()}
    kept = 0
    for edge_type in topo.edge_types:
        part = topo.relation_topology(edge_type)
        dst = torch.arange(part.num_nodes).repeat_interleave(
            part.indptr.diff())
        start, end = rows[edge_type[0]]
        inner = (part.indices >= start) & (part.indices < end)
        want = sorted(zip((part.indices[inner] - start).tolist(),
                          dst[inner].tolist()))
        mine = local.relation_topology(edge_type)
        got = sorted(zip(mine.indices.tolist(), torch.arange(
            mine.num_nodes).repeat_interleave(mine.indptr.diff()).tolist()))
        assert got == want
        kept += len(want)
    assert 0 < kept < topo.num_edges  # some edges cross the parts


def test_pagraph_parts_are_self_reliant_over_every_relation(tmp_path):
    r"""A PaGraph part of a heterogeneous graph, in its own row ids: its
    training nodes' every-in-edge 2-hop neighbourhood over every relation
    is the whole graph's (mapped through ``global_id``), its replicas are
    never training nodes, and the training nodes are each in one part."""
    from pyg_fastload.sampling import HeteroNeighborSampler

    from ..helpers import new_id_topology
    dataset = prepare_hetero_preset('hetero-tiny', tmp_path / 'ds',
                                    progress=False)
    # a graph where 2 hops do not reach everything: authors' relations only
    parts = tmp_path / 'parts'
    book = partition_dataset(dataset.path, parts, 2, 'pagraph', num_hops=1,
                             progress=False)
    whole, target = new_id_topology(dataset.path, parts)
    reference = HeteroNeighborSampler(whole, [-1])
    trained = []
    for part in range(2):
        features, graph, opened = open_partition(parts, part, local=True)
        assert opened.offsets.tolist() == book.offsets.tolist()
        rows = {t: features.get_tensor(group_name=t, attr_name='global_id',
                                       index=None) for t in book.node_types}
        train = features.get_tensor(group_name=target,
                                    attr_name='train_mask', index=None)
        own = book.part_range(part, target)
        seeds = train.bool().nonzero().view(-1)
        # training nodes are the part's own (its first rows)
        assert bool((rows[target][seeds] >= own[0]).all()) and \
            bool((rows[target][seeds] < own[1]).all())
        trained += rows[target][seeds].tolist()
        local = HeteroNeighborSampler(graph.topology, [-1])
        got = local.sample_hetero(target, seeds)
        want = reference.sample_hetero(target, rows[target][seeds])
        for node_type, ids in want.node.items():
            assert sorted(rows[node_type][got.node[node_type]].tolist()) == \
                sorted(ids.tolist())
        for edge_type, row in want.row.items():
            src, _, dst = edge_type
            mine = set(zip(
                rows[src][got.node[src][got.row[edge_type]]].tolist(),
                rows[dst][got.node[dst][got.col[edge_type]]].tolist()))
            assert mine == set(zip(want.node[src][row].tolist(),
                                   want.node[dst][want.col[edge_type]]
                                   .tolist()))
        # a part holds fewer rows than the graph (1 hop does not reach all)
        assert sum(v.numel() for v in rows.values()) < whole.num_nodes
    train_all = open_dataset_dir(dataset.path).arrays[target][
        'train_mask'].bool()
    assert sorted(trained) == sorted(set(trained))
    assert len(trained) == int(train_all.sum())
    with pytest.raises(ValueError, match='open with local=True only'):
        open_partition(parts, 0)


def test_pagraph_parts_are_streamed_to_the_writer(tmp_path, monkeypatch):
    r"""PaGraph's heterogeneous parts reach the writer as chunk sources
    (every relation's in-edges and every array's rows, never the part in
    memory), several chunks each when the chunks are small, and give the
    same files as with the usual chunks."""
    from pyg_fastload.partition import part_format, part_writers
    dataset = prepare_hetero_preset('hetero-tiny', tmp_path / 'ds',
                                    progress=False)
    partition_dataset(dataset.path, tmp_path / 'usual', 2, 'pagraph',
                      progress=False)
    monkeypatch.setattr(part_format, 'WRITE_CHUNK_EDGES', 50)
    monkeypatch.setattr(part_format, 'WRITE_CHUNK_BYTES', 256)
    write, chunks = part_writers.write_dataset_dir, Counter()

    def spy(path, *, relations, node_arrays, **kwargs):
        sources = {**relations, **{(t, key): node_arrays[t][key]
                                   for t, a in dataset.arrays.items()
                                   for key in a}}
        for name, source in sources.items():
            assert callable(source), f'{name} is not streamed'
            chunks[name] = max(chunks[name], sum(1 for _ in source()))
        return write(path, relations=relations, node_arrays=node_arrays,
                     **kwargs)

    monkeypatch.setattr(part_writers, 'write_dataset_dir', spy)
    partition_dataset(dataset.path, tmp_path / 'small', 2, 'pagraph',
                      progress=False)
    assert max(chunks[e] for e in dataset.edge_types) > 1
    assert chunks['paper', 'x'] > 1 and chunks['paper', 'train_mask'] > 1
    for part in range(2):
        usual, small = (tmp_path / name / f'part-{part}'
                        for name in ('usual', 'small'))
        files = sorted(f.name for f in usual.glob('*.bin'))
        assert files == sorted(f.name for f in small.glob('*.bin'))
        for name in files:
            assert (usual / name).read_bytes() == (small / name).read_bytes()
        metas = [json.loads((d / 'meta.json').read_text())
                 for d in (usual, small)]
        for meta in metas:
            del meta['partition']['run']
        assert metas[0] == metas[1]


def test_report_of_pagraph_parts_counts_owned_rows_and_replicas(
        hetero_pagraph_parts):
    r"""One report for both kinds: PaGraph's typed parts count the rows
    they own, their replicas as replication, and as cut the in-edges from
    replicas (rows another part owns, by their new ids)."""
    _, parts = hetero_pagraph_parts
    report = partition_report(parts, progress=False)
    book = load_book(parts)
    assert report['edge_cut'] is None
    held = 0
    for part, row in enumerate(report['parts']):
        features, graph, _ = open_partition(parts, part, local=True)
        topo = graph.topology
        owned = {t: book.part_range(part, t)[1] - book.part_range(part, t)[0]
                 for t in book.node_types}
        assert row['nodes'] == sum(owned.values())
        new = {t: features.get_tensor(group_name=t, attr_name='global_id',
                                      index=None) for t in book.node_types}
        held += sum(v.numel() for v in new.values())
        cut = 0
        for r, (src_type, _, _) in enumerate(topo.edge_types):
            lo, hi = int(topo.edge_offset[r]), int(topo.edge_offset[r + 1])
            rows = topo.indices[lo:hi].long() - topo.node_offset[
                int(topo.src_type[r])]
            cut += int((book.owner(new[src_type][rows], src_type)
                        != part).sum())
        assert row['cut_edges'] == cut > 0
    assert report['replication'] == pytest.approx(
        (held - book.num_ids) / book.num_ids)
    assert report['replication'] > 0
