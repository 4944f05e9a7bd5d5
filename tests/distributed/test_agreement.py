r"""Ranks started with different loading settings stop at start-up, every
rank naming the settings that differ."""
import pytest

from .ranks import run_ranks

pytestmark = pytest.mark.timeout(120)


def _setup(rank, world, dataset, settings, seeds):
    import os

    from lightning_modules import FastLoadDataModule
    if seeds is not None:
        os.environ['PL_GLOBAL_SEED'] = str(seeds[rank])
    kwargs = dict(num_neighbors=[3, 3], batch_size=32, progress=rank == 0,
                  dist_timeout=30)
    kwargs.update(settings[rank])
    dm = FastLoadDataModule(dataset=str(dataset), **kwargs)
    try:
        dm.setup('fit')
    except Exception as error:  # reported to the test
        return f'{type(error).__name__}: {error}'
    return 'agreed'


@pytest.mark.parametrize('settings, seeds, named', [
    ([{'batch_size': 32}, {'batch_size': 64}], None,
     'batch_size, eval_batch_size'),
    ([{}, {'num_neighbors': [3, 2]}], None,
     'eval_num_neighbors, num_neighbors'),
    ([{}, {}], (0, 1), 'seed_everything'),
])
@pytest.mark.reliability(
    fault="two ranks (machines) started with a different `batch_size`, "
          "`num_neighbors` or `seed_everything`",
    behaviour="every rank stops at start-up naming the settings that differ "
              "and its own values (was: both trained to the end)")
def test_ranks_that_disagree_stop_naming_the_settings(tiny_dir, settings,
                                                      seeds, named):
    results = run_ranks(_setup, 2, tiny_dir[0], settings, seeds,
                        timeout=100)
    for rank in range(2):
        status, message = results[rank]
        assert status == 'ok'
        assert message.startswith('ConfigError'), message
        assert f'the ranks were started with different {named} ' in message
        assert f'(rank {rank}: ' in message


def test_ranks_that_agree_proceed(tiny_dir):
    results = run_ranks(_setup, 2, tiny_dir[0], [{}, {'progress': False}],
                        (3, 3), timeout=100)
    assert [results[r] for r in range(2)] == [('ok', 'agreed')] * 2
