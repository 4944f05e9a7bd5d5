r"""Heterogeneous dataset directories written from edge chunks, sorted out
of core: the same files as from relations in memory (and as the writer
before it sorted out of core), bounded memory, and named errors."""
import hashlib
import json
import subprocess
import sys

import numpy as np
import pytest
import torch

from pyg_fastload.datasets import generate_hetero
from pyg_fastload.datasets import (
    prepare_hetero_preset,
    write_graph,
)
from pyg_fastload.io import format as fmt
from pyg_fastload.io import open_dataset_dir, write_dataset_dir

#: The files the writer wrote for ``prepare --preset hetero-tiny --seed 0``
#: before it sorted relations out of core (commit of issue 44), which the
#: out-of-core writer must reproduce byte for byte.
BEFORE = {
    'edge_id.bin': '971bbf7d80b6e2d2e050fccc7620b1da'
                   '1424d425e1d913307e101cbc33c57ce4',
    'indices.bin': '4f20ee22f952d1eaa000ba64b9099642'
                   'e61a798875770d6383d4e8dbcfe9534e',
    'indptr.bin': 'd90edc196bb5bb6829d65af76085d149'
                  'f47e75d4178a8f9c3d71fd00790bae11',
    'paper.x.bin': '4004abcfdf12fe3c291ef58f84ce7993'
                   'd30a1eb52ffc748398ecc184ccacee1a',
    'paper.y.bin': '5f881270dfe9ca4e6d6cdf61d18d6b88'
                   'e858aafa5c12d3d39921c537a2ed19ce',
    'paper.train_mask.bin': '2be397c1ceceb8a103df6df30b357b6d'
                            '58a796a9d29fd23c9d9b749269227918',
    'paper.val_mask.bin': '47ebe652776b24da24ff230a9c27785e'
                          '6cd390f993a7927c68cc1b29aa0fa703',
    'paper.test_mask.bin': '207ab1b28af3bac577c5730237c0ec59'
                           'd26cbb178184c13624352e32c91fb6e1',
}


def files(path):
    return {p.name: p.read_bytes() for p in sorted(path.iterdir())}


def edge_chunks(edge_index, size):
    r"""The edges of :obj:`edge_index` in chunks of :obj:`size`, numpy and
    torch int32 by turns (with an empty chunk)."""
    def chunks():
        yield np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        for i, start in enumerate(range(0, edge_index.size(1), size)):
            src, dst = edge_index[:, start:start + size]
            yield (src.int(), dst.int()) if i % 2 else (src.numpy(),
                                                        dst.numpy())
    return chunks


def write_chunked(data, path, size, **kwargs):
    r""":obj:`data` written as :func:`write_graph` does, every
    relation given as edge chunks of :obj:`size`."""
    arrays = {t: {k: v for k, v in data[t].items() if k != 'num_nodes'}
              for t in data.node_types}
    return write_dataset_dir(
        path, num_nodes={t: data[t].num_nodes for t in data.node_types},
        relations={e: edge_chunks(data[e].edge_index, size)
                   for e in data.edge_types},
        node_arrays={t: a for t, a in arrays.items() if a},
        name='tiny', source='test', num_classes=4, target='paper',
        progress=False, extra_meta={'skipped_attributes': []}, **kwargs)


def test_the_writer_reproduces_the_files_it_wrote_before(tmp_path):
    ds = prepare_hetero_preset('hetero-tiny', tmp_path / 'ds', seed=0,
                               progress=False)
    got = {name: hashlib.sha256(data).hexdigest()
           for name, data in files(ds.path).items() if name in BEFORE}
    assert got == BEFORE and len(got) == len(files(ds.path)) - 1  # meta


@pytest.mark.parametrize('size', [97, 100_000])  # several chunks, or one
def test_edge_chunks_give_the_files_of_relations_in_memory(tmp_path, size):
    data = generate_hetero('hetero-tiny', seed=3)
    memory = write_graph(data, tmp_path / 'memory', name='tiny',
                               source='test', progress=False)
    chunked = write_chunked(data, tmp_path / 'chunks', size)
    assert files(chunked.path) == files(memory.path)  # meta.json too
    back = open_dataset_dir(chunked.path, verify='checksum')
    for e in data.edge_types:
        assert torch.equal(back.to_hetero_data()[e].edge_index,
                           data[e].edge_index)


def test_relations_in_memory_are_copied_in_chunks(tmp_path, monkeypatch):
    data = generate_hetero('hetero-tiny', seed=3)
    whole = write_graph(data, tmp_path / 'whole', name='t', source='t',
                              progress=False)
    monkeypatch.setattr(fmt, 'EDGE_CHUNK', 50)
    parts = write_graph(data, tmp_path / 'parts', name='t', source='t',
                              progress=False)
    assert files(parts.path) == files(whole.path)


def test_source_ids_over_an_index_space(tmp_path):
    r"""A part of a partition: source ids over the whole graph's counts,
    from chunks as from a CSC."""
    from pyg_fastload.graph.topology import CSCTopology
    edge_index = torch.tensor([[0, 49, 7, 30], [1, 0, 1, 2]])
    space = {'a': 50, 'b': 3}
    common = dict(num_nodes={'a': 4, 'b': 3}, node_arrays={}, name='p',
                  source='t', progress=False, index_space=space)
    csc = write_dataset_dir(
        tmp_path / 'csc', relations={('a', 'r', 'b'): CSCTopology.from_edge_index(
            edge_index, 3, num_sources=50)}, **common)
    chunks = write_dataset_dir(
        tmp_path / 'chunks', relations={('a', 'r', 'b'): edge_chunks(
            edge_index, 3)}, **common)
    assert files(chunks.path) == files(csc.path)
    assert json.loads((chunks.path / 'meta.json').read_text())[
        'index_space'] == space


def test_bad_chunks_are_named_with_their_relation(tmp_path):
    data = generate_hetero('hetero-tiny')
    nodes = {t: data[t].num_nodes for t in data.node_types}
    writes = ('author', 'writes', 'paper')

    def write(relations, out):
        write_dataset_dir(tmp_path / out, num_nodes=nodes,
                                 relations=relations, node_arrays={},
                                 name='t', source='t', progress=False)

    bad = data[writes].edge_index.clone()
    bad[0, 150] = 300  # 300 authors
    with pytest.raises(ValueError, match=r"relations\[\('author', 'writes', "
                       r"'paper'\)\]: edge chunk 2 holds source node id 300,"
                       r" outside \[0, num_sources=300\); fix the edge list "
                       r"or pass the true node count \(sources: "
                       r"num_nodes\['author'\]"):
        write({writes: edge_chunks(bad, 100)}, 'range')
    with pytest.raises(ValueError, match=r"edge type \('author', 'writes', "
                       r"'venue'\): its destination node type 'venue' is not "
                       r"in 'num_nodes' .*; declare it with its node count"):
        write({('author', 'writes', 'venue'): edge_chunks(bad, 100)}, 'type')
    with pytest.raises(TypeError, match=r"relations\[\('author', 'writes', "
                       r"'paper'\)\] is a Tensor; pass a CSCTopology or a "
                       r"callable"):
        write({writes: bad}, 'tensor')
    calls = []

    def changing():
        calls.append(1)
        yield np.array([0, 1]), np.array([1, len(calls) % 2 + 1])
    with pytest.raises(ValueError, match=r"relations\[.*'writes'.*second "
                       r"call"):
        write({writes: changing}, 'changing')
    assert not list(tmp_path.iterdir())  # nothing left, staged or not


PROBE = r'''
import json, resource, sys, threading, time
import numpy as np
from pyg_fastload.io import write_dataset_dir

nodes, edges, chunk, out = int(sys.argv[1]), int(sys.argv[2]), \
    int(sys.argv[3]), sys.argv[4]

def relation(seed):
    def chunks():
        for i, start in enumerate(range(0, edges, chunk)):
            rng = np.random.default_rng([seed, i])
            size = min(chunk, edges - start)
            yield rng.integers(0, nodes, size), rng.integers(0, nodes, size)
    return chunks

def rss(field):
    with open('/proc/self/status') as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1]) * 1024

peak, done = [0], threading.Event()
def sample():
    while not done.is_set():
        peak[0] = max(peak[0], rss('RssAnon:'))
        time.sleep(0.001)
threading.Thread(target=sample, daemon=True).start()
base = rss('RssAnon:')
write_dataset_dir(
    out, num_nodes={'a': nodes, 'b': nodes},
    relations={('a', 'r', 'b'): relation(0), ('b', 's', 'a'): relation(1)},
    node_arrays={}, name='m', source='m', progress=False, verify='size')
done.set()
print(json.dumps({'anon': peak[0] - base, 'maxrss': resource.getrusage(
    resource.RUSAGE_SELF).ru_maxrss * 1024}))
'''


def test_writer_memory_does_not_grow_with_the_edges(tmp_path):
    r"""Two relations of 1.5M and of 6M edges each, in chunks of 64K: the
    writer's own (anonymous) memory is one chunk, the per-node offsets and
    fixed buffers at both, while the edges' bytes grow 4x (the pages of the
    memory-mapped output count in ``ru_maxrss``, not in anonymous
    memory)."""
    nodes, chunk = 100_000, 1 << 16
    # both at once (each its own process and peak), on the two cores
    runs = {edges: subprocess.Popen(
        [sys.executable, '-c', PROBE, str(nodes), str(edges), str(chunk),
         str(tmp_path / f'e{edges}')], stdout=subprocess.PIPE, text=True)
        for edges in (1_500_000, 6_000_000)}
    peaks = {}
    for edges, run in runs.items():
        out, _ = run.communicate(timeout=300)
        assert run.returncode == 0
        peaks[edges] = json.loads(out)
    print(peaks)
    grown = peaks[6_000_000]['anon'] - peaks[1_500_000]['anon']
    edge_bytes = 2 * (6_000_000 - 1_500_000) * 12  # int32 ids, int64 ids
    assert grown < 0.05 * edge_bytes, (peaks, edge_bytes)
