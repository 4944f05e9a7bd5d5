r"""Every config in ``configs/`` opens with a header saying what it trains,
how long it takes on the 2-core machine and its peak memory, and where
those figures come from (``scripts/config_cost.py``, which runs a config
for a few steps and extrapolates); the configs that run on generated data
run here for a few steps through that script (on tiny graphs: the check is
that they run and that the script measures them, not the figures)."""
import importlib.util
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = sorted((ROOT / 'configs').glob('*.yaml'))
spec = importlib.util.spec_from_file_location(
    'config_cost', ROOT / 'scripts' / 'config_cost.py')
config_cost = importlib.util.module_from_spec(spec)
sys.modules['config_cost'] = config_cost  # its dataclass looks it up
spec.loader.exec_module(config_cost)

pytestmark = [
    pytest.mark.filterwarnings("ignore:LightningCLI's args parameter"),
    pytest.mark.filterwarnings('ignore::DeprecationWarning'),
    pytest.mark.timeout(300),
]

#: The fields every header holds, in this order.
FIELDS = ('trains', 'time', 'memory', 'measured')


def header(path: Path) -> dict:
    r"""The ``# field: text`` lines of :obj:`path`'s opening comment (a
    field's text may go on over the next comment lines, indented)."""
    fields, last = {}, None
    for line in path.read_text().splitlines():
        if not line.startswith('#'):
            break
        match = re.match(r'# (\w+): (.*)', line)
        if match and match.group(1) in FIELDS:
            last = match.group(1)
            fields[last] = match.group(2)
        elif last and line.startswith('#   '):
            fields[last] += ' ' + line[1:].strip()
        else:
            last = None
    return fields


@pytest.mark.parametrize('config', CONFIGS, ids=lambda p: p.stem)
def test_every_config_says_what_it_trains_how_long_and_its_memory(config):
    fields = header(config)
    assert list(fields) == list(FIELDS), (
        f'{config.name}: its header needs the lines '
        f"{', '.join(f'# {f}:' for f in FIELDS)} (found {list(fields)})")
    assert all(text.strip() for text in fields.values()), fields
    measured = fields['measured']
    if measured.startswith('python scripts/config_cost.py'):  # the script,
        # on this very config
        assert measured.startswith('python scripts/config_cost.py '
                                   f'configs/{config.name}'), measured
        assert re.search(r'about [\d.]+ (s|min|h) on 2 CPU cores, estimated '
                         r'from \d+ steps', fields['time']), fields['time']
        assert re.search(r'[\d.]+ GiB peak resident', fields['memory'])
    else:  # not run by the script: the command of the run it came from,
        # or (not measured yet) the one that would measure it
        assert re.search(r'`(pyg-fastload|torchrun|python) [^`]+`', measured), \
            measured


def test_the_estimate_adds_up_the_steps_of_every_epoch():
    cost = config_cost.Cost(
        setup_s=10.0, first_step_s=3.0, step_s=1.0, val_start_s=2.0,
        val_batch_s=0.5, epochs=2, train_batches=5, val_batches=4,
        sanity_batches=2, steps=3, val_steps=1, peak_rss_bytes=2**30)
    # 10 + 2 x (3 + 4 x 1 + 2 + 4 x 0.5) + (2 + 2 x 0.5)
    assert cost.estimate_s == pytest.approx(35.0)
    text = config_cost.header(cost, 'python scripts/config_cost.py '
                                    'configs/x.yaml')
    assert text.splitlines()[0].startswith(
        '# time: about 35 s on 2 CPU cores, estimated from 3 steps')
    assert text.splitlines()[1].startswith('# memory: 1.0 GiB peak')
    assert config_cost.duration(150) == '2.5 min'
    assert config_cost.duration(2 * 3600) == '2.0 h'


#: The configs that run in one process on generated or fixture data, with
#: what makes them tiny (the dataset, and the relation of a link task).
RUNNABLE = {
    'quickstart': ['--data.dataset', 'tiny'],
    'link-arxiv-like': ['--data.dataset', 'tiny', '--data.batch_size', '128',
                        '--data.link.eval_edges', '64',
                        '--data.link.eval_negatives', '10'],
    'mag-like': ['--data.dataset', 'hetero-tiny', '--data.batch_size', '64'],
    'link-mag-like': ['--data.dataset', 'hetero-tiny',
                      '--data.batch_size', '64',
                      '--data.link.eval_edges', '64',
                      '--data.link.eval_negatives', '10'],
    'products-sage': ['--data.dataset', 'tiny'],
    'products-gcn': ['--data.dataset', 'tiny'],
    'disk-tier': ['--data.dataset', 'TINY_DIR'],
    'papers-like': ['--data.dataset', 'TINY_DIR'],
}
#: Seeds per batch on the tiny graphs (a few batches an epoch).
SMALL_BATCH = ['--data.batch_size', '256']


@pytest.mark.parametrize('name', sorted(RUNNABLE))
def test_a_config_runs_a_few_steps_through_the_script(name, tiny_dir,
                                                      tmp_path, monkeypatch,
                                                      capsys):
    dataset_dir, cache = tiny_dir
    monkeypatch.setenv('PYG_FASTLOAD_CACHE', str(cache))
    monkeypatch.setenv(config_cost.ROOT_ENV, str(tmp_path / 'run'))
    monkeypatch.chdir(tmp_path)
    extra = [str(dataset_dir) if word == 'TINY_DIR' else word
             for word in RUNNABLE[name]]
    cost = config_cost.measure(str(ROOT / 'configs' / f'{name}.yaml'),
                               steps=2, val_steps=1,
                               extra=[*SMALL_BATCH, *extra,
                                      '--data.progress', 'false',
                                      '--trainer.accelerator', 'cpu',
                                      '--trainer.enable_progress_bar',
                                      'false'])
    assert cost.steps == 2 and cost.val_steps == 1
    assert cost.train_batches >= 2 and cost.epochs >= 1
    assert cost.estimate_s > cost.setup_s > 0 and cost.peak_rss_bytes > 0
    lines = config_cost.header(cost, 'measured by').splitlines()
    assert [line.split(':')[0] for line in lines] == [
        '# time', '# memory', '# measured']
    assert not list(tmp_path.glob('logs'))  # nothing but the run's root


def test_every_config_that_needs_no_other_machine_runs_here():
    r"""A config is run above unless it needs several processes, a GPU,
    or is a prediction (``papers-like-predict``: its checkpoint comes from
    a 4-rank fit)."""
    import yaml
    for config in CONFIGS:
        trainer = yaml.safe_load(config.read_text())['trainer']
        several = trainer.get('devices', 1) != 1 or 'num_nodes' in trainer
        skipped = several or trainer.get('accelerator') == 'gpu' or \
            config.stem.endswith('-predict')
        assert (config.stem in RUNNABLE) != skipped, config.name
