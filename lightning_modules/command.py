r"""The ``pyg-fastload`` command: the trainer entry points (``fit``,
``validate``, ``test``, ``predict``) through LightningCLI, plus ``prepare``,
``bench ...`` and ``report``."""
from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import warnings
from typing import Any, List, NoReturn, Optional

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


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog='pyg-fastload',
        description='Fast mini-batch loading for PyTorch Geometric.')
    commands = parser.add_subparsers(dest='command', required=True)
    for name, text in _TRAINER_HELP.items():
        commands.add_parser(name, help=text, add_help=False)
    bench = commands.add_parser('bench', help='run a benchmark')
    benchmarks = bench.add_subparsers(dest='benchmark', required=True)

    from pyg_fastload.bench import (accumulator, cache, dgl, direct, loader,
                                    model, rows, sampling, train)
    from pyg_fastload.bench import partition as partition_bench
    from pyg_fastload.datasets import prepare
    from pyg_fastload.partition import command as partition

    from . import report
    from .bench import accuracy, dist, fit, hetero_accuracy, link_accuracy
    for parent, name, module, text in (
        (benchmarks, 'loader', loader,
         'FastNeighborLoader vs PyG NeighborLoader throughput'),
        (benchmarks, 'cache', cache,
         'hit ratio per hotness policy; features on disk'),
        (benchmarks, 'direct', direct,
         'features larger than memory: direct reads vs np.memmap'),
        (benchmarks, 'dgl', dgl,
         "FastNeighborLoader vs DGL's NeighborSampler (DGL's own venv)"),
        (benchmarks, 'sampling', sampling,
         "ByteGNN's sampling pool: batches/s by workers and launch policy"),
        (benchmarks, 'rows', rows,
         'feature row gathers: index_select vs gather_rows by row width'),
        (benchmarks, 'accumulator', accumulator,
         "GIDS's storage access accumulator: read rate vs batch size"),
        (benchmarks, 'train',
         train, 'training loop fed by PyG vs pyg_fastload loaders'),
        (benchmarks, 'model', model,
         'edge_index scatter vs sorted sparse adjacency in the model'),
        (benchmarks, 'partition', partition_bench,
         'partition quality per method: cut, balance, locality, time'),
        (benchmarks, 'fit', fit,
         'Lightning fit: FastLoadDataModule vs PyG LightningNodeData'),
        (benchmarks, 'dist', dist,
         'several ranks on loopback: replicated, pagraph, dsp, hopgnn vs '
         'one process'),
        (benchmarks, 'accuracy', accuracy,
         'Cora/CiteSeer test accuracy: FastLoadDataModule vs PyG'),
        (benchmarks, 'hetero-accuracy', hetero_accuracy,
         'mag-like/FakeHeteroDataset accuracy: FastLoadDataModule vs PyG'),
        (benchmarks, 'link-accuracy', link_accuracy,
         'arxiv-like/Cora link MRR: FastLoadDataModule vs PyG'),
        (commands, 'prepare', prepare,
         'write a dataset directory (features on disk)'),
        (commands, 'partition', partition,
         'split a dataset directory into parts (one per rank)'),
        (commands, 'report', report,
         'draw PNG plots from the logs of pyg-fastload fit'),
    ):
        command = parent.add_parser(name, help=text)
        module.add_arguments(command)
        command.set_defaults(run=module.run)
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
    import torch.distributed as dist
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
        import torch.distributed as dist
        from pytorch_lightning.utilities.exceptions import SIGTERMException

        from .cli import run_cli
        from .errors import ConfigError

        interrupted = _watch_ctrl_c()
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
            _finish('interrupted', INTERRUPT_EXIT)
        except ConfigError as error:  # found while setting up (every rank)
            where = ''
            if dist.is_available() and dist.is_initialized() and \
                    dist.get_world_size() > 1:
                where = f'rank {dist.get_rank()}: '
            _finish(f"{where}error: config key '{error.config_key}': "
                    f"{error.detail}", 2)
        if dist.is_available() and dist.is_initialized():
            # Lightning leaves the process group up; shut it down before the
            # interpreter does (a gloo group torn down at exit can abort).
            dist.destroy_process_group()
        if stopped:  # a scheduler must not record a terminated run as done
            _finish('stopped by SIGTERM', SIGTERM_EXIT)
        return
    args = _parser().parse_args(words)
    if args.command != 'bench':
        args.run(args)
        return
    try:
        args.run(args)
    except ValueError as error:  # a bad argument value: one line, no trace
        raise SystemExit(f'pyg-fastload bench {args.benchmark}: error: '
                         f'{error}') from None


if __name__ == '__main__':
    main()
