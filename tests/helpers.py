r"""Helpers the tests share: small graph builders, skip marks and
assertions, imported from here (``from ..helpers import random_graph``);
fixtures stay in the ``conftest.py`` files, which build on these."""
import contextlib
import gc
import importlib.util
import json
import re
import threading
import time
from typing import Iterator

import pytest
import torch
from torch_geometric.data import Data, HeteroData

from pyg_fastload.errors import USAGE_EXIT
from pyg_fastload.graph.topology import CSCTopology
from pyg_fastload.io import OnDiskDataset, write_dataset_dir



@contextlib.contextmanager
def usage_exit(capsys: pytest.CaptureFixture, match: str) -> Iterator[None]:
    r"""Asserts that the block ends a ``pyg-fastload`` command as a bad
    argument or input does: exit status :data:`USAGE_EXIT` and a line on
    stderr matching :obj:`match`."""
    with pytest.raises(SystemExit) as info:
        yield
    assert info.value.code == USAGE_EXIT, info.value.code
    err = capsys.readouterr().err
    assert re.search(match, err), err


WITH_TORCH_SPARSE = importlib.util.find_spec('torch_sparse') is not None

requires_torch_sparse = pytest.mark.skipif(
    not WITH_TORCH_SPARSE,
    reason="PyG's NeighborLoader needs torch_sparse (pip install "
    "--no-build-isolation torch_scatter torch_sparse)")

requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(),
                                   reason='needs a CUDA device')


def randomise_parameters(model: torch.nn.Module,
                         seed: int = 0) -> torch.nn.Module:
    r"""Draws every parameter of :obj:`model` afresh from U(-0.5, 0.5),
    biases and norm weights included (PyG starts many at zeros or ones,
    where a computation that leaves them out still matches); returns it."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for param in model.parameters():
            param.copy_(torch.rand(param.shape, generator=gen) - 0.5)
    return model


def random_graph(num_nodes: int = 200, num_edges: int = 2000,
                 num_features: int = 8, seed: int = 0) -> Data:
    r"""A small random directed multigraph-free graph with node and edge
    attributes and masks."""
    gen = torch.Generator().manual_seed(seed)
    key = torch.randperm(num_nodes * num_nodes, generator=gen)[:num_edges]
    edge_index = torch.stack([key // num_nodes, key % num_nodes])
    return Data(
        x=torch.randn(num_nodes, num_features, generator=gen),
        y=torch.randint(0, 4, (num_nodes, ), generator=gen),
        edge_index=edge_index,
        edge_attr=torch.randn(num_edges, 3, generator=gen),
        train_mask=torch.rand(num_nodes, generator=gen) < 0.6,
        num_nodes=num_nodes,
    )


def random_hetero_graph(seed: int = 0) -> HeteroData:
    r"""A small heterogeneous graph shaped like ogbn-mag: papers (features,
    labels, masks) cite papers; authors (features) write papers;
    institutions (no features) employ authors; reverse relations."""
    gen = torch.Generator().manual_seed(seed)
    data = HeteroData()
    data['paper'].x = torch.randn(120, 6, generator=gen)
    data['paper'].y = torch.randint(0, 4, (120, ), generator=gen)
    data['paper'].train_mask = torch.rand(120, generator=gen) < 0.6
    data['author'].x = torch.randn(80, 6, generator=gen)
    data['institution'].num_nodes = 10
    cites = torch.randint(0, 120, (2, 600), generator=gen)
    writes = torch.stack([torch.randint(0, 80, (300, ), generator=gen),
                          torch.randint(0, 120, (300, ), generator=gen)])
    affiliated = torch.stack([torch.arange(80),
                              torch.randint(0, 10, (80, ), generator=gen)])
    data['paper', 'cites', 'paper'].edge_index = cites
    data['author', 'writes', 'paper'].edge_index = writes
    data['paper', 'rev_writes', 'author'].edge_index = writes.flip(0)
    data['author', 'affiliated_with', 'institution'].edge_index = affiliated
    data['institution', 'rev_affiliated_with', 'author'].edge_index = \
        affiliated.flip(0)
    return data


def small_dataset(path, num_nodes=6, **kwargs) -> OnDiskDataset:
    r"""A 6-node dataset directory at :obj:`path` (``x`` cut to
    :obj:`num_nodes` rows, to test a wrong length)."""
    edge_index = torch.tensor([[1, 2, 0, 3, 5, 4, 0], [0, 0, 1, 2, 2, 3, 5]])
    topo = CSCTopology.from_edge_index(edge_index, num_nodes=6)
    arrays = {'x': torch.arange(6 * 3, dtype=torch.float32).view(6, 3)[
        :num_nodes], 'y': torch.tensor([0, 1, 2, 0, 1, 2])}
    return write_dataset_dir(path, num_nodes=6, indptr=topo.indptr,
                             indices=topo.indices, node_arrays=arrays,
                             name='small', source='test', progress=False,
                             **kwargs)


def edit_meta(path, fn):
    r"""Applies :obj:`fn` to the ``meta.json`` of :obj:`path`."""
    file = path / 'meta.json'
    meta = json.loads(file.read_text())
    fn(meta)
    file.write_text(json.dumps(meta))


def in_neighbourhood(topo, nodes, num_hops):
    r"""Every node 1 to :obj:`num_hops` in-edges from :obj:`nodes` (a
    plain breadth-first oracle)."""
    frontier, reached = nodes, []
    for _ in range(num_hops):
        frontier = torch.cat([topo.indices[topo.indptr[v]:topo.indptr[v + 1]]
                              for v in frontier.tolist()]).long().unique()
        reached.append(frontier)
    return torch.cat(reached).unique()


def stage_threads() -> list:
    r"""The loaders' pipeline and sampling threads still alive."""
    return [t for t in threading.enumerate()
            if t.name.startswith('pyg_fastload-') and t.is_alive()]


def wait_for_no_stage_threads(timeout: float = 10.0) -> list:
    r"""Waits up to :obj:`timeout` seconds for every stage thread to stop
    (collecting garbage: dropped loaders stop theirs); the ones left."""
    deadline = time.monotonic() + timeout
    while stage_threads() and time.monotonic() < deadline:
        gc.collect()
        time.sleep(0.02)
    return stage_threads()


def new_id_topology(dataset_dir, parts_dir):
    r"""``(topology, target)``: a heterogeneous dataset's whole graph in
    the typed new ids of its partition :obj:`parts_dir`."""
    import numpy as np

    from pyg_fastload.graph import HeteroTopology
    from pyg_fastload.io import open_dataset_dir
    dataset = open_dataset_dir(dataset_dir)
    topo = dataset.topology
    new_id = torch.from_numpy(np.load(parts_dir / 'new_id.npy'))
    edges = {}
    for r, edge_type in enumerate(topo.edge_types):
        rel = topo.relation_topology(edge_type)
        src_off = topo.node_offset[int(topo.src_type[r])]
        dst_off = topo.node_offset[int(topo.dst_type[r])]
        dst = torch.arange(rel.num_nodes).repeat_interleave(rel.indptr.diff())
        src = rel.indices.long()
        edges[edge_type] = torch.stack([
            new_id[src + src_off] - src_off, new_id[dst + dst_off] - dst_off])
    return HeteroTopology.from_relations(dataset.num_nodes, edges), \
        dataset.target


def cli_succeeds(args) -> None:
    r"""Runs ``pyg-fastload`` with :obj:`args` in this process; it must end
    with status 0 (or return)."""
    from pyg_fastload.lightning.command import main
    try:
        code = main(args)
    except SystemExit as exit:
        code = exit.code
    assert code in (None, 0)


def timed_links(root, labelled: bool = False):
    r"""``(dataset dir, Data)``: a random directed graph of 300 nodes whose
    3,300 edges carry a ``time`` (300 links again at other times), saved
    and prepared in :obj:`root` (``prepare --pyg-data``: the times become
    an edge array); with :obj:`labelled`, 3 classes of labels ``y``."""
    from pyg_fastload.datasets.pyg_file import prepare_pyg
    gen = torch.Generator().manual_seed(0)
    edge_index = torch.randint(300, (2, 3000), generator=gen)
    edge_index = torch.cat([edge_index, edge_index[:, :300]], dim=1)
    data = Data(x=torch.randn(300, 8, generator=gen), edge_index=edge_index,
                time=torch.randint(0, 10_000, (3300, ), generator=gen),
                num_nodes=300)
    if labelled:
        data.y = torch.randint(0, 3, (300, ), generator=gen)
    torch.save(data, root / 'graph.pt')
    return prepare_pyg(root / 'graph.pt', root / 'ds', progress=False).path, \
        data


#: The relations of :func:`timed_hetero_links`.
BUYS = ('user', 'buys', 'item')
REV = ('item', 'rev_buys', 'user')
SIMILAR = ('item', 'similar', 'item')


def _unique_edges(num_src: int, num_dst: int, count: int, gen):
    keys = torch.randperm(num_src * num_dst, generator=gen)[:count]
    return torch.stack([keys // num_dst, keys % num_dst])


def timed_hetero_links(root):
    r"""``(dataset dir, {relation: {(src, dst): time}})``: users buying
    items at times (relation :data:`REV` the same edges reversed, at the
    same times), items similar to items at times of their own; no repeated
    edge; saved and prepared in :obj:`root` (``prepare --pyg-data``: the
    times become edge arrays)."""
    from torch_geometric.data import HeteroData

    from pyg_fastload.datasets.pyg_file import prepare_pyg
    gen = torch.Generator().manual_seed(0)
    data = HeteroData()
    data['user'].x = torch.randn(120, 6, generator=gen)
    data['item'].x = torch.randn(90, 6, generator=gen)
    buys = _unique_edges(120, 90, 1500, gen)
    data[BUYS].edge_index = buys
    data[BUYS].time = torch.randint(0, 1000, (1500, ), generator=gen)
    data[REV].edge_index = buys.flip(0)
    data[REV].time = data[BUYS].time.clone()
    data[SIMILAR].edge_index = _unique_edges(90, 90, 700, gen)
    data[SIMILAR].time = torch.randint(0, 1000, (700, ), generator=gen)
    torch.save(data, root / 'graph.pt')
    path = prepare_pyg(root / 'graph.pt', root / 'ds', progress=False).path
    times = {e: {(s, d): t for s, d, t in zip(
        *data[e].edge_index.tolist(), data[e].time.tolist())}
        for e in (BUYS, REV, SIMILAR)}
    return path, times
