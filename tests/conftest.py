import importlib.util

import pytest
import torch
from torch_geometric.data import Data

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
