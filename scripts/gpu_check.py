#!/usr/bin/env python3
r"""The whole GPU check in one command (``bash scripts/gpu_check.sh OUT_DIR``,
docs/guide/gpu.md): the machine's GPU, torch and CUDA; the project installed
into the machine's Python without touching its torch; every test that skips
without CUDA, run and reported test by test; the GPU benchmarks. It writes
``OUT_DIR/summary.json`` (every figure), ``OUT_DIR/log.txt``,
``OUT_DIR/junit.xml`` and ``OUT_DIR/build.log``.

Without CUDA, or with ``--dry-run``, the same steps run on the CPU: the
install is pip's ``--dry-run`` of the same wheels for the lent machines'
Python 3.12, the CUDA tests are selected and run (they skip) and the
benchmarks run on the CPU, so CI keeps the plumbing and the JSON working.

Standard library only (it runs before the install). Each step is a
subprocess in a process group of its own, bounded by its timeout and by the
whole check's budget, and killed with its children; none outlives the check.
Every step's status says whether it ran (then its outcome) or why it was
skipped; the check's status is ``ok`` only when every required step ran and
passed. The required steps' timeouts add up to the budget; the optional
ones (torch_sparse's CPU build for PyG's baseline, then that baseline) run
last, in whatever time is left.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

ROOT = Path(__file__).resolve().parent.parent
STEPS = ROOT / 'scripts' / 'gpu_check_steps.py'
#: The lent machines' Python, which the carried wheels must fit.
TARGET_PYTHON = '3.12'
TARGET_PLATFORMS = ('manylinux_2_28_x86_64', 'manylinux_2_27_x86_64',
                    'manylinux_2_24_x86_64', 'manylinux_2_17_x86_64',
                    'manylinux2014_x86_64')
#: Seconds the whole check may take, and those kept to write the summary.
BUDGET_S = 480
RESERVE_S = 10
#: Each required step's bound in seconds, in the order they run; together
#: within the budget less the reserve (tests/test_gpu_check.py checks it),
#: so none is skipped for want of time.
REQUIRED_TIMEOUTS = {'environment': 20, 'install-wheels': 30,
                     'install-project': 30, 'imports': 30,
                     'select-tests': 45, 'tests': 120, 'seps': 55,
                     'train': 100, 'gds': 40}
#: The optional steps' bounds, run after the required ones in the time
#: left: torch_sparse built for the CPU, then PyG's NeighborLoader trained
#: beside ours (the baseline). Their outcome leaves the status as it is.
OPTIONAL_TIMEOUTS = {'build-pyg-backend': 240, 'pyg-baseline': 90}
TIMEOUTS = {**REQUIRED_TIMEOUTS, **OPTIONAL_TIMEOUTS}
#: Seconds one CUDA test may take (pytest-timeout, where installed).
TEST_TIMEOUT_S = 60
#: What the benchmarks run on: the graph, batches and batch size per mode.
GRAPHS = {'gpu': ('arxiv-like', 40, 1024), 'dry-run': ('tiny', 3, 64)}
#: What the check writes in OUT_DIR, and the mark its summary carries.
KIT_FILES = ('summary.json', 'log.txt', 'junit.xml', 'build.log')
KIT_MARK = 'pyg-fastload gpu_check'


def check_out_dir(out: Path) -> Optional[str]:
    r"""Why the check may not write into :obj:`out` (:obj:`None`: it may):
    a directory holding anything but an earlier check's files (its
    ``summary.json`` carrying the kit's mark) is never written into."""
    if not out.exists():
        return None
    if not out.is_dir():
        return f"'{out}' is a file: give a directory for the check's files"
    found = sorted(p.name for p in out.iterdir())
    if not found:
        return None
    foreign = [name for name in found if name not in KIT_FILES]
    earlier = None
    with contextlib.suppress(OSError, ValueError):
        earlier = json.loads((out / 'summary.json').read_text())
    if not foreign and isinstance(earlier, dict) and \
            earlier.get('kit') == KIT_MARK:
        return None  # an earlier check's files, replaced
    shown = ', '.join(foreign or found)
    return (f"'{out}' holds files the GPU check did not write ({shown}): "
            f"give an empty or new directory (or one an earlier check "
            f"wrote); nothing in it was changed")


def install_commands(python: str, wheels: List[Path], dry_run: bool,
                     scratch: Path) -> Dict[str, List[str]]:
    r"""pip's commands by step: the carried wheels, then the project
    without its dependencies (``--no-deps``: the machine's torch stays). A
    dry run asks pip whether the wheels fit the lent machines' Python 3.12
    and whether the project builds, installing nothing."""
    pip = [python, '-m', 'pip', 'install', '--no-index', '--no-deps',
           '--no-cache-dir']
    commands = {}
    if wheels:
        fit = ['--dry-run', '--only-binary=:all:', '--python-version',
               TARGET_PYTHON, '--implementation', 'cp',
               *(f'--platform={tag}' for tag in TARGET_PLATFORMS),
               '--target', str(scratch)] if dry_run else ['--no-compile']
        commands['install-wheels'] = [*pip, *fit, *map(str, wheels)]
    project = ['--dry-run'] if dry_run else []
    commands['install-project'] = [*pip, *project, '--no-build-isolation',
                                   '-e', str(ROOT)]
    return commands


class Check:
    r"""Runs the steps, keeps the log and the summary, kills what it
    started."""
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.out = Path(args.out_dir).resolve()
        refused = check_out_dir(self.out)
        if refused is not None:
            print(f'gpu_check: {refused}', file=sys.stderr, flush=True)
            raise SystemExit(2)
        self.out.mkdir(parents=True, exist_ok=True)
        self.started = time.monotonic()
        self.deadline = self.started + args.budget - RESERVE_S
        self.groups: List[int] = []
        self.summary: Dict[str, Any] = {
            'kit': KIT_MARK, 'status': 'running', 'budget_s': args.budget,
            'steps': {}, 'benchmarks': {}}
        # marked first: a check killed early leaves files a rerun may replace
        self.write_summary()
        self.work = Path(tempfile.mkdtemp(prefix='gpu_check-'))
        self.log_file = open(self.out / 'log.txt', 'w', buffering=1)

    def write_summary(self) -> None:
        text = json.dumps(self.summary, indent=1, sort_keys=True, default=str)
        (self.out / 'summary.json').write_text(text + '\n')

    def log(self, text: str) -> None:
        line = f'[{time.monotonic() - self.started:6.1f}s] {text}'
        print(line, flush=True)
        self.log_file.write(line + '\n')

    # Steps ###################################################################

    def start(self, name: str, argv: List[str],
              env: Optional[Dict[str, str]] = None,
              output: Optional[Path] = None) -> subprocess.Popen:
        self.log(f'{name}: {" ".join(argv)}')
        with open(output, 'w') if output else \
                contextlib.nullcontext(self.log_file) as sink:
            process = subprocess.Popen(
                argv, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=sink,
                stderr=subprocess.STDOUT, start_new_session=True,
                env={**os.environ, 'PYTHONUNBUFFERED': '1', **(env or {})})
        self.groups.append(process.pid)
        if self.args.groups_file:  # for scripts/gpu_check.sh, should this
            with open(self.args.groups_file, 'a') as f:  # process be killed
                f.write(f'{process.pid}\n')
        return process

    def finish(self, name: str, process: subprocess.Popen,
               started: float) -> str:
        r"""Waits for step :obj:`name` within its time and the budget's;
        records that it ran and its outcome (``ok``, ``failed``,
        ``timeout``, ``interrupted``), which it returns."""
        now = time.monotonic()
        limit = max(min(TIMEOUTS[name] - (now - started),
                        self.deadline - now), 0)
        code, outcome = None, 'interrupted'
        try:
            code = process.wait(timeout=limit)
            outcome = 'ok' if code == 0 else 'failed'
        except subprocess.TimeoutExpired:
            outcome = 'timeout'
        finally:  # also when the check itself is stopped
            self._kill(process.pid)
            record = self.summary['steps'].setdefault(name, {})
            record.update(status='ran', outcome=outcome, returncode=code,
                          timeout_s=TIMEOUTS[name],
                          seconds=round(time.monotonic() - started, 1))
            self.log(f'{name}: {outcome} ({record["seconds"]}s)')
        return outcome

    def run(self, name: str, argv: List[str],
            env: Optional[Dict[str, str]] = None,
            output: Optional[Path] = None) -> str:
        r"""Runs step :obj:`name` (its output to the log, or to
        :obj:`output`); its outcome, or ``'skipped'`` when the budget has
        less than 5 s left."""
        if self.deadline - time.monotonic() < 5:
            return self.skip(name, 'out of time')
        started = time.monotonic()
        return self.finish(name, self.start(name, argv, env, output),
                           started)

    def step(self, name: str, verb: str, *argv: str,
             env: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
        r"""Step :obj:`name`: ``gpu_check_steps.py VERB RESULT ARGV``;
        what it wrote to its result file (also where it failed part
        way)."""
        result = self.work / f'{name}.json'
        self.run(name, [sys.executable, str(STEPS), verb, str(result),
                        *argv], env)
        return json.loads(result.read_text()) if result.exists() else {}

    def skip(self, name: str, why: str) -> str:
        self.summary['steps'][name] = {'status': f'skipped: {why}'}
        self.log(f'{name}: skipped ({why})')
        return 'skipped'

    def _kill(self, group: int) -> None:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(group, sig)
            except ProcessLookupError:
                return
            for _ in range(20):
                if not leftovers([group]):
                    return
                time.sleep(0.1)

    # The check ###############################################################

    def main(self) -> int:
        args = self.args
        env = self.step('environment', 'environment')
        self.summary['environment'] = env
        dry = args.dry_run or not env.get('cuda_available', False)
        mode = 'dry-run' if dry else 'gpu'
        self.summary['mode'] = mode
        if dry:
            self.summary['dry_run_reason'] = '--dry-run' if args.dry_run \
                else 'no CUDA device' if env else 'the environment step failed'
        preset, batches, batch_size = GRAPHS[mode]
        graph = dict(preset=args.preset or preset,
                     batches=args.batches or batches,
                     batch_size=args.batch_size or batch_size)
        self.summary['graph'] = graph
        self.install(dry)
        self.summary['imports'] = self.step('imports', 'imports')
        torch_after = self.summary['imports'].get('torch')
        self.summary['install']['torch_untouched'] = (
            torch_after is not None and torch_after == env.get('torch'))
        self.tests()
        self.benchmarks(dry, graph)
        self.pyg_baseline(dry, graph)
        return 0 if self.passed() else 1

    def install(self, dry: bool) -> None:
        wheels_dir = Path(self.args.wheels)
        wheels = sorted(wheels_dir.glob('*.whl')) if wheels_dir.is_dir() \
            else []
        commands = install_commands(sys.executable, wheels, dry,
                                    self.work / 'target')
        self.summary['install'] = {'wheels': [w.name for w in wheels],
                                   'commands': commands}
        if self.args.no_install:
            self.summary['install']['status'] = self.skip(
                'install-project', '--no-install')
            return
        env = {'PIP_CONFIG_FILE': os.devnull}  # no index, no constraints
        status = 'ok'
        for name, command in commands.items():
            status = self.run(name, command, env)
            if status != 'ok':
                break
        self.summary['install']['status'] = status

    def build_pyg_backend(self, dry: bool) -> str:
        r"""Builds torch_sparse for PyG's NeighborLoader (the baseline;
        what ``pip install torch_sparse`` gives a pip user) from the
        carried sources, for the CPU, after the required steps."""
        sources = sorted(Path(self.args.wheels).glob('torch_s*.tar.gz'))
        if dry:
            return self.skip('build-pyg-backend', 'dry run: built on the '
                             'lent machine only')
        if not sources:
            return self.skip('build-pyg-backend', f'no torch_scatter/'
                             f'torch_sparse sources in {self.args.wheels}')
        argv = [sys.executable, '-m', 'pip', 'install', '--no-index',
                '--no-deps', '--no-cache-dir', '--no-build-isolation',
                *map(str, sources)]
        env = {'PIP_CONFIG_FILE': os.devnull, 'FORCE_ONLY_CPU': '1',
               'MAX_JOBS': str(os.cpu_count() or 1)}  # nothing beside it
        return self.run('build-pyg-backend', argv, env,
                        self.out / 'build.log')

    def tests(self) -> None:
        hidden = {'CUDA_VISIBLE_DEVICES': ''}  # what skips without CUDA
        selected = self.step('select-tests', 'select-tests',
                             *self.args.tests, env=hidden)
        ids = [test['nodeid'] for test in selected.get('selected', [])]
        report: Dict[str, Any] = {
            'selected': len(ids),
            'collection_errors': selected.get('collection_errors', [])}
        self.summary['tests'] = report
        if not ids:
            self.skip('tests', 'no test skips without CUDA')
            return
        options = ['--junitxml', str(self.out / 'junit.xml')]
        if importlib.util.find_spec('pytest_timeout'):
            options.append(f'--timeout={TEST_TIMEOUT_S}')
        results = self.step('tests', 'tests', *options, *ids)
        report['results'] = results
        counts: Dict[str, int] = {}
        for test in results.values():
            counts[test['outcome']] = counts.get(test['outcome'], 0) + 1
        report['counts'] = counts
        report['not_run'] = sorted(set(ids) - set(results))

    def common(self, graph: Dict[str, Any]) -> List[str]:
        r"""The benchmarks' options: the graph, batches, cache."""
        return ['--preset', graph['preset'], '--batch-size',
                str(graph['batch_size']), '--batches', str(graph['batches']),
                '--cache-dir', str(self.work / 'cache')]

    def benchmarks(self, dry: bool, graph: Dict[str, Any]) -> None:
        r"""Our sampler and loaders on the GPU (PyG's NeighborLoader is
        left to :meth:`pyg_baseline`)."""
        common = self.common(graph)
        cuda = [] if dry else ['--sampling-device', 'cuda']
        benches = self.summary['benchmarks']
        benches['seps'] = self.step('seps', 'bench', 'loader', *common,
                                    '--rounds', '1', '--warmup', '2',
                                    '--pyg-workers', *cuda)
        benches['train'] = self.step(
            'train', 'bench', 'train', *common, '--rounds', '1', '--disk',
            '--pyg-workers', '--device', 'cpu' if dry else 'cuda', *cuda)
        if dry:
            benches['gds'] = {'skipped': 'needs CUDA and kvikio'}
            self.skip('gds', 'dry run')
        else:
            benches['gds'] = self.step('gds', 'gds', *common,
                                       env={'KVIKIO_COMPAT_MODE': 'ON'})

    def pyg_baseline(self, dry: bool, graph: Dict[str, Any]) -> None:
        r"""The optional steps, in the time the required ones left:
        torch_sparse built, then PyG's NeighborLoader trained beside our
        loader on the same device."""
        built = self.build_pyg_backend(dry)
        importlib.invalidate_caches()  # see what the build installed
        if importlib.util.find_spec('torch_sparse') is None:
            self.skip('pyg-baseline', f'torch_sparse does not import '
                      f'(build-pyg-backend: {built})')
            return
        self.summary['benchmarks']['pyg-baseline'] = self.step(
            'pyg-baseline', 'bench', 'train', *self.common(graph),
            '--rounds', '1', '--pyg-workers', *(['0'] if dry else ['0', '4']),
            *([] if dry else ['--device', 'cuda', '--sampling-device',
                              'cuda']))

    def required(self) -> List[str]:
        r"""The steps that must run and pass for the status ``ok``: all
        but the optional ones, less those the options or the mode leave
        out (the install with ``--no-install``, ``gds`` in a dry run)."""
        install = [] if self.args.no_install else list(
            self.summary['install']['commands'])
        steps = ['environment', *install, 'imports', 'select-tests',
                 'tests', 'seps', 'train']
        return steps + (['gds'] if self.summary['mode'] == 'gpu' else [])

    def passed(self) -> bool:
        r"""Whether every required step ran and passed and no CUDA test
        failed; ``summary['not_ok']`` names each required step that did
        not, with its status or outcome."""
        steps = self.summary['steps']
        not_ok = {}
        for name in self.required():
            step = steps.get(name, {'status': 'not reached'})
            if step.get('outcome') != 'ok':
                not_ok[name] = step.get('outcome', step['status'])
        counts = self.summary.get('tests', {}).get('counts', {})
        for outcome in ('failed', 'error'):
            if counts.get(outcome):
                not_ok[f'tests {outcome}'] = counts[outcome]
        self.summary['not_ok'] = not_ok
        return not not_ok

    def close(self, status: str) -> None:
        r"""Kills every step still running, checks that none is left and
        writes the summary."""
        for group in self.groups:
            self._kill(group)
        self.summary['leftover_processes'] = leftovers(self.groups)
        self.summary['status'] = status
        self.summary['seconds'] = round(time.monotonic() - self.started, 1)
        self.write_summary()
        self.log(f'status {status} in {self.summary["seconds"]}s; '
                 f'{self.out / "summary.json"}')
        for name, step in self.summary['steps'].items():
            self.log(f'  {name:18} {step["status"]:8} '
                     f'{step.get("seconds", step.get("why", ""))}')
        self.log_file.close()
        shutil.rmtree(self.work, ignore_errors=True)


def leftovers(groups: List[int]) -> List[str]:
    r"""``'pid command'`` of every live process in :obj:`groups`."""
    found = []
    for stat in Path('/proc').glob('[0-9]*/stat'):
        try:
            text = stat.read_text()
        except OSError:
            continue
        fields = text[text.rindex(')') + 2:].split()
        if fields[0] != 'Z' and int(fields[2]) in groups:
            name = text[text.index('(') + 1:text.rindex(')')]
            found.append(f'{stat.parent.name} {name}')
    return found


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('out_dir', help='where the summary and log go')
    parser.add_argument('--dry-run', action='store_true',
                        help='CPU only (automatic without CUDA)')
    parser.add_argument('--wheels', default=str(ROOT / '.gpu_wheels'),
                        help='the carried wheels and sources '
                        '(scripts/gpu_wheels.sh)')
    parser.add_argument('--no-install', action='store_true',
                        help='use the project as installed')
    parser.add_argument('--tests', nargs='+', default=['tests'],
                        help='where to look for the CUDA tests')
    parser.add_argument('--preset', help='benchmark graph (gpu: arxiv-like, '
                        'dry run: tiny)')
    parser.add_argument('--batches', type=int, help='batches per benchmark')
    parser.add_argument('--batch-size', type=int)
    parser.add_argument('--budget', type=float, default=BUDGET_S,
                        help='seconds for the whole check')
    parser.add_argument('--groups-file', default=os.environ.get(
        'GPU_CHECK_GROUPS'), help="where each step's process group is "
        'listed as it starts (scripts/gpu_check.sh kills them at exit)')
    return parser.parse_args(argv)


def main(argv: Optional[List[str]] = None) -> int:
    check = Check(parse_args(argv))

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)
    signal.signal(signal.SIGTERM, stop)
    status = 'interrupted'
    try:
        code = check.main()
        status = 'ok' if code == 0 else 'failed'
        return code
    except KeyboardInterrupt:
        return 130
    finally:
        check.close(status)


if __name__ == '__main__':
    sys.exit(main())
