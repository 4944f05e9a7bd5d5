r"""The ``pyg-fastload`` command: the trainer entry points (``fit``,
``validate``, ``test``, ``predict``) through LightningCLI, plus ``prepare``,
``bench ...`` and ``report``."""
from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import threading
import warnings
from typing import Any, Dict, List, NoReturn, Optional, Tuple

from pyg_fastload import __version__
from pyg_fastload.errors import USAGE_EXIT, UsageExit

__all__ = ['main', 'SIGTERM_EXIT', 'INTERRUPT_EXIT']

#: The exit status of a run stopped by SIGTERM (128 + 15, as a process the
#: signal killed reports in a shell).
SIGTERM_EXIT = 143
#: The exit status of a run stopped by Ctrl-C (128 + SIGINT's 2).
INTERRUPT_EXIT = 130

_TRAINER_HELP = {
    'fit': 'train a NodeClassifier or LinkPredictor (LightningCLI: -c '
           'CONFIG.yaml, --print_config, --trainer.max_epochs 3, ...)',
    'validate': 'evaluate on the validation nodes (LightningCLI)',
    'test': 'evaluate on the test nodes (LightningCLI)',
    'predict': 'predict every node (LightningCLI)',
}


#: The benchmarks behind ``pyg-fastload bench NAME``: the module holding
#: each one's ``add_arguments`` and ``run``, and its help text.
_BENCHMARKS = {
    'loader': ('pyg_fastload.bench.loader',
               'FastNeighborLoader vs PyG NeighborLoader throughput'),
    'cache': ('pyg_fastload.bench.cache',
              'hit ratio per hotness policy; features on disk'),
    'direct': ('pyg_fastload.bench.direct',
               'features larger than memory: direct reads vs np.memmap'),
    'dgl': ('pyg_fastload.bench.dgl',
            "FastNeighborLoader vs DGL's NeighborSampler (DGL's own venv)"),
    'sampling': ('pyg_fastload.bench.sampling',
                 "ByteGNN's sampling pool: batches/s by workers and launch "
                 'policy'),
    'tasks': ('pyg_fastload.bench.tasks',
              "ByteGNN's per-batch task graphs: completion time by task "
              'order, per-hop tasks, contention'),
    'rows': ('pyg_fastload.bench.rows',
             'feature row gathers: index_select vs gather_rows by row width'),
    'accumulator': ('pyg_fastload.bench.accumulator',
                    "GIDS's storage access accumulator: read rate vs batch "
                    'size'),
    'train': ('pyg_fastload.bench.train',
              'training loop fed by PyG vs pyg_fastload loaders'),
    'model': ('pyg_fastload.bench.model',
              'edge_index scatter vs sorted sparse adjacency in the model'),
    'inference': ('pyg_fastload.bench.inference',
                  "every node's output: layerwise_inference vs PyG's "
                  'layer-wise loop'),
    'remote': ('pyg_fastload.bench.remote',
               "2-rank dsp with a slowed rank: async requests vs sync "
               'collectives'),
    'partition': ('pyg_fastload.bench.partition',
                  'partition quality per method: cut, balance, locality, '
                  'time'),
    'fit': ('.bench.fit',
            'Lightning fit: FastLoadDataModule vs PyG LightningNodeData'),
    'dist': ('.bench.dist',
             'several ranks on loopback: replicated, pagraph, dsp, hopgnn vs '
             'one process'),
    'accuracy': ('.bench.accuracy',
                 'Cora/CiteSeer test accuracy: FastLoadDataModule vs PyG'),
    'hetero-accuracy': ('.bench.hetero_accuracy',
                        'mag-like/FakeHeteroDataset accuracy: '
                        'FastLoadDataModule vs PyG'),
    'link-accuracy': ('.bench.link_accuracy',
                      'arxiv-like/Cora link MRR: FastLoadDataModule vs PyG'),
    'time-to-accuracy': ('.bench.time_to_accuracy',
                         "validation accuracy over training time: PyG's "
                         'NeighborLoader vs our samplers (LABOR, ...)'),
}

#: The commands listed after ``bench``, as in :data:`_BENCHMARKS`.
_COMMANDS = {
    'prepare': ('pyg_fastload.datasets.prepare',
                'write a dataset directory (features on disk)'),
    'partition': ('pyg_fastload.partition.command',
                  'split a dataset directory into parts (one per rank)'),
    'report': ('.report', 'draw PNG plots from the logs of pyg-fastload fit'),
}


def _add(parent: Any, table: Dict[str, Tuple[str, str]],
         chosen: str) -> None:
    r"""Adds :obj:`table`'s commands to :obj:`parent` by name and help text;
    only :obj:`chosen` imports its module, for its arguments."""
    for name, (module_name, text) in table.items():
        command = parent.add_parser(name, help=text)
        if name == chosen:
            module = importlib.import_module(module_name, __package__)
            module.add_arguments(command)
            command.set_defaults(run=module.run)


def _parser(words: List[str]) -> argparse.ArgumentParser:
    r"""The parser of :obj:`words`: every command is listed, and only the
    one :obj:`words` names is imported (``--help`` imports none)."""
    parser = argparse.ArgumentParser(
        prog='pyg-fastload',
        description='Fast mini-batch loading for PyTorch Geometric.')
    parser.add_argument('--version', action='version',
                        version=f'pyg-fastload {__version__}')
    commands = parser.add_subparsers(dest='command', required=True)
    for name, text in _TRAINER_HELP.items():
        commands.add_parser(name, help=text, add_help=False)
    bench = commands.add_parser('bench', help='run a benchmark')
    benchmarks = bench.add_subparsers(dest='benchmark', required=True)
    first, second = [*words, '', ''][:2]
    _add(benchmarks, _BENCHMARKS, second if first == 'bench' else '')
    _add(commands, _COMMANDS, first)
    return parser


def _watch_ctrl_c() -> List[bool]:
    r"""Records Ctrl-C (SIGINT) and raises ``KeyboardInterrupt`` as Python
    does; the returned list is non-empty once it came."""
    seen: List[bool] = []

    def on_sigint(signum: int, frame: Any) -> None:
        seen.append(True)
        signal.default_int_handler(signum, frame)

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, on_sigint)
    return seen


def _finish(what: str, status: int) -> NoReturn:
    r"""Ends a run stopped by a signal: one line, :obj:`status`. Lightning's
    teardown has finalised the loggers and callbacks; the interpreter's own
    shutdown after a signal aborts about one run in three here (a native
    thread left joinable: status -6, "terminate called without an active
    exception"), so the process exits without it."""
    import torch.distributed as dist  # lazy: --help starts without torch
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    # one write: the ranks' lines never interleave (pipes keep writes up
    # to 4 KiB whole)
    os.write(2, f'pyg-fastload: {what}\n'.encode())
    os._exit(status)


def _quiet_lightning() -> None:
    r"""Hides the one warning Lightning 2.6 prints on every run under torch
    2.13 (its own use of torch's deprecated ``LeafSpec``): nothing a user
    of this command can act on."""
    warnings.filterwarnings(
        'ignore', message=r'`isinstance\(treespec, LeafSpec\)`',
        category=FutureWarning, module=r'pytorch_lightning\.')


def main(argv: Optional[List[str]] = None) -> None:
    words = sys.argv[1:] if argv is None else list(argv)
    if words and words[0] in _TRAINER_HELP:
        _quiet_lightning()
        # lazy: torch and Lightning take seconds to import, and
        # `pyg-fastload --help` starts without them
        import torch.distributed as dist
        from pytorch_lightning.utilities.exceptions import SIGTERMException

        from pyg_fastload.distributed.startup import StartupWatch

        from .cli import run_cli
        from .cli_errors import ConciseParser
        from .errors import ConfigError

        # ranks of other machines stop when this one fails before they
        # connect (else they wait for the process group's whole timeout)
        watch = StartupWatch.from_env()
        if watch is not None:
            watch.start()

        def tell(failure: str) -> None:
            if watch is not None and not dist.is_initialized():
                watch.fail(failure)

        interrupted = _watch_ctrl_c()
        try:
            try:
                cli = run_cli(None if argv is None else words)
                stopped = cli.trainer.received_sigterm
            except SIGTERMException:  # a SystemExit whose code is 0
                stopped = True
            except (KeyboardInterrupt, SystemExit):
                if not interrupted:
                    raise
                # Ctrl-C is not a failure (Lightning exits 1 after it): one
                # line, status 130 as a shell reports SIGINT
                tell('interrupted')
                _finish('interrupted', INTERRUPT_EXIT)
            except ConfigError as error:  # found while setting up
                where = ''
                if dist.is_available() and dist.is_initialized() and \
                        dist.get_world_size() > 1:
                    where = f'rank {dist.get_rank()}: '
                line = (f"error: config key '{error.config_key}': "
                        f"{error.detail}")
                tell(line)
                _finish(f'{where}{line}', 2)
        except SystemExit as end:
            if end.code not in (None, 0):  # e.g. an argument refused
                refused = ConciseParser.last_error
                tell(f'error: {refused}' if refused else
                     f'exited with status {end.code} (its output says why)')
            raise
        except BaseException as error:
            tell(f'{type(error).__name__}: {error}')
            raise
        if watch is not None:
            watch.stop()
        if dist.is_available() and dist.is_initialized():
            # Lightning leaves the process group up; shut it down before the
            # interpreter does (a gloo group torn down at exit can abort).
            dist.destroy_process_group()
        if stopped:  # a scheduler must not record a terminated run as done
            _finish('stopped by SIGTERM', SIGTERM_EXIT)
        return
    args = _parser(words).parse_args(words)
    try:
        try:
            args.run(args)
        except ValueError as error:  # a bad argument value of a benchmark
            if args.command != 'bench':
                raise
            raise UsageExit(f'bench {args.benchmark}', str(error)) from None
    except UsageExit as end:  # one line, argparse's status
        print(end.code, file=sys.stderr, flush=True)
        raise SystemExit(USAGE_EXIT) from None


if __name__ == '__main__':
    main()
