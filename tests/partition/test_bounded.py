r"""METIS within a memory budget (``max_memory``): the bounded multilevel
path is taken when METIS's working set would exceed the budget, gives a
balanced partition that cuts about as few edges as METIS on the whole
graph, stays within the budget, and refuses budgets it cannot keep."""
import json
import re

import numpy as np
import pytest
import torch

from pyg_fastload.graph import CSCTopology
from pyg_fastload.partition import assign_parts, partition_dataset
from pyg_fastload.partition import bounded, methods
from pyg_fastload.partition.bounded import (bounded_partition, check_budget,
                                            graph_metis_bytes, metis_bytes,
                                            parse_max_memory)

from ..helpers import usage_exit

NUM_PARTS = 4
#: Small enough for the bounded path on the planted graph below (whose
#: METIS estimate is ~16 MB), large enough for one level or two.
BUDGET = 4 * 2**20


def planted(num_nodes=4000, blocks=8, degree=16, inside=0.9, seed=0,
            directed=False):
    r"""A stochastic block model: :obj:`blocks` planted groups, a share
    :obj:`inside` of the edges within a group, node ids shuffled; and a
    training mask of 10% of the nodes."""
    gen = torch.Generator().manual_seed(seed)
    block = torch.randint(0, blocks, (num_nodes,), generator=gen)
    num = num_nodes * degree // 2
    a = torch.randint(0, num_nodes, (num,), generator=gen)
    order = torch.argsort(block)
    size = torch.bincount(block, minlength=blocks)
    start = torch.cumsum(size, 0) - size
    mate = order[start[block[a]] + (torch.rand(num, generator=gen) *
                                    size[block[a]]).long()]
    b = torch.where(torch.rand(num, generator=gen) < inside, mate,
                    torch.randint(0, num_nodes, (num,), generator=gen))
    pairs = [a, b] if directed else [torch.cat([a, b]), torch.cat([b, a])]
    edge_index = torch.stack(pairs)
    edge_index = edge_index[:, edge_index[0] != edge_index[1]]
    topo = CSCTopology.from_edge_index(edge_index, num_nodes)
    train = torch.rand(num_nodes, generator=gen) < 0.1
    return topo, train


def cut(topo, owner):
    owner = torch.from_numpy(owner)
    return float((owner[topo.indices.long()] !=
                  owner[topo.destinations()]).float().mean())


def balance(owner, mask=None):
    count = np.bincount(owner if mask is None else owner[mask.numpy()],
                        minlength=NUM_PARTS)
    return count.max() / count.mean()


@pytest.fixture(scope='module')
def graph():
    return planted()


@pytest.fixture(scope='module')
def result(graph):
    topo, train = graph
    return bounded_partition(topo, NUM_PARTS, BUDGET, train, seed=0)


def test_a_small_budget_takes_the_bounded_path(graph, result, monkeypatch):
    topo, train = graph
    calls = []

    def spy(*args, **kwargs):
        calls.append(args[2])
        return bounded_partition(*args, **kwargs)

    monkeypatch.setattr(methods, 'bounded_partition', spy)
    assert graph_metis_bytes(topo) > BUDGET
    owner = assign_parts(topo, NUM_PARTS, 'metis', (train, None, None),
                         max_memory='4MiB')
    assert calls == [BUDGET]
    assert np.array_equal(owner, result.owner)
    # a budget METIS fits in: METIS on the whole graph, as without one
    assign_parts(topo, NUM_PARTS, 'metis', (train, None, None),
                 max_memory=graph_metis_bytes(topo))
    assert calls == [BUDGET]


def test_parts_are_valid_balanced_and_cut_like_metis(graph, result):
    topo, train = graph
    owner = result.owner
    assert result.levels  # coarsened at least once
    assert owner.dtype == np.int64 and owner.shape == (topo.num_nodes,)
    assert np.array_equal(np.unique(owner), np.arange(NUM_PARTS))
    assert balance(owner) <= 1.05
    assert balance(owner, train) <= 1.05
    metis = assign_parts(topo, NUM_PARTS, 'metis', (train, None, None))
    hashed = assign_parts(topo, NUM_PARTS, 'hash')
    # the planted graph's best 4 parts cut ~7.5% of edges; hash ~75%
    assert cut(topo, owner) <= 1.5 * cut(topo, metis)
    assert cut(topo, owner) <= 0.25 * cut(topo, hashed)


def test_deterministic_under_a_seed(graph, result):
    topo, train = graph
    again = bounded_partition(topo, NUM_PARTS, BUDGET, train, seed=0)
    assert np.array_equal(again.owner, result.owner)
    assert again.levels == result.levels


@pytest.mark.parametrize('budget', [BUDGET, 2 * 2**20])
def test_the_graph_given_to_metis_fits_the_budget(graph, budget):
    topo, train = graph
    got = bounded_partition(topo, NUM_PARTS, budget, train)
    held = 4 * (topo.num_edges + 2 * (topo.num_nodes + 1)) + \
        bounded.NODE_BYTES * topo.num_nodes  # indptr int64, indices int32
    assert got.metis_bytes == metis_bytes(got.metis_nodes,
                                          got.metis_entries)
    assert held + got.metis_bytes <= budget
    assert got.chunk_edges <= (budget - held) // bounded.CHUNK_EDGE_BYTES
    # the coarsest graph is the last level, symmetrised
    assert got.metis_nodes == got.levels[-1][0]
    assert got.levels[-1][1] <= got.metis_entries <= 2 * got.levels[-1][1]
    assert balance(got.owner) <= 1.05


def test_directed_graph_with_isolated_nodes():
    r"""Edges stored in one direction only, and a third of the nodes
    without any: METIS still gets a symmetric graph, and the isolated
    nodes are packed into clusters rather than left one per coarse node."""
    topo, train = planted(num_nodes=6000, directed=True)
    src, dst = topo.indices.long(), topo.destinations()
    keep = (src >= 2000) & (dst >= 2000)
    topo = CSCTopology.from_edge_index(torch.stack([src[keep], dst[keep]]),
                                       6000)
    touched = torch.zeros(6000, dtype=torch.bool)
    touched[topo.indices.long()] = touched[topo.destinations()] = True
    assert int((~touched).sum()) >= 2000
    got = bounded_partition(topo, NUM_PARTS, BUDGET, train)
    assert np.array_equal(np.unique(got.owner), np.arange(NUM_PARTS))
    assert balance(got.owner) <= 1.05
    assert got.metis_nodes < 1000  # not 2,000 isolated nodes alone


def test_too_small_a_budget_names_the_least_that_works(graph):
    topo, train = graph
    with pytest.raises(ValueError) as info:
        assign_parts(topo, NUM_PARTS, 'metis', max_memory=1000)
    message = str(info.value)
    assert message.startswith('max_memory (--max-memory) = 1000 (1000 B) '
                              'is too small')
    least = int(re.search(r'give at least (\d+) bytes', message).group(1))
    assert check_budget(topo, least) >= bounded.MIN_CHUNK_EDGES
    with pytest.raises(ValueError, match='give at least'):
        check_budget(topo, least - 1)


@pytest.mark.parametrize('value, size', [
    ('2GiB', 2**31), ('500MB', 5 * 10**8), (' 1.5 KiB ', 1536), (4096, 4096),
    (None, None)])
def test_parse_max_memory(value, size):
    assert parse_max_memory(value) == size


@pytest.mark.parametrize('value, match', [
    (0, r"max_memory = 0 is not more than 0 bytes: give bytes"),
    ('0', r"max_memory = '0' is not more than 0 bytes"),
    ('abc', r"max_memory = 'abc' is not a size: give bytes: an int or a "
            r"size such as '2GiB'"),
    ('20%', r"max_memory = '20%' is not a size"),
    (0.5, r"max_memory = 0.5 is not a size"),
    (-5, r"max_memory = -5 is not a size"),
])
def test_bad_budgets_are_refused(value, match):
    with pytest.raises(ValueError, match=match):
        parse_max_memory(value, 'max_memory')


def test_partition_dataset_records_the_budget(tiny_dir, tmp_path):
    dataset_dir, _ = tiny_dir
    partition_dataset(dataset_dir, tmp_path / 'p', 2, 'metis',
                      progress=False, max_memory='1MiB')
    meta = json.loads((tmp_path / 'p' / 'partition.json').read_text())
    assert meta['max_memory'] == 2**20 and meta['method'] == 'metis'
    partition_dataset(dataset_dir, tmp_path / 'q', 2, 'metis',
                      progress=False)
    meta = json.loads((tmp_path / 'q' / 'partition.json').read_text())
    assert meta['max_memory'] is None
    with pytest.raises(ValueError, match=r"max_memory \(--max-memory\) "
                       r"bounds method 'metis' only, not 'hash'"):
        partition_dataset(dataset_dir, tmp_path / 'r', 2, 'hash',
                          progress=False, max_memory='1MiB')
    assert not (tmp_path / 'r').exists()


@pytest.mark.reliability(
    fault="pyg-fastload partition --max-memory 0, --max-memory abc",
    behaviour="a usage error naming --max-memory, the value and the forms "
              "it takes, before anything is read or written")
@pytest.mark.parametrize('value, message', [
    ('0', "argument --max-memory: --max-memory = '0' is not more than 0 "
          "bytes"),
    ('abc', "argument --max-memory: --max-memory = 'abc' is not a size: "
            "give bytes"),
])
def test_command_refuses_bad_budgets(tiny_dir, tmp_path, capsys, value,
                                     message):
    from pyg_fastload.lightning.command import main
    dataset_dir, _ = tiny_dir
    with pytest.raises(SystemExit) as info:
        main(['partition', str(dataset_dir), '--num-parts', '2', '--out',
              str(tmp_path / 'p'), '--max-memory', value])
    assert info.value.code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / 'p').exists()


@pytest.mark.reliability(
    fault="pyg-fastload partition --max-memory smaller than the graph's "
          "topology, 64 bytes per node and one chunk of edges",
    behaviour="an error naming max_memory (--max-memory), the value, what "
              "it must hold and the smallest budget that works; nothing "
              "written")
def test_command_refuses_a_budget_too_small(tiny_dir, tmp_path, capsys):
    from pyg_fastload.lightning.command import main
    dataset_dir, _ = tiny_dir
    with usage_exit(capsys, r'max_memory \(--max-memory\) = 1024 \(1.0 KiB\) '
                    r'is too small to partition 2,000 nodes'):
        main(['partition', str(dataset_dir), '--num-parts', '2', '--out',
              str(tmp_path / 'p'), '--max-memory', '1KiB', '--no-progress'])
    assert not (tmp_path / 'p').exists()
