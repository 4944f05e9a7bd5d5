import os

#: One intra-op thread per test process, rank and command (unless set):
#: the tests' graphs are tiny, and on 2 shared cores the threads of
#: several processes spin waiting for each other (a 200-epoch pre-sample
#: of a 7-node graph took 19 s with 2 threads, 1.9 s with one). Set before
#: torch is imported; what a forked rank or a command inherits.
THREADS = os.environ.setdefault('OMP_NUM_THREADS', '1')

import pytest  # noqa: E402 (torch imported after THREADS)
import torch  # noqa: E402
from torch_geometric.data import Data, HeteroData  # noqa: E402

from pyg_fastload.partition import partition_dataset  # noqa: E402

from .distributed import ranks  # noqa: E402
from .helpers import random_graph, random_hetero_graph  # noqa: E402

torch.set_num_threads(int(THREADS))  # in case torch was imported before


#: Set (to 1) where the ``release`` tests run: CI (``.ci/run``).
RELEASE_TESTS = 'PYG_FASTLOAD_RELEASE_TESTS'


def pytest_collection_modifyitems(config, items):
    r"""The ``release`` tests (build the sdist and the wheel once, install
    the wheel in a fresh virtual environment, train: about a minute) run
    in CI, where :data:`RELEASE_TESTS` is 1, or when ``-m`` names them;
    elsewhere they are skipped, saying so."""
    if os.environ.get(RELEASE_TESTS) == '1' or \
            'release' in config.getoption('markexpr', ''):
        return
    skip = pytest.mark.skip(reason=f'a release test: run in CI ({RELEASE_TESTS}'
                            f'=1, set by .ci/run) or with -m release')
    for item in items:
        if item.get_closest_marker('release'):
            item.add_marker(skip)


def pytest_collection_finish(session):
    r"""Starts the warm server the ranks and commands are forked from as
    soon as a collected test uses it, so that its imports (about 10 s of
    a core) run beside the first tests; not for ``--collect-only`` (the
    GPU kit's selection of its tests), which runs none."""
    if session.config.option.collectonly:
        return
    helpers = {id(helper) for helper in (
        ranks.run_ranks, ranks.run_command, ranks.run_code,
        ranks.command_ranks, ranks.Forked)}
    modules = {item.module for item in session.items
               if getattr(item, 'module', None) is not None}
    if any(any(id(value) in helpers for value in vars(module).values())
           for module in modules):
        ranks.start_server()


@pytest.fixture
def two_threads():
    r"""Two intra-op threads for one test (a path that splits its work by
    torch's threads), one again after it."""
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(int(THREADS))


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


@pytest.fixture(scope='session')
def tiny_dir(tmp_path_factory):
    r"""The ``tiny`` preset prepared as a dataset directory, and the
    synthetic cache it came from; one per session, read only (a test that
    changes it changes a copy)."""
    from pyg_fastload.datasets import prepare_synthetic
    root = tmp_path_factory.mktemp('tiny')
    dataset = prepare_synthetic('tiny', root / 'ds', cache_root=root / 'cache',
                                progress=False)
    return dataset.path, root / 'cache'


@pytest.fixture
def hetero_graph() -> HeteroData:
    return random_hetero_graph()


# Partitions of the prepared presets, one of each per session (partitioning
# tiny by PaGraph takes seconds), read only: a test that changes one
# changes a copy.
def _parts(root, dataset_dir, method, name='parts', **options):
    r"""``root / name``: :obj:`dataset_dir` in 2 parts by :obj:`method`."""
    out = root / name
    partition_dataset(dataset_dir, out, 2, method, progress=False, **options)
    return out


@pytest.fixture(scope='session')
def pagraph_parts(tmp_path_factory, tiny_dir):
    r"""``(dataset_dir, parts_dir)``: PaGraph's 2 self-reliant parts."""
    dataset_dir, _ = tiny_dir
    return dataset_dir, _parts(tmp_path_factory.mktemp('pagraph'),
                               dataset_dir, 'pagraph')


@pytest.fixture(scope='session')
def pagraph_link_parts(tmp_path_factory, tiny_dir):
    r"""``(dataset_dir, parts_dir)``: PaGraph's 2 parts for link
    prediction (every node's 3-hop in-neighbourhood in its part)."""
    dataset_dir, _ = tiny_dir
    return dataset_dir, _parts(tmp_path_factory.mktemp('pagraph-link'),
                               dataset_dir, 'pagraph', task='link')


@pytest.fixture(scope='session')
def metis_parts(tmp_path_factory, tiny_dir):
    r"""2 disjoint METIS parts (DSP, HopGNN)."""
    dataset_dir, _ = tiny_dir
    return _parts(tmp_path_factory.mktemp('metis'), dataset_dir, 'metis')


@pytest.fixture(scope='session')
def hash_parts(tmp_path_factory, tiny_dir):
    r"""``(dataset_dir, root)``: hash partitions ``root / 'a'`` and
    ``root / 'b'`` (2 parts each, different runs), ``root / 'four'`` and
    ``root / 'source'`` (2 parts reading their rows from the dataset)."""
    dataset_dir, _ = tiny_dir
    root = tmp_path_factory.mktemp('hash')
    for name in ('a', 'b'):
        partition_dataset(dataset_dir, root / name, 2, 'hash',
                          progress=False)
    partition_dataset(dataset_dir, root / 'four', 4, 'hash', progress=False)
    partition_dataset(dataset_dir, root / 'source', 2, 'hash', progress=False,
                      features='source')
    return dataset_dir, root


@pytest.fixture(scope='session')
def hetero_dataset(tmp_path_factory):
    r"""The heterogeneous ``hetero-tiny`` preset as a dataset directory."""
    from pyg_fastload.datasets import prepare_hetero_preset
    root = tmp_path_factory.mktemp('hetero')
    return prepare_hetero_preset('hetero-tiny', root / 'ds',
                                 progress=False).path


def _hetero_parts(dataset_dir, name, method, **options):
    r"""``(dataset_dir, parts_dir)``: :obj:`dataset_dir` in 2 parts by
    :obj:`method`, beside it in :obj:`name`."""
    return dataset_dir, _parts(dataset_dir.parent, dataset_dir, method,
                               name, **options)


@pytest.fixture(scope='session')
def hetero_parts(hetero_dataset):
    r"""``hetero-tiny`` in 2 METIS parts (mode dsp)."""
    return _hetero_parts(hetero_dataset, 'metis', 'metis')


@pytest.fixture(scope='session')
def hetero_pagraph_parts(hetero_dataset):
    r"""``hetero-tiny`` in PaGraph's 2 self-reliant parts."""
    return _hetero_parts(hetero_dataset, 'pagraph', 'pagraph')


@pytest.fixture(scope='session')
def hetero_pagraph_link_parts(hetero_dataset):
    r"""``hetero-tiny`` in PaGraph's 2 parts for link prediction."""
    return _hetero_parts(hetero_dataset, 'pagraph-link', 'pagraph',
                         task='link')
