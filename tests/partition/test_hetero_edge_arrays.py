r"""A heterogeneous dataset's edge arrays (per relation, one row per edge in
the relation's CSC order) follow the edges into the parts of a partition,
and the parts' graph stores hold them per relation."""
import numpy as np
import pytest
import torch

from pyg_fastload.datasets import write_graph
from pyg_fastload.io import open_dataset_dir
from pyg_fastload.partition import open_partition, partition_dataset

from ..helpers import random_hetero_graph

K = 3
WRITES = ('author', 'writes', 'paper')
FUNDS = ('institution', 'funds', 'paper')
WINS = ('paper', 'wins', 'prize')
#: type-local ids stay below this: ``code = src * M + dst`` names an edge
M = 1000


@pytest.fixture(scope='module')
def coded_dir(tmp_path_factory):
    r"""A heterogeneous dataset whose every relation has an edge array
    naming each edge, ``code`` = source * M + destination (original
    type-local ids), and ``writes`` a 2-column one too; relation ``funds``
    has no edges, and ``wins`` leads to one node (most parts hold no
    destination of it)."""
    data = random_hetero_graph()
    data[FUNDS].edge_index = torch.zeros((2, 0), dtype=torch.long)
    data['prize'].num_nodes = 1
    data[WINS].edge_index = torch.tensor([[3, 14, 15, 92], [0, 0, 0, 0]])
    for e in data.edge_types:
        data[e].code = data[e].edge_index[0] * M + data[e].edge_index[1]
    data[WRITES].pair = torch.stack([data[WRITES].code,
                                     -data[WRITES].code], 1)
    path = tmp_path_factory.mktemp('coded') / 'ds'
    return write_graph(data, path, name='coded', source='test',
                             progress=False).path


@pytest.mark.parametrize('method,num_hops', [('metis', 2), ('hash', 2),
                                             ('pagraph', 1)])
@pytest.mark.parametrize('chunk_edges', [None, 7])
def test_parts_carry_each_relations_edge_arrays(coded_dir, tmp_path,
                                                monkeypatch, method,
                                                num_hops, chunk_edges):
    from pyg_fastload.partition import part_format
    if chunk_edges is not None:  # every part's edges in several chunks
        monkeypatch.setattr(part_format, 'WRITE_CHUNK_EDGES', chunk_edges)
    parts = tmp_path / 'parts'
    partition_dataset(coded_dir, parts, K, method, num_hops=num_hops,
                      progress=False)
    dataset = open_dataset_dir(coded_dir)
    topo = dataset.topology
    new_id = torch.from_numpy(np.load(parts / 'new_id.npy'))
    order = torch.argsort(new_id)  # original global id of every new id
    offset = dict(zip(topo.node_types, topo.node_offset.tolist()))

    def original(node_type, local_new):
        r"""Type-local new ids as type-local original ids."""
        return order[local_new + offset[node_type]] - offset[node_type]

    pagraph = method == 'pagraph'
    edges = {e: 0 for e in topo.edge_types}
    for part in range(K):
        features, graph, book = open_partition(parts, part, local=pagraph)
        part_topo = graph.topology
        # every row's type-local new id
        rows = {t: features.get_tensor(group_name=t, attr_name='global_id',
                                       index=None) if pagraph else
                torch.arange(*book.part_range(part, t))
                for t in book.node_types}
        for e in topo.edge_types:
            src_type, _, dst_type = e
            rel = part_topo.relation_topology(e)
            names = ['code', 'pair'] if e == WRITES else ['code']
            assert graph.edge_array_names_of(e) == names, (part, e)
            code = graph.edge_array('code', e)
            assert code.dtype == torch.int64 and \
                code.shape == (rel.num_edges, ), (part, e)
            # sources: a PaGraph part's rows, else global new ids
            src = rows[src_type][rel.indices.long()] if pagraph else \
                rel.indices.long()
            dst = rows[dst_type][rel.destinations()]
            # each part edge's row names that very edge
            assert torch.equal(code, original(src_type, src) * M +
                               original(dst_type, dst)), (part, e)
            if e == WRITES:
                assert torch.equal(graph.edge_array('pair', e),
                                   torch.stack([code, -code], 1))
            edges[e] += rel.num_edges
    if not pagraph:  # disjoint: every edge once
        assert edges == {e: topo.num_edges_of(e) for e in topo.edge_types}
