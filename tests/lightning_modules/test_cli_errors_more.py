import pickle
import re

import pytest
import torch
import yaml

from pyg_fastload.lightning import ConfigError, NodeClassifier
from pyg_fastload.lightning.command import main

pytestmark = [
    pytest.mark.filterwarnings("ignore:LightningCLI's args parameter"),
    pytest.mark.filterwarnings('ignore::DeprecationWarning'),
]

#: The start of an error naming a layer-wise inference option.
INFERENCE = "config key 'data.evaluation.inference."
TINY = ['--data.dataset', 'tiny', '--data.num_neighbors', '[3]',
        '--data.progress', 'false', '--model.hidden_channels', '8',
        '--model.num_layers', '1', '--trainer.max_epochs', '1',
        '--trainer.accelerator', 'cpu', '--trainer.logger', 'false']


def _one_line_error(args, capsys):
    r"""The status and the error lines of ``pyg-fastload fit`` with
    :obj:`args`."""
    with pytest.raises(SystemExit) as info:
        main(['fit', *TINY, *args])
    err = capsys.readouterr().err
    return info.value.code, [line for line in err.splitlines()
                             if 'error:' in line], err


@pytest.mark.parametrize('where', ['config', 'command line'])
@pytest.mark.reliability(
    fault='`model: class_path: os.system` (a dotted path into `os`) in a '
          'config or as the model class path on the command line',
    behaviour="refused before anything is imported, as one line naming "
              "'model' and the import path, exit status 2 (was: a "
              "traceback ending in ImportDenied, exit 1)")
def test_a_model_class_outside_the_allowlist_is_one_line(where, cache_env,
                                                         capsys):
    marker = cache_env / 'ran'
    spec = {'class_path': 'os.system',
            'init_args': {'command': f'touch {marker}'}}
    if where == 'config':
        config = cache_env / 'hostile.yaml'
        config.write_text(yaml.safe_dump({'model': spec}))
        args = ['-c', str(config)]
    else:
        args = ['--model.class_path', 'os.system']
    code, lines, err = _one_line_error(args, capsys)
    assert code == 2, err
    assert not marker.exists()
    assert len(lines) == 1, err
    assert "config key 'model" in lines[0] and 'os.system' in lines[0]
    assert 'not allowed' in lines[0] and 'Traceback' not in err


@pytest.mark.parametrize('content', [pickle.dumps({'a': 1}),
                                     b'\x00 not a checkpoint' * 8],
                         ids=['pickle', 'bytes'])
@pytest.mark.reliability(
    fault='`--ckpt_path` of a file that is not a Lightning checkpoint (a '
          'plain pickle, arbitrary bytes)',
    behaviour="one line naming `--ckpt_path` and the file, and what to give "
              "instead, exit status 2 (was: a raw UnpicklingError "
              "traceback advising weights_only=False)")
def test_a_ckpt_path_that_is_not_a_checkpoint_is_named(content, cache_env,
                                                       capsys):
    bad = cache_env / 'model.pkl'
    bad.write_bytes(content)
    code, lines, err = _one_line_error(['--ckpt_path', str(bad)], capsys)
    assert code == 2, err
    assert len(lines) == 1, err
    assert '--ckpt_path' in lines[0] and str(bad) in lines[0]
    assert 'not a Lightning checkpoint' in lines[0] and '.ckpt' in lines[0]
    assert 'weights_only' not in err and 'Traceback' not in err


@pytest.mark.parametrize('hyper_parameters', [[8, 1], 'hidden_channels=8'],
                         ids=['list', 'str'])
@pytest.mark.reliability(
    fault="a checkpoint whose `hyper_parameters` is a list (or a string), "
          "not a mapping",
    behaviour="one line naming `--ckpt_path`, the file and "
              "`hyper_parameters`, exit status 2 (was: TypeError: pop "
              "expected at most 1 argument)")
def test_a_checkpoint_with_list_hyper_parameters_is_named(
        hyper_parameters, cache_env, capsys):
    ckpt = cache_env / 'edited.ckpt'
    torch.save({'epoch': 0, 'global_step': 1,
                'pytorch-lightning_version': '2.6.0', 'state_dict': {},
                'hyper_parameters': hyper_parameters}, ckpt)
    code, lines, err = _one_line_error(['--ckpt_path', str(ckpt)], capsys)
    assert code == 2, err
    assert len(lines) == 1, err
    assert '--ckpt_path' in lines[0] and str(ckpt) in lines[0]
    assert "'hyper_parameters'" in lines[0] and 'Traceback' not in err


@pytest.mark.reliability(
    fault='`hidden_channels=10**11` with a small `in_channels`',
    behaviour='ConfigError naming `model.hidden_channels`, the side of the '
              'too-large input layer that is at fault (was: named '
              '`model.in_channels`)')
def test_a_huge_hidden_width_is_named_not_the_input_width():
    with pytest.raises(ConfigError, match=r'100,000,000,000 needs a 4 x '
                       r'100,000,000,000 layer') as info:
        NodeClassifier(hidden_channels=10**11, num_layers=1, in_channels=4,
                       num_classes=3)
    assert info.value.config_key == 'model.hidden_channels'
    with pytest.raises(ConfigError) as info:  # the input is at fault
        NodeClassifier(hidden_channels=4, num_layers=1, in_channels=10**11,
                       num_classes=3)
    assert info.value.config_key == 'model.in_channels'


@pytest.mark.reliability(
    fault='`pyg-fastload predict` (or fit) with the '
          'data.evaluation.inference options `chunk_size` 0 or -1, '
          '`memory_budget` lots, -1GiB (with `=` or without) or 0 without a '
          '`work_dir`, `chunk_size: 0` in a config, a `work_dir` that is a '
          'file or lies under one; a `--ckpt_path` naming no file; '
          '`--data.num_neighbors 10,5`',
    behaviour="exit status 2 and one line naming the key (`data.evaluation."
              "inference.<key>`, `--ckpt_path`, ...) and what to give, before "
              "anything is set up (was: a ~60-line traceback with the "
              "message buried in it; memory_budget 0 refused only "
              "mid-prediction; a raw FileExistsError or FileNotFoundError; "
              "`Expected a <class 'list'>` without the `[10, 5]` to write)")
@pytest.mark.parametrize('args, expected', [
    (['--data.evaluation.inference.chunk_size', '0'],
     INFERENCE + "chunk_size': 0 must be a positive int"),
    (['--data.evaluation.inference.chunk_size', '-1'],
     INFERENCE + "chunk_size': -1 must be a positive int"),
    (['--data.evaluation.inference.memory_budget', 'lots'],
     INFERENCE + "memory_budget': .*'lots'.* is not a size"),
    (['--data.evaluation.inference.memory_budget=-1GiB'],
     INFERENCE + "memory_budget': .*'-1gib'.* is not a size"),
    (['--data.evaluation.inference.memory_budget', '-1GiB'],
     "expected a value \\(one that starts with '-' is written after '='"),
    (['-c', 'CONFIG'],
     INFERENCE + "chunk_size': 0 must be a positive int"),
    (['--data.evaluation.inference.work_dir', 'FILE'],
     INFERENCE + "work_dir': '.*afile' is a file, not a "
     "directory"),
    (['--data.evaluation.inference.work_dir', 'FILE/layers'],
     INFERENCE + "work_dir': '.*afile/layers' lies under "
     "'.*afile', a file, not a directory"),
    (['--data.evaluation.inference.memory_budget', '0'],
     INFERENCE + "memory_budget': 0 holds no layer in "
     "memory, and no work_dir is given"),
    (['--ckpt_path', 'missing.ckpt'],
     "--ckpt_path 'missing.ckpt' names no file; give a .ckpt file"),
    (['--data.num_neighbors', '10,5'],
     "config key 'data.num_neighbors': .*; write a list: '\\[10, 5\\]'"),
], ids=['chunk_size-0', 'chunk_size--1', 'budget-lots', 'budget-=-1GiB',
        'budget--1GiB', 'chunk_size-in-config', 'work_dir-file',
        'work_dir-under-file', 'budget-0', 'ckpt_path-missing',
        'num_neighbors-10,5'])
def test_predict_errors_are_one_line_naming_the_key(args, expected,
                                                    cache_env, capsys):
    (cache_env / 'afile').write_text('not a directory')
    config = cache_env / 'layerwise.yaml'
    config.write_text('data:\n  evaluation:\n    method: layerwise\n'
                      '    inference:\n      chunk_size: 0\n')
    args = [str(config) if a == 'CONFIG' else
            a.replace('FILE', str(cache_env / 'afile')) for a in args]
    with pytest.raises(SystemExit) as info:
        main(['predict', *TINY[:-2], '--data.evaluation.method', 'layerwise',
              *args])
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if 'error:' in line]
    assert info.value.code == 2, err
    assert len(lines) == 1 and 'Traceback' not in err, err
    assert re.search(expected, lines[0]), lines[0]
