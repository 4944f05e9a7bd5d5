import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pyg_fastload.lightning.command import main

from ..distributed.ranks import Forked, run_command

pytestmark = [
    pytest.mark.filterwarnings("ignore:LightningCLI's args parameter"),
    pytest.mark.filterwarnings('ignore::DeprecationWarning'),
]

CONFIGS = Path(__file__).resolve().parents[2] / 'configs'
TINY = ['--data.dataset', 'tiny', '--data.num_neighbors', '[5, 5]',
        '--data.batch_size', '256', '--data.progress', 'false',
        '--model.hidden_channels', '16', '--model.num_layers', '2']


def test_fit_end_to_end_in_a_subprocess(cache_env):
    # ``python -m pyg_fastload.lightning fit`` in a process forked from the
    # warm server (a fresh interpreter's run of it: the SIGINT test)
    done = run_command(['fit', *TINY, '--trainer.max_epochs', '1',
                        '--trainer.accelerator', 'cpu',
                        '--trainer.default_root_dir', str(cache_env / 'runs')],
                       cache_env, module='pyg_fastload.lightning')
    assert done.returncode == 0, done.stderr[-3000:]
    assert 'validation accuracy:' in done.stdout
    assert 'seeds/s' in done.stdout  # the loader monitor's summary
    stats = list((cache_env / 'runs').rglob('fastload_stats.json'))
    assert stats and json.loads(stats[0].read_text())
    assert list((cache_env / 'runs').rglob('*.ckpt'))


def test_print_config_round_trips(cache_env, capsys):
    with pytest.raises(SystemExit) as info:
        main(['fit', '-c', str(CONFIGS / 'quickstart.yaml'),
              '--data.batch_size', '512', '--print_config'])
    assert info.value.code in (None, 0)
    first = capsys.readouterr().out
    config = yaml.safe_load(first)
    assert config['data']['batch_size'] == 512
    assert config['data']['feature_cache']['host_budget'] == '10%'
    saved = cache_env / 'printed.yaml'
    saved.write_text(first)
    with pytest.raises(SystemExit):
        main(['fit', '-c', str(saved), '--print_config'])
    assert capsys.readouterr().out == first


@pytest.mark.parametrize('config', sorted(p.name for p in
                                          CONFIGS.glob('*.yaml')))
def test_shipped_configs_parse(config, cache_env, capsys):
    with pytest.raises(SystemExit):
        main(['fit', '-c', str(CONFIGS / config), '--print_config'])
    assert 'model:' in capsys.readouterr().out


def test_a_shipped_config_is_found_by_its_name(cache_env, capsys):
    from pyg_fastload.lightning.cli import resolve_configs, shipped_configs
    assert 'quickstart' in shipped_configs()
    assert set(shipped_configs()) == {p.stem for p in CONFIGS.glob('*.yaml')}
    for words in (['fit', '-c', 'quickstart'], ['fit', '--config',
                                                'quickstart.yaml'],
                  ['fit', '--config=quickstart']):
        resolved = resolve_configs(words)
        assert Path(resolved[-1].rpartition('=')[2]).resolve() == \
            (CONFIGS / 'quickstart.yaml').resolve(), resolved
    with pytest.raises(SystemExit):  # the name as the command takes it
        main(['fit', '-c', 'quickstart', '--print_config'])
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed['data']['dataset'] == 'arxiv-like'
    # a file of that name in the working directory comes first
    (cache_env / 'quickstart').write_text('data:\n  batch_size: 7\n')
    assert resolve_configs(['fit', '-c', 'quickstart']) == \
        ['fit', '-c', 'quickstart']
    with pytest.raises(SystemExit) as info:
        main(['fit', '-c', 'quickstrat'])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert ("-c 'quickstrat': no such file, and no config of that name "
            "ships with pyg-fastload (one of: ") in err and 'quickstart' in err


@pytest.mark.reliability(
    fault="a config naming 'model: class_path: LinkPredictor' without "
          "dropout or node_embeddings",
    behaviour="the link predictor's own defaults (dropout 0, no embeddings); "
              "was: NodeClassifier's (0.5, an embedding per node: 73M "
              "parameters on mag-like) carried over by jsonargparse")
def test_a_named_model_gets_its_own_defaults(cache_env, capsys, tmp_path):
    from pyg_fastload.lightning.cli import named_model_class
    for config, dropout in (('link-arxiv-like.yaml', 0.5),  # its own
                            ('link-mag-like.yaml', 0.0)):  # the default
        with pytest.raises(SystemExit):
            main(['fit', '-c', str(CONFIGS / config), '--print_config'])
        model = yaml.safe_load(capsys.readouterr().out)['model']
        assert model['class_path'] == 'pyg_fastload.lightning.LinkPredictor'
        assert model['init_args']['dropout'] == dropout
        assert model['init_args']['node_embeddings'] is False
    node = CONFIGS / 'quickstart.yaml'
    link = str(CONFIGS / 'link-arxiv-like.yaml')
    assert named_model_class(['fit', '-c', str(node)]) == \
        'pyg_fastload.lightning.NodeClassifier'
    assert named_model_class(['fit', '--config', link]).endswith(
        'LinkPredictor')
    assert named_model_class(['fit', f'--config={link}', '--model',
                              'NodeClassifier']).endswith('NodeClassifier')
    assert named_model_class(['fit', '--model.class_path=my.Model']) == \
        'my.Model'
    assert named_model_class(['fit', '-c', str(tmp_path / 'missing')]) == \
        'pyg_fastload.lightning.NodeClassifier'


@pytest.mark.parametrize('args, key', [
    (['--model.model', 'transformer'], 'model.model'),
    (['--data.dataset', 'no/such/dir'], 'data.dataset'),
    (['--data.feature_cache.host_budget', '150%'],
     'data.feature_cache.host_budget'),
    (['--model.dropout', '1.5'], 'model.dropout'),
    (['--trainer.accelerator', 'cpu', '--data.feature_cache.storage', 'gds'],
     'data.feature_cache.storage'),
])
@pytest.mark.reliability(
    fault=('bad config values (unknown model, missing dataset, budget 150%, '
           'dropout 1.5, GPU-direct storage on a CPU run)'),
    behaviour='an error naming the config key, before anything trains')
def test_config_errors_name_the_key_before_training(args, key, cache_env,
                                                    capsys):
    with pytest.raises(SystemExit) as info:
        main(['fit', *TINY, '--trainer.max_epochs', '1', *args])
    assert info.value.code != 0
    err = capsys.readouterr().err
    assert key in err
    assert not (cache_env / 'lightning_logs').exists()  # nothing trained


@pytest.mark.parametrize('where', ['config', 'command line'])
@pytest.mark.parametrize('key, spec', [
    ('data.dataset', {'class_path': 'os.system',
                      'init_args': {'command': 'touch {marker}'}}),
    ('trainer.logger', {'class_path': 'os.system',
                        'init_args': {'command': 'touch {marker}'}}),
    ('trainer.callbacks', [{'class_path': 'subprocess.Popen',
                            'init_args': {'args': ['touch', '{marker}']}}]),
])
@pytest.mark.reliability(
    fault="a config or command-line value naming a class to run "
          "(`dataset: {class_path: os.system, init_args: {command: ...}}`, "
          "a logger or callback `subprocess.Popen`)",
    behaviour="refused naming the key and the import path before anything is "
              "imported; only this package's and Lightning's classes may be "
              "named (was: the command ran)")
def test_a_config_cannot_run_code(where, key, spec, cache_env, capsys):
    marker = cache_env / 'ran'
    value = json.loads(json.dumps(spec).replace('{marker}', str(marker)))
    section, name = key.split('.')
    if where == 'config':
        config = cache_env / 'hostile.yaml'
        config.write_text(yaml.safe_dump({section: {name: value}}))
        args = ['-c', str(config)]
    else:
        args = [f'--{key}', json.dumps(value)]
    with pytest.raises(SystemExit) as info:
        main(['fit', *TINY, '--trainer.max_epochs', '1', *args])
    assert info.value.code != 0
    assert not marker.exists()  # nothing ran
    err = capsys.readouterr().err
    assert key in err
    assert 'not allowed' in err or 'neither a synthetic preset' in err
    assert not (cache_env / 'lightning_logs').exists()


def test_lightning_classes_may_still_be_named(cache_env, capsys):
    early_stopping = json.dumps({'class_path': 'EarlyStopping',
                                 'init_args': {'monitor': 'val_acc'}})
    with pytest.raises(SystemExit) as info:
        main(['fit', *TINY, f'--trainer.callbacks+={early_stopping}',
              '--print_config'])
    assert info.value.code in (None, 0)
    config = yaml.safe_load(capsys.readouterr().out)
    assert config['trainer']['callbacks'][0]['class_path'] == (
        'pytorch_lightning.callbacks.EarlyStopping')


def test_help_lists_every_command(capsys):
    with pytest.raises(SystemExit):
        main(['--help'])
    out = capsys.readouterr().out
    for name in ('fit', 'validate', 'test', 'predict', 'prepare', 'bench',
                 'report'):
        assert name in out


@pytest.mark.reliability(
    fault="`PYG_FASTLOAD_ALLOW_IMPORTS` set to something not a package path "
          "(`os; rm -rf`)",
    behaviour="the command stops naming the variable and the value; a valid "
              "package there lets its classes be named, nothing else")
def test_the_operator_may_allow_more_packages(cache_env, capsys,
                                              monkeypatch):
    callback = json.dumps({'class_path': 'tests.distributed.faults.'
                                         'FailOnRank'})
    args = ['fit', *TINY, f'--trainer.callbacks+={callback}',
            '--print_config']
    with pytest.raises(SystemExit) as info:
        main(args)
    assert info.value.code != 0 and 'not allowed' in capsys.readouterr().err
    monkeypatch.setenv('PYG_FASTLOAD_ALLOW_IMPORTS', 'tests.distributed')
    with pytest.raises(SystemExit) as info:
        main(args)
    assert info.value.code in (None, 0)
    assert 'FailOnRank' in capsys.readouterr().out
    monkeypatch.setenv('PYG_FASTLOAD_ALLOW_IMPORTS', 'os; rm -rf')
    with pytest.raises(SystemExit, match='PYG_FASTLOAD_ALLOW_IMPORTS'):
        main(args)


def _signal_a_running_fit(cache_env, signum, fresh=False):
    r"""Starts a long pipelined fit on tiny (forked, or with :obj:`fresh`
    in an interpreter of its own, which ends as a user's does), sends
    :obj:`signum` once it trains; returns ``(status, stderr)``."""
    import time
    command = ['fit', *TINY,
               '--trainer.max_epochs', '1000', '--trainer.accelerator', 'cpu',
               '--trainer.enable_progress_bar', 'false',
               '--data.pipeline_settings.pipeline', 'true',
               '--trainer.log_every_n_steps', '1',
               '--trainer.logger', json.dumps({
                   'class_path': 'pytorch_lightning.loggers.CSVLogger',
                   'init_args': {'save_dir': str(cache_env / 'runs'),
                                 'flush_logs_every_n_steps': 1}}),
               '--trainer.default_root_dir', str(cache_env / 'runs')]
    proc = subprocess.Popen(
        [sys.executable, '-m', 'pyg_fastload.lightning', *command],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=os.environ.copy()) if fresh else Forked(command)
    try:
        deadline = time.monotonic() + 240
        # steps logged: training is under way (the signal handlers are set
        # before the first step, after the logger's files are made)
        while not any(len(path.read_text().splitlines()) > 1 for path in
                      (cache_env / 'runs').rglob('metrics.csv')):
            assert proc.poll() is None, proc.communicate()[1][-2000:]
            assert time.monotonic() < deadline, 'training never started'
            time.sleep(0.1)
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
    return proc.returncode, err


@pytest.mark.reliability(
    fault='SIGTERM to a running `pyg-fastload fit` (a scheduler stopping it)',
    behaviour='exit status 143 and a line saying so (was: 0, recorded as a '
              'success)')
def test_sigterm_ends_a_fit_with_status_143(cache_env):
    import signal
    status, err = _signal_a_running_fit(cache_env, signal.SIGTERM)
    assert status == 143, err[-2000:]
    assert 'stopped by SIGTERM' in err


@pytest.mark.reliability(
    fault='Ctrl-C in a pipelined fit: exit 1 reported as a failure, or a '
          'C++ abort ("terminate called without an active exception")',
    behaviour='exit status 130 and the line "pyg-fastload: interrupted"; '
              'no abort, no traceback')
def test_ctrl_c_ends_a_fit_with_status_130(cache_env):
    import signal
    # an interpreter's exit, where an abort would show
    status, err = _signal_a_running_fit(cache_env, signal.SIGINT, fresh=True)
    assert status == 130, err[-2000:]
    assert 'pyg-fastload: interrupted' in err
    assert 'terminate called' not in err and 'Traceback' not in err, err


@pytest.mark.parametrize('args, expected', [
    (['--data.feature_cache', '{"polcy": "out_degree"}'],
     "config key 'data.feature_cache.polcy' is unknown; did you mean "
     "'data.feature_cache.policy'?"),
    (['--data.datset', 'tiny'],
     "config key 'data.datset' is unknown; did you mean 'data.dataset'?"),
    (['--model.hiden_channels', '8'],
     "config key 'model.hiden_channels' is unknown; did you mean "
     "'model.hidden_channels'?"),
    (['--model.model', 'transformer'],
     "config key 'model.model': Expected a typing.Literal['sage', 'gcn', "
     "'gat', 'mlp']. Got value: transformer"),
    (['--data.link', '{"eval_edges": -3}', '--data.task', 'link'],
     "config key 'data.link.eval_edges': -3 must be an int >= 0"),
    (['--data.queue_capacity', '4'],
     "config key 'data.queue_capacity' was renamed "
     "'data.pipeline_settings.queue_capacity': write 'pipeline_settings: "
     "{queue_capacity: ...}' under 'data:' (on the command line "
     "--data.pipeline_settings.queue_capacity)"),
    (['--data.pipeline_settings', '{"run_ahead": 0}'],
     "config key 'data.pipeline_settings.run_ahead': must be 'adaptive', "
     "'trainer_first' or an int >= 1 (batches in flight), got 0"),
    (['--data.eval_batch_size', '64'],
     "config key 'data.eval_batch_size' was renamed "
     "'data.evaluation.batch_size': write 'evaluation: {batch_size: ...}' "
     "under 'data:' (on the command line --data.evaluation.batch_size)"),
    (['--data.eval', 'layerwise'],
     "config key 'data.eval' was renamed 'data.evaluation.method': write "
     "'evaluation: {method: ...}' under 'data:' (on the command line "
     "--data.evaluation.method)"),
    (['--data.inference.chunk_size', '8'],
     "config key 'data.inference.chunk_size' was renamed "
     "'data.evaluation.inference.chunk_size': write 'evaluation: "
     "{inference: {chunk_size: ...}}' under 'data:' (on the command line "
     "--data.evaluation.inference.chunk_size)"),
    (['--data.evaluation', '{"method": "every"}'],
     "config key 'data.evaluation.method': 'every' is not one of "
     "'sampled', 'layerwise'"),
    (['--data.launch_order', 'coordinator'],
     "config key 'data.launch_order' was renamed "
     "'data.mode_options.launch_order': write 'mode_options: "
     "{launch_order: ...}' under 'data:' (on the command line "
     "--data.mode_options.launch_order)"),
    (['--data.evaluation', '{"batch_size": 0}'],
     "config key 'data.evaluation.batch_size': 0 must be a positive int"),
])
@pytest.mark.reliability(
    fault='a typo or a bad value in a nested config key (80 lines of usage '
          'text, then "Does not validate against any of the Union '
          'subtypes ... Expected a NoneType")',
    behaviour='one line naming the full key and what is wrong, the closest '
              'valid key for an unknown one; no usage text')
def test_config_errors_are_one_line_with_a_suggestion(args, expected,
                                                     cache_env, capsys):
    with pytest.raises(SystemExit):
        main(['fit', *TINY, '--trainer.max_epochs', '1', *args])
    err = capsys.readouterr().err
    assert f'error: {expected}\n' in err
    assert 'usage:' not in err and len(err.splitlines()) <= 3, err


def test_a_config_file_with_a_renamed_key_names_the_new_one(cache_env,
                                                           capsys):
    old = cache_env / 'old.yaml'
    old.write_text('data:\n  dataset: tiny\n  sampling_device: cpu\n')
    with pytest.raises(SystemExit):
        main(['fit', '-c', str(old), '--print_config'])
    err = capsys.readouterr().err
    assert ("error: config key 'data.sampling_device' was renamed "
            "'data.pipeline_settings.sampling_device'") in err, err
    new = cache_env / 'new.yaml'
    new.write_text('data:\n  dataset: tiny\n  pipeline_settings:\n'
                   '    sampling_device: cpu\n    pipeline: false\n')
    with pytest.raises(SystemExit):
        main(['fit', '-c', str(new), '--print_config'])
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed['data']['pipeline_settings'] == {
        'pipeline': False, 'queue_capacity': 2, 'run_ahead': 'adaptive',
        'sampling_workers': 1, 'sampling_device': 'cpu'}


def test_a_config_file_with_old_evaluation_keys_names_the_new_ones(
        cache_env, capsys):
    old = cache_env / 'old.yaml'
    for line, key, new_key in (
            ('eval_num_neighbors: [3]', 'eval_num_neighbors',
             'evaluation.num_neighbors'),
            ('eval: layerwise', 'eval', 'evaluation.method'),
            ('inference: {stream: true}', 'inference.stream',
             'evaluation.inference.stream')):
        old.write_text(f'data:\n  dataset: tiny\n  {line}\n')
        with pytest.raises(SystemExit):
            main(['fit', '-c', str(old), '--print_config'])
        err = capsys.readouterr().err
        assert (f"error: config key 'data.{key}' was renamed "
                f"'data.{new_key}'") in err, err
    new = cache_env / 'new.yaml'
    new.write_text('data:\n  dataset: tiny\n  evaluation:\n'
                   '    num_neighbors: [3]\n    method: layerwise\n'
                   '    inference: {stream: true}\n  mode_options:\n'
                   '    launch_order: coordinator\n')
    with pytest.raises(SystemExit):
        main(['fit', '-c', str(new), '--print_config'])
    printed = yaml.safe_load(capsys.readouterr().out)['data']
    assert printed['evaluation'] == {
        'num_neighbors': [3], 'batch_size': None, 'method': 'layerwise',
        'inference': {'chunk_size': 4096, 'memory_budget': 'auto',
                      'work_dir': None, 'stream': True}}
    assert printed['mode_options']['launch_order'] == 'coordinator'


@pytest.mark.reliability(
    fault='a bad dataset file (a truncated feature file): a long '
          'traceback with the message buried in it',
    behaviour="one line naming the config key ('data.dataset') and the "
              "file, exit status 2, no traceback")
def test_a_broken_dataset_file_is_one_line(tiny_dir, tmp_path):
    import shutil
    source, _ = tiny_dir
    broken = tmp_path / 'broken'
    shutil.copytree(source, broken)
    features = broken / 'x.bin'
    features.write_bytes(features.read_bytes()[:1000])  # truncated
    done = run_command(
        ['fit', '--data.dataset', str(broken), '--data.num_neighbors', '[3]',
         '--trainer.max_epochs', '1', '--trainer.logger', 'false',
         '--trainer.accelerator', 'cpu'], tmp_path)
    assert done.returncode == 2, done.stderr[-2000:]
    assert 'Traceback' not in done.stderr, done.stderr[-2000:]
    [line] = [s for s in done.stderr.splitlines() if 'config key' in s]
    assert "error: config key 'data.dataset'" in line and 'x.bin' in line
