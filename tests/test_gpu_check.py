r"""The GPU kit (``scripts/gpu_check.sh``, docs/guide/gpu.md) in its dry run on
the CPU, so it does not rot between the days a GPU is lent: the install path,
the selection of the CUDA tests, the benchmarks' plumbing, the JSON, and no
process left behind.

The whole dry run's steps are forked from the suite's warm server (torch,
PyG and Lightning imported once, not once per step: seven fresh
interpreters took most of its 45 s); the entry script, its driver and its
steps as fresh interpreters are run by the tests that stop a check and
refuse an out dir."""
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from .distributed.ranks import Forked, run_code

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location(
    'gpu_check', ROOT / 'scripts' / 'gpu_check.py')
gpu_check = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gpu_check)

pytestmark = pytest.mark.timeout(300)


def fake_wheel(folder: Path, tag: str = 'py3-none-any') -> Path:
    r"""A minimal wheel of a one-module package, tagged :obj:`tag`."""
    folder.mkdir(exist_ok=True)
    path = folder / f'gpu_check_probe-1.0-{tag}.whl'
    info = 'gpu_check_probe-1.0.dist-info'
    with zipfile.ZipFile(path, 'w') as wheel:
        wheel.writestr('gpu_check_probe.py', 'VALUE = 1\n')
        wheel.writestr(f'{info}/METADATA', 'Metadata-Version: 2.1\n'
                       'Name: gpu_check_probe\nVersion: 1.0\n')
        wheel.writestr(f'{info}/WHEEL', 'Wheel-Version: 1.0\nGenerator: '
                       f'test\nRoot-Is-Purelib: true\nTag: {tag}\n')
        wheel.writestr(f'{info}/RECORD', '')
    return path


def test_install_commands_keep_torch_and_fit_the_lent_python(tmp_path):
    wheels = [tmp_path / 'a.whl', tmp_path / 'b.whl']
    real = gpu_check.install_commands('py', wheels, False, tmp_path / 't')
    assert list(real) == ['install-wheels', 'install-project']
    for command in real.values():  # nothing resolved, nothing fetched
        assert command[:3] == ['py', '-m', 'pip'] and \
            {'--no-deps', '--no-index'} <= set(command)
        assert '--dry-run' not in command
    assert real['install-wheels'][-2:] == [str(w) for w in wheels]
    assert real['install-project'][-2:] == ['-e', str(ROOT)]
    dry = gpu_check.install_commands('py', [], True, tmp_path / 't')
    assert list(dry) == ['install-project']  # no wheels, no wheel step
    assert '--dry-run' in dry['install-project']
    dry = gpu_check.install_commands('py', wheels, True, tmp_path / 't')
    fit = dry['install-wheels']
    assert fit[fit.index('--python-version') + 1] == '3.12'
    assert '--platform=manylinux2014_x86_64' in fit and '--dry-run' in fit


# Judged for the lent machines' CPython 3.12 on manylinux x86-64, whatever
# runs the test.
@pytest.mark.parametrize('tag, fits', [
    ('py3-none-any', True), ('cp312-cp312-manylinux2014_x86_64', True),
    ('cp311-cp311-manylinux2014_x86_64', False),
    ('cp312-cp312-win_amd64', False)])
def test_the_dry_install_refuses_a_wheel_the_lent_python_cannot_take(
        tmp_path, tag, fits):
    wheel = fake_wheel(tmp_path / 'wheels', tag)
    command = gpu_check.install_commands(sys.executable, [wheel], True,
                                         tmp_path / 't')['install-wheels']
    done = subprocess.run(command, capture_output=True, text=True,
                          timeout=120,
                          env={**os.environ, 'PIP_CONFIG_FILE': os.devnull})
    assert (done.returncode == 0) == fits, done.stdout + done.stderr
    assert not (tmp_path / 't').exists()  # nothing installed


def test_a_step_past_its_time_is_killed_with_its_children(tmp_path,
                                                          monkeypatch):
    check = gpu_check.Check(gpu_check.parse_args([str(tmp_path / 'out')]))
    monkeypatch.setitem(gpu_check.TIMEOUTS, 'gds', 1)
    grandchild = tmp_path / 'grandchild.pid'
    # a child that starts a grandchild, both outliving the test's timeout
    # (waiting for either would hang it)
    outcome = check.run('gds', ['bash', '-c', f'sleep 600 & echo $! > '
                                f'{grandchild}; sleep 600'])
    assert outcome == 'timeout'
    assert gpu_check.leftovers(check.groups) == []
    stat = Path(f'/proc/{grandchild.read_text().strip()}/stat')
    if stat.exists():  # killed, maybe not yet reaped
        assert stat.read_text().rsplit(')', 1)[1].split()[0] == 'Z'
    check.close('failed')
    summary = json.loads((tmp_path / 'out' / 'summary.json').read_text())
    assert summary['steps']['gds']['status'] == 'ran'
    assert summary['steps']['gds']['outcome'] == 'timeout'
    assert summary['leftover_processes'] == []


def test_the_required_steps_fit_the_budget_and_the_optional_run_last():
    required = gpu_check.REQUIRED_TIMEOUTS
    assert sum(required.values()) <= gpu_check.BUDGET_S - gpu_check.RESERVE_S
    assert set(required).isdisjoint(gpu_check.OPTIONAL_TIMEOUTS)
    assert list(gpu_check.TIMEOUTS)[len(required):] == [
        'build-pyg-backend', 'pyg-baseline']
    assert gpu_check.TEST_TIMEOUT_S < required['tests']


@pytest.mark.reliability(
    fault="the GPU kit runs out of its budget before a required step "
          "(`train`, `gds`)",
    behaviour="that step's status says `skipped: out of time`, the "
              "summary names it in `not_ok` and its status is `failed` "
              "(was: `ok`); an optional step skipped so leaves it `ok`")
@pytest.mark.parametrize('late, passes', [('train', False), ('gds', False),
                                          ('pyg-baseline', True)])
def test_only_a_check_whose_required_steps_all_ran_is_ok(tmp_path, late,
                                                         passes):
    check = gpu_check.Check(gpu_check.parse_args([str(tmp_path / 'out')]))
    check.summary.update(mode='gpu',
                         install={'commands': {'install-project': []}})
    for name in check.required() + ['pyg-baseline']:
        if name == late:
            check.deadline = time.monotonic()  # the budget is spent
        assert check.run(name, ['true']) == ('skipped' if name == late
                                             else 'ok')
        check.deadline = time.monotonic() + 60
    steps = check.summary['steps']
    assert steps[late] == {'status': 'skipped: out of time'}
    assert steps['seps']['status'] == 'ran' and \
        steps['seps']['outcome'] == 'ok'
    assert check.passed() == passes
    assert check.summary['not_ok'] == ({} if passes else
                                       {late: 'skipped: out of time'})
    del steps['imports']  # never reached
    assert not check.passed() and check.summary['not_ok']['imports'] == \
        'not reached'
    check.close('failed')


class ForkedStep(Forked):
    r"""A step of the kit (``python scripts/gpu_check_steps.py VERB ...``)
    forked from the warm server, in a session of its own as the kit starts
    it; its output goes to :obj:`sink` (the kit's log) when it ends."""
    def __init__(self, argv, sink, **kwargs):
        super().__init__(argv[2:], script=argv[1], **kwargs)
        self.sink = sink

    def wait(self, timeout=None):
        code = super().wait(timeout)
        sink, self.sink = self.sink, None
        if sink is not None:
            out, err = self.communicate()
            sink.write(out + err)
        return code


def forked_steps(argv, *, stdout, cwd, env, **kwargs):
    r"""``subprocess.Popen`` as the kit calls it, with its steps forked
    (pip, which imports no torch, runs as it is)."""
    if argv[:2] == [sys.executable, str(gpu_check.STEPS)]:
        return ForkedStep(argv, stdout, cwd=cwd, env=env)
    return subprocess.Popen(argv, stdout=stdout, cwd=cwd, env=env, **kwargs)


def test_the_dry_run_reports_every_step_and_figure(tmp_path, monkeypatch):
    out = tmp_path / 'out'
    wheel = fake_wheel(tmp_path / 'wheels')
    monkeypatch.setattr(gpu_check, 'subprocess', SimpleNamespace(
        Popen=forked_steps, TimeoutExpired=subprocess.TimeoutExpired,
        DEVNULL=subprocess.DEVNULL, STDOUT=subprocess.STDOUT))
    monkeypatch.delenv('GPU_CHECK_GROUPS', raising=False)
    # the warm server's imports are done before any step's time runs
    assert run_code('pass').returncode == 0
    handler = signal.getsignal(signal.SIGTERM)  # the driver sets its own
    try:
        code = gpu_check.main([
            str(out), '--dry-run', '--wheels', str(wheel.parent), '--tests',
            'tests/storage/test_gpu_direct.py',
            'tests/loader/test_pipeline.py'])
    finally:
        signal.signal(signal.SIGTERM, handler)
    summary = json.loads((out / 'summary.json').read_text())
    assert code == 0, summary['steps']
    assert summary['mode'] == 'dry-run' and summary['status'] == 'ok'
    assert summary['not_ok'] == {}
    assert summary['environment']['torch'] == torch.__version__
    steps = {name: step.get('outcome', step['status'])
             for name, step in summary['steps'].items()}
    baseline = 'ok' if importlib.util.find_spec('torch_sparse') else \
        'skipped: torch_sparse does not import (build-pyg-backend: skipped)'
    assert steps == {
        'environment': 'ok', 'install-wheels': 'ok', 'install-project': 'ok',
        'imports': 'ok', 'select-tests': 'ok', 'tests': 'ok', 'seps': 'ok',
        'train': 'ok', 'gds': 'skipped: dry run',
        'build-pyg-backend': 'skipped: dry run: built on the lent machine '
                             'only', 'pyg-baseline': baseline}
    assert all(step['status'] == 'ran' for step in summary['steps'].values()
               if 'outcome' in step)
    log = (out / 'log.txt').read_text()  # the optional steps come last
    assert log.index('gds: skipped') < log.index('build-pyg-backend: ') < \
        log.index('pyg-baseline: ')
    install = summary['install']
    assert install['wheels'] == [wheel.name] and install['torch_untouched']
    assert all('--dry-run' in c for c in install['commands'].values())
    imports = summary['imports']
    assert imports['pyg_fastload_path'] == str(ROOT / 'pyg_fastload')
    assert not imports['jsonargparse'].startswith('missing')
    # the tests that skip without CUDA, each run and reported: skipped here
    results = summary['tests']['results']
    gds = ('tests/storage/test_gpu_direct.py::'
           'test_gds_reads_land_in_gpu_memory_through_the_tiers')
    cuda = 'tests/loader/test_pipeline.py::test_cuda_device_gets_identical_' \
           'batches[True]'
    assert {gds, cuda} <= set(results) and summary['tests']['not_run'] == []
    assert summary['tests']['selected'] == len(results)
    assert not any('without_cuda' in test for test in results)
    assert all(r['outcome'] == 'skipped' and 'CUDA' in r['message']
               for r in results.values())
    assert (out / 'junit.xml').exists()
    assert 'tests skip without CUDA' in log  # the steps' output is logged
    benches = summary['benchmarks']
    seps = benches['seps']
    assert seps['cpu_sampled_edges_per_s'] > 0
    assert seps['command'].startswith('pyg-fastload bench loader --preset '
                                      'tiny')
    assert 'device_sampled_edges_per_s' not in seps  # no GPU here
    train = benches['train']
    disk = 'FastNeighborLoader, features on disk'
    assert 0 <= train['FastNeighborLoader waiting_share'] <= 1
    assert 0 <= train[f'{disk} device_hit_ratio'] <= 1
    assert benches['gds'] == {'skipped': 'needs CUDA and kvikio'}
    assert not any(key.startswith('PyG') for key in train)  # left for last
    if baseline == 'ok':
        assert any(key.startswith('PyG NeighborLoader') for key in
                   benches['pyg-baseline'])
    assert summary['leftover_processes'] == []


def test_a_stopped_check_writes_its_summary_and_leaves_nothing(tmp_path):
    out = tmp_path / 'out'
    check = subprocess.Popen(
        ['bash', 'scripts/gpu_check.sh', str(out), '--dry-run', '--wheels',
         str(tmp_path / 'none'), '--tests', 'tests/storage/test_gpu_direct.py'],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True, env={**os.environ, 'PYTHON': sys.executable,
                                     'GPU_CHECK_TEST_MARK': str(tmp_path)})
    log = out / 'log.txt'
    deadline = time.monotonic() + 120
    while 'imports: ' not in (log.read_text() if log.exists() else ''):
        assert time.monotonic() < deadline and check.poll() is None
        time.sleep(0.2)
    check.terminate()  # as the device tool's limit or a Ctrl-C would
    assert check.wait(timeout=60) == 143
    summary = json.loads((out / 'summary.json').read_text())
    assert summary['status'] == 'interrupted'
    assert summary['steps']['imports']['outcome'] == 'interrupted'
    assert summary['leftover_processes'] == []
    assert marked_processes(str(tmp_path)) == []


def marked_processes(mark: str) -> list:
    r"""Live processes whose environment holds :obj:`mark` (every process
    the check started inherits it)."""
    found = []
    for environ in Path('/proc').glob('[0-9]*/environ'):
        try:
            if f'GPU_CHECK_TEST_MARK={mark}'.encode() in environ.read_bytes():
                found.append(environ.parent.name)
        except OSError:  # ended meanwhile, or not ours
            pass
    return found


@pytest.mark.reliability(
    fault="`bash scripts/gpu_check.sh OUT` where OUT holds a user's "
          "`log.txt` and `summary.json` (or any file the kit did not write)",
    behaviour='refused before any step, exit status 2, naming the files; '
              'nothing in OUT changed (was: both overwritten). A directory '
              "holding only an earlier check's files is reused")
def test_an_out_dir_of_other_files_is_refused(tmp_path):
    out = tmp_path / 'out'
    out.mkdir()
    (out / 'log.txt').write_text('my notes')
    (out / 'summary.json').write_text('{"mine": true}')
    done = subprocess.run(
        ['bash', 'scripts/gpu_check.sh', str(out), '--dry-run'], cwd=ROOT,
        capture_output=True, text=True, timeout=60,
        env={**os.environ, 'PYTHON': sys.executable})
    assert done.returncode == 2, done.stderr
    assert 'holds files the GPU check did not write (log.txt, ' \
        'summary.json)' in done.stderr
    assert (out / 'log.txt').read_text() == 'my notes'
    assert (out / 'summary.json').read_text() == '{"mine": true}'
    assert sorted(p.name for p in out.iterdir()) == ['log.txt',
                                                     'summary.json']
    # an earlier check's files (its summary marked) are replaced
    check = gpu_check.Check(gpu_check.parse_args([str(tmp_path / 'kit')]))
    check.close('failed')
    assert gpu_check.check_out_dir(tmp_path / 'kit') is None
    (tmp_path / 'kit' / 'notes.md').write_text('mine')
    assert 'notes.md' in gpu_check.check_out_dir(tmp_path / 'kit')
    assert gpu_check.check_out_dir(tmp_path / 'new') is None
