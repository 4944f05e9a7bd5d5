r"""``scripts/batch_hashes.py`` (issue 42's proof that batches did not
change) does not rot: one small in-process combination hashes the same
twice, and ``--compare`` fails on a changed hash only."""
import copy
import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location(
    'batch_hashes', ROOT / 'scripts' / 'batch_hashes.py')
batch_hashes = importlib.util.module_from_spec(spec)
sys.modules['batch_hashes'] = batch_hashes  # its dataclass looks it up
spec.loader.exec_module(batch_hashes)

pytestmark = pytest.mark.timeout(120)

NAME = 'homo-node-replicated-mem-1rank-pipeline_off'


def test_every_dimension_is_enumerated_once():
    names = [c.name for c in batch_hashes.combinations()]
    assert len(names) == len(set(names))
    assert NAME in names
    for part in ('homo-', 'hetero-', '-node-', '-link-', '-replicated-',
                 '-pagraph-', '-dsp-', '-hopgnn-', 'pipeline_on',
                 'pipeline_off', '-2rank-'):
        assert any(part in n for n in names), part


def test_one_combination_hashes_the_same_twice(tmp_path, capsys):
    runs = []
    for i in range(2):
        out = tmp_path / f'run{i}.json'
        assert batch_hashes.main(['--only', NAME, '--workdir',
                                  str(tmp_path / 'work'),
                                  '--out', str(out)]) == 0
        runs.append(json.loads(out.read_text()))
    first, second = runs
    assert list(first) == [NAME]
    entry = first[NAME]
    assert len(entry['train']) == len(entry['val']) == 3
    assert len(set(entry['train'])) == 3  # batches differ from each other
    assert {'n_id', 'edge_index', 'x', 'y'} <= set(entry['fields']['train'][0])
    assert first == second
    a, b = tmp_path / 'run0.json', tmp_path / 'run1.json'
    capsys.readouterr()
    assert batch_hashes.main(['--compare', str(a), str(b)]) == 0
    assert 'identical' in capsys.readouterr().out

    changed = copy.deepcopy(first)
    changed[NAME]['val'][1] = '0' * 64
    changed['homo-node-new-mem-1rank-pipeline_on'] = entry  # supported later
    b.write_text(json.dumps(changed))
    assert batch_hashes.main(['--compare', str(a), str(b)]) == 1
    table = capsys.readouterr().out
    assert 'different' in table and 'val[1]' in table and 'new' in table

    refused = {NAME: 'refused: not yet'}  # refused before, hashed after
    a.write_text(json.dumps(refused))
    assert batch_hashes.main(['--compare', str(a), str(b)]) == 0
    assert 'newly supported' in capsys.readouterr().out
    assert batch_hashes.main(['--compare', str(b), str(a)]) == 1


@pytest.mark.reliability(
    fault='`scripts/batch_hashes.py --compare` given a missing, non-JSON or '
          'list file; `--only` matching no combination; `--out` into a '
          'missing directory',
    behaviour='exit status 2 and one line naming the argument and the file '
              'or pattern, before anything is hashed (was: tracebacks; '
              '`--only` exited 0 printing {}; `--out` crashed after hashing '
              'every combination)')
def test_bad_arguments_are_one_line_before_any_hashing(tmp_path, capsys,
                                                       monkeypatch):
    hashed = []
    monkeypatch.setattr(batch_hashes, 'run_all',
                        lambda *args: hashed.append(args) or {})
    good = tmp_path / 'good.json'
    good.write_text('{}')
    (tmp_path / 'list.json').write_text('[1, 2]')
    (tmp_path / 'text.json').write_text('not json')
    for argv, expected in (
            (['--compare', str(tmp_path / 'missing.json'), str(good)],
             "--compare: cannot read '.*missing.json': No such file"),
            (['--compare', str(good), str(tmp_path / 'text.json')],
             "--compare: '.*text.json' is not JSON"),
            (['--compare', str(tmp_path / 'list.json'), str(good)],
             "--compare: '.*list.json' holds a list, not the object of "
             "hashes"),
            (['--only', 'no-such-*'],
             '--only no-such-\\*: matches no combination'),
            (['--only', NAME, '--out', str(tmp_path / 'no' / 'out.json')],
             "--out '.*out.json': the directory '.*no' does not exist")):
        with pytest.raises(SystemExit) as info:
            batch_hashes.main(argv)
        assert info.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert re.search(expected, err[-1]), err
    assert hashed == []  # refused before any combination was hashed
