import importlib.util

import pytest
import torch
from torch_geometric.data import Data, HeteroData

WITH_TORCH_SPARSE = importlib.util.find_spec('torch_sparse') is not None

requires_torch_sparse = pytest.mark.skipif(
    not WITH_TORCH_SPARSE,
    reason="PyG's NeighborLoader needs torch_sparse (pip install "
    "--no-build-isolation torch_scatter torch_sparse)")

requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(),
                                   reason='needs a CUDA device')


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


@pytest.fixture
def graph() -> Data:
    return random_graph()


@pytest.fixture
def small_chunks(monkeypatch):
    r"""Tiny chunks, so every streaming path of the dataset format runs over
    several chunks."""
    from pyg_fastload.io import format as fmt
    monkeypatch.setattr(fmt, 'CHUNK_BYTES', 256)
    monkeypatch.setattr(fmt, 'EDGE_CHUNK', 7)
    monkeypatch.setattr(fmt, 'CSV_BLOCK_BYTES', 10)


@pytest.fixture(scope='module')
def tiny_dir(tmp_path_factory):
    r"""The ``tiny`` preset prepared as a dataset directory, and the
    synthetic cache it came from."""
    from pyg_fastload.datasets import prepare_synthetic
    root = tmp_path_factory.mktemp('tiny')
    dataset = prepare_synthetic('tiny', root / 'ds', cache_root=root / 'cache',
                                progress=False)
    return dataset.path, root / 'cache'


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


@pytest.fixture
def hetero_graph() -> HeteroData:
    return random_hetero_graph()
