import pytest
from torch_geometric.data import Data, HeteroData

from .helpers import random_graph, random_hetero_graph


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


@pytest.fixture
def hetero_graph() -> HeteroData:
    return random_hetero_graph()
