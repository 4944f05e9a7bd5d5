r"""Ranks started with different loading settings stop at start-up, every
rank naming the settings that differ."""
import pytest

from .ranks import run_ranks

pytestmark = pytest.mark.timeout(120)


def _setup_each(rank, world, dataset, cases):
    r"""Sets up a data module per ``(settings, seeds)`` case in turn, with
    this rank's settings (one process group for all cases)."""
    import os

    from pyg_fastload.lightning import FastLoadDataModule
    out = []
    for settings, seeds in cases:
        os.environ.pop('PL_GLOBAL_SEED', None)
        if seeds is not None:
            os.environ['PL_GLOBAL_SEED'] = str(seeds[rank])
        kwargs = dict(dataset=str(dataset), num_neighbors=[3, 3],
                      batch_size=32, progress=rank == 0, dist_timeout=30)
        kwargs.update(settings[rank])
        dm = FastLoadDataModule(**kwargs)
        try:
            dm.setup('fit')
            out.append('agreed')
        except Exception as error:  # reported to the test
            out.append(f'{type(error).__name__}: {error}')
        finally:
            if dm.collectives is not None:
                dm.collectives.stop_heartbeat()
    return out


CASES = [
    ([{'batch_size': 32}, {'batch_size': 64}], None,
     'batch_size, evaluation'),
    ([{}, {'num_neighbors': [3, 2]}], None,
     'evaluation, num_neighbors'),
    ([{}, {}], (0, 1), 'seed_everything'),
]


@pytest.mark.reliability(
    fault="two ranks (machines) started with a different `batch_size`, "
          "`num_neighbors` or `seed_everything`",
    behaviour="every rank stops at start-up naming the settings that differ "
              "and its own values (was: both trained to the end)")
def test_ranks_that_disagree_stop_naming_the_settings(tiny_dir):
    cases = [(settings, seeds) for settings, seeds, _ in CASES]
    cases.append(([{}, {'progress': False}], (3, 3)))  # these agree
    results = run_ranks(_setup_each, 2, tiny_dir[0], cases, timeout=150)
    for rank in range(2):
        status, messages = results[rank]
        assert status == 'ok', messages
        for (_, _, named), message in zip(CASES, messages):
            assert message.startswith('ConfigError'), message
            assert f'the ranks were started with different {named} ' \
                in message
            assert f'(rank {rank}: ' in message
        assert messages[-1] == 'agreed'


@pytest.mark.reliability(
    fault="two ranks (machines) on datasets of the same name and sizes but "
          "other edges (directories, or graphs in memory)",
    behaviour="every rank stops at start-up naming 'dataset' (was: both "
              "trained and exited 0); copies of one dataset at other paths "
              "agree")
def test_ranks_on_different_datasets_stop_naming_the_dataset(tiny_dir,
                                                             tmp_path):
    import shutil

    from pyg_fastload.datasets import load_synthetic, prepare_synthetic
    path, cache = tiny_dir
    other = prepare_synthetic('tiny', tmp_path / 'other', seed=1,
                              cache_root=cache, progress=False).path
    copy = shutil.copytree(path, tmp_path / 'copy')
    graph = load_synthetic('tiny', root=cache, progress=False).to_data()
    rewired = graph.clone()
    rewired.edge_index = rewired.edge_index.clone()
    rewired.edge_index[0, 0] = (rewired.edge_index[0, 0] + 1) % \
        graph.num_nodes
    cases = [([{}, {'dataset': str(other)}], None),
             ([{'dataset': graph}, {'dataset': rewired}], None),
             ([{}, {'dataset': str(copy)}], None),
             ([{'dataset': graph}, {'dataset': graph.clone()}], None)]
    results = run_ranks(_setup_each, 2, path, cases, timeout=150)
    for rank in range(2):
        status, messages = results[rank]
        assert status == 'ok', messages
        for message in messages[:2]:
            assert message.startswith('ConfigError'), message
            assert 'the ranks were started with different dataset ' \
                in message
            assert 'give every rank the same dataset' in message
        assert messages[2:] == ['agreed', 'agreed']
