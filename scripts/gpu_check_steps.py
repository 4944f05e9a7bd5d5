#!/usr/bin/env python3
r"""The steps of ``scripts/gpu_check.py``, each run in a process of its own:
``python scripts/gpu_check_steps.py VERB RESULT_JSON [ARGS...]``. A step
prints its log and writes what it found to ``RESULT_JSON`` (the tests after
each test, so a step stopped at its timeout still reports)."""
from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

#: What the project needs importable after the install.
REQUIRED = ('torch', 'torch_geometric', 'pytorch_lightning', 'pyg_fastload',
            'pyg_fastload.lightning', 'jsonargparse', 'pymetis')
#: What only some steps use: storage='gds', PyG's NeighborLoader.
OPTIONAL = ('kvikio', 'torch_sparse')


def write(path: str, value: Any) -> None:
    Path(path).write_text(json.dumps(value, indent=1, default=str))


def version(name: str) -> str:
    r"""The version of the module that imports as :obj:`name`, or why it
    does not import."""
    try:
        module = importlib.import_module(name)
    except Exception as error:  # ImportError, or a native library's error
        return f'missing: {type(error).__name__}: {error}'
    try:
        return str(module.__version__)
    except AttributeError:
        try:
            return importlib.metadata.version(name.split('.')[0])
        except importlib.metadata.PackageNotFoundError:
            return 'ok'


def environment(result: str, argv: List[str]) -> int:
    r"""The machine: Python, torch, its CUDA, the GPU and its driver."""
    import torch
    info: Dict[str, Any] = {
        'python': platform.python_version(), 'executable': sys.executable,
        'torch': torch.__version__, 'torch_cuda': torch.version.cuda,
        'cuda_available': torch.cuda.is_available(),
        'cpus': len(os.sched_getaffinity(0))}
    for name in ('torch_geometric', 'pytorch_lightning'):
        try:  # without importing Lightning (seconds)
            info[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            info[name] = 'missing'
    if info['cuda_available']:
        props = torch.cuda.get_device_properties(0)
        info.update(gpu=props.name, gpu_count=torch.cuda.device_count(),
                    gpu_memory_bytes=props.total_memory,
                    capability=f'{props.major}.{props.minor}',
                    multiprocessors=props.multi_processor_count)
    if shutil.which('nvidia-smi'):
        smi = subprocess.run(
            ['nvidia-smi', '--query-gpu=name,driver_version,memory.total',
             '--format=csv,noheader'], capture_output=True, text=True,
            timeout=30)
        info['nvidia_smi'] = (smi.stdout or smi.stderr).strip()
    for key, value in info.items():
        print(f'{key}: {value}')
    write(result, info)
    return 0


def imports(result: str, argv: List[str]) -> int:
    r"""What imports after the install, with versions; fails if a required
    module does not."""
    found = {name: version(name) for name in (*REQUIRED, *OPTIONAL)}
    if 'pyg_fastload' in sys.modules:  # editable: this checkout
        found['pyg_fastload_path'] = str(Path(
            sys.modules['pyg_fastload'].__file__).parent)
    for key, value in found.items():
        print(f'{key}: {value}')
    write(result, found)
    return int(any(found[name].startswith('missing') for name in REQUIRED))


def _skips_without_cuda(item: Any) -> Optional[str]:
    r"""The reason of a ``skipif`` mark of :obj:`item` that holds here
    and names CUDA or a GPU."""
    for mark in item.iter_markers(name='skipif'):
        reason = mark.kwargs.get('reason', '')
        holds = any(not isinstance(c, str) and c for c in mark.args)
        if holds and re.search('cuda|gpu', reason, re.IGNORECASE):
            return reason
    return None


class _CudaTests:
    r"""Collects the tests that skip for want of CUDA (run with CUDA
    hidden)."""
    def __init__(self) -> None:
        self.selected: List[Dict[str, str]] = []
        self.errors: List[str] = []

    def pytest_collection_modifyitems(self, items: List[Any]) -> None:
        for item in items:
            reason = _skips_without_cuda(item)
            if reason is not None:
                self.selected.append({'nodeid': item.nodeid,
                                      'reason': reason})

    def pytest_collectreport(self, report: Any) -> None:
        if report.failed:
            self.errors.append(report.nodeid)


def select_tests(result: str, paths: List[str]) -> int:
    r"""Every test under :obj:`paths` that skips without CUDA."""
    import pytest
    found = _CudaTests()
    code = pytest.main(['--collect-only', '-q', '-p', 'no:cacheprovider',
                        '--continue-on-collection-errors', *paths],
                       plugins=[found])
    print(f'{len(found.selected)} tests skip without CUDA')
    write(result, {'selected': found.selected,
                   'collection_errors': found.errors})
    return 0 if found.selected or code == 0 else 1


class _Outcomes:
    r"""Each test's outcome, seconds and message, written after each."""
    def __init__(self, path: str):
        self.path = path
        self.results: Dict[str, Dict[str, Any]] = {}

    def pytest_runtest_logreport(self, report: Any) -> None:
        entry = self.results.setdefault(
            report.nodeid, {'outcome': 'passed', 'seconds': 0.0})
        entry['seconds'] = round(entry['seconds'] + report.duration, 3)
        if report.skipped:
            entry['outcome'] = 'xfailed' if hasattr(report, 'wasxfail') \
                else 'skipped'
            entry['message'] = report.longrepr[2] if isinstance(
                report.longrepr, tuple) else str(report.longrepr)
        elif report.failed:
            entry['outcome'] = 'failed' if report.when == 'call' else 'error'
            lines = report.longreprtext.strip().splitlines() or ['']
            errors = [line[1:].strip() for line in lines
                      if line.startswith('E ')]
            entry['message'] = ' | '.join(errors[:3] or lines[-1:])[:400]
        write(self.path, self.results)


def tests(result: str, argv: List[str]) -> int:
    r"""Runs the tests :obj:`argv` names (pytest options first)."""
    import pytest
    write(result, {})
    return int(pytest.main(['-q', '-rfEs', '-p', 'no:cacheprovider', *argv],
                           plugins=[_Outcomes(result)]))


def bench(result: str, argv: List[str]) -> int:
    r"""``pyg-fastload bench NAME ARGS``; its figures and the command."""
    name, *args = argv
    module = importlib.import_module(f'pyg_fastload.bench.{name}')
    parser = argparse.ArgumentParser()
    module.add_arguments(parser)
    figures = module.run(parser.parse_args(args))
    write(result, {'command': ' '.join(['pyg-fastload', 'bench', *argv]),
                   **figures})
    return 0


def gds(result: str, argv: List[str]) -> int:
    r"""Random rows read into GPU memory with ``storage='gds'`` (kvikio;
    compatibility mode where ``KVIKIO_COMPAT_MODE=ON``) and with
    ``storage='direct'``, checked against memory-mapped reads."""
    import torch

    from pyg_fastload.bench.disk_tier import prepared_dataset_dir
    from pyg_fastload.caching import open_dataset
    parser = argparse.ArgumentParser()
    for option in ('--preset', '--cache-dir'):
        parser.add_argument(option)
    for option in ('--batch-size', '--batches', '--seed'):
        parser.add_argument(option, type=int, default=0)
    args = parser.parse_args(argv)
    path = prepared_dataset_dir(args)
    reference, _ = open_dataset(path, host_budget=0)
    rows, width = reference.get_tensor_size(group_name=None, attr_name='x',
                                            index=None)
    itemsize = reference.dtype_of('x').itemsize
    gen = torch.Generator().manual_seed(args.seed)
    batches = [torch.randint(rows, (args.batch_size * 10, ), generator=gen)
               for _ in range(args.batches + 1)]
    figures: Dict[str, Any] = {
        'kvikio': version('kvikio'),
        'KVIKIO_COMPAT_MODE': os.environ.get('KVIKIO_COMPAT_MODE'),
        'rows_per_read': args.batch_size * 10, 'reads': args.batches}
    for storage in ('direct', 'gds'):
        try:
            store, _ = open_dataset(path, device='cuda', storage=storage,
                                    host_budget=0)
            equal = torch.equal(store.gather('x', batches[0]).cpu(),
                                reference.gather('x', batches[0]))
            torch.cuda.synchronize()
            start = time.perf_counter()
            for ids in batches[1:]:
                store.gather('x', ids)
            torch.cuda.synchronize()
            seconds = time.perf_counter() - start
            read = sum(ids.numel() for ids in batches[1:])
            figures.update({
                f'{storage} equal': equal,
                f'{storage} rows_per_s': read / seconds,
                f'{storage} GiB_per_s': read * width * itemsize / seconds
                / 2**30})
        except Exception as error:  # kvikio or O_DIRECT may be missing
            figures[f'{storage} error'] = f'{type(error).__name__}: {error}'
        print(json.dumps({k: v for k, v in figures.items()
                          if k.startswith(storage)}))
    write(result, figures)
    return int(any(key.endswith('error') or value is False
                   for key, value in figures.items()))


VERBS = {'environment': environment, 'imports': imports,
         'select-tests': select_tests, 'tests': tests, 'bench': bench,
         'gds': gds}


if __name__ == '__main__':
    verb, result_path, *rest = sys.argv[1:]
    sys.exit(VERBS[verb](result_path, rest))
