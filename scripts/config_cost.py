r"""How long a config in ``configs/`` takes and how much memory it needs,
estimated from a few steps (the figures of each config's header).

Runs ``pyg-fastload fit -c CONFIG`` in this process for ``--steps``
training steps and ``--val-steps`` validation batches (no logger, no
checkpoint, in a temporary directory), timing every batch, and
extrapolates to the config's own length: its epochs, the training batches
of each (its ``limit_train_batches`` or the whole loader) and its
validation batches (its ``limit_val_batches`` or the whole loader, plus
Lightning's sanity check)::

    estimate = start-up (to the first training batch)
             + epochs x (first step + (batches - 1) x later steps
                         + validation's start + its batches x each)
             + the sanity check's batches

Memory is the peak resident set of this process (rank 0 of a run of
several), from ``getrusage``: with features mapped from files it counts
the file pages the process touched.

Usage::

    python scripts/config_cost.py configs/quickstart.yaml [--steps 20]
        [--val-steps 3] [--json] [-- --data.dataset tiny ...]

It prints the header lines (``# time:``, ``# memory:``, ``# measured:``)
to paste into the config. The start-up includes generating a synthetic
preset the first time: run it twice for the figure of a cached one. A
collective mode's validation loader (``dsp``, ``hopgnn``) ends at
``--val-steps``, so its full count is only known from the config's own
``limit_val_batches`` (an int); otherwise the output says so.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional

STARTED = time.perf_counter()  # before torch and Lightning are imported

#: Where the ranks of one measurement write (a rank started by Lightning
#: runs this script again, with this in its environment).
ROOT_ENV = 'PYG_FASTLOAD_CONFIG_COST_ROOT'


@dataclass
class Cost:
    r"""What one short run measured, and the config's length."""
    setup_s: float
    first_step_s: float
    step_s: float
    val_start_s: float
    val_batch_s: float
    epochs: int
    train_batches: int
    val_batches: Optional[int]
    sanity_batches: int
    steps: int
    val_steps: int
    peak_rss_bytes: int
    #: The machine's 1-minute load average at the end (2 cores: above 2,
    #: other jobs shared them and the times are longer than alone).
    load: float = 0.0
    #: The processes of the run (Lightning's ranks); the memory is the
    #: first one's.
    ranks: int = 1

    @property
    def estimate_s(self) -> float:
        r"""The config's estimated wall time (see the module)."""
        val = 0.0 if not self.val_batches else \
            self.val_start_s + self.val_batches * self.val_batch_s
        sanity = 0.0 if not self.sanity_batches else \
            self.val_start_s + self.sanity_batches * self.val_batch_s
        epoch = (self.first_step_s + (self.train_batches - 1) * self.step_s
                 + val)
        return self.setup_s + self.epochs * epoch + sanity


def duration(seconds: float) -> str:
    r""":obj:`seconds` as a person says it: ``'40 s'``, ``'2.5 min'``,
    ``'1.6 h'``."""
    if seconds < 90:
        return f'{seconds:.0f} s'
    if seconds < 90 * 60:
        return f'{seconds / 60:.1f} min'
    return f'{seconds / 3600:.1f} h'


def header(cost: Cost, command: str) -> str:
    r"""The config header's measured lines."""
    val = ('validation batches unknown (a collective mode: set '
           'limit_val_batches)' if cost.val_batches is None else
           f'{cost.val_batches} validation batches at '
           f'{cost.val_batch_s:.2f} s')
    shared = (f'; measured at load average {cost.load:.1f}: other jobs '
              f'shared the cores, alone it is shorter' if cost.load > 2.5
              else '')
    return '\n'.join([
        f'# time: about {duration(cost.estimate_s)} on 2 CPU cores, '
        f'estimated from {cost.steps} steps (start-up {cost.setup_s:.0f} s, '
        f'{cost.epochs} epoch(s) of {cost.train_batches} steps at '
        f'{cost.step_s:.2f} s, {val}{shared})',
        f'# memory: {cost.peak_rss_bytes / 2**30:.1f} GiB peak resident'
        + (f' (rank 0; each of the {cost.ranks} ranks is a process)'
           if cost.ranks > 1 else ''),
        f'# measured: {command}',
    ])


def _config(path: str) -> Dict[str, Any]:
    import yaml
    config = yaml.safe_load(Path(path).read_text()) or {}
    return config.get('trainer') or {}


def _count(total: int, limit: Any) -> int:
    r"""The batches Lightning runs of a loader of :obj:`total` under a
    ``limit_*_batches`` of :obj:`limit`."""
    if limit is None:
        return total
    if isinstance(limit, int) and not isinstance(limit, bool):
        return min(total, limit)
    return int(total * float(limit))


def measure(config: str, steps: int = 20, val_steps: int = 3,
            extra: Optional[List[str]] = None) -> Optional[Cost]:
    r"""Runs :obj:`config` for :obj:`steps` training steps and
    :obj:`val_steps` validation batches; the :class:`Cost` (on the first
    rank; :obj:`None` on the others)."""
    from pytorch_lightning.callbacks import Callback

    from pyg_fastload.lightning.cli import run_cli

    if steps < 2:
        raise ValueError(f'--steps {steps}: at least 2 (the first step is '
                         f'timed apart from the later ones)')
    if val_steps < 1:
        raise ValueError(f'--val-steps {val_steps}: at least 1')

    class Clock(Callback):
        def __init__(self) -> None:
            self.train: List[float] = []
            self.val: List[float] = []
            self.val_start = self.val_end = 0.0
            self.train_total = 0
            self.val_total: Optional[int] = None

        def on_train_start(self, trainer, pl_module) -> None:
            self.train_total = int(trainer.num_training_batches)

        def on_train_batch_start(self, trainer, pl_module, batch,
                                 batch_idx) -> None:
            self.train.append(time.perf_counter())

        def on_train_batch_end(self, trainer, pl_module, outputs, batch,
                               batch_idx) -> None:
            self.train.append(time.perf_counter())

        def on_validation_start(self, trainer, pl_module) -> None:
            if trainer.sanity_checking:
                return
            self.val_start = time.perf_counter()
            loaders = trainer.val_dataloaders
            loaders = loaders if isinstance(loaders, (list, tuple)) \
                else [loaders]
            self.val_total = sum(len(loader) for loader in loaders)

        def on_validation_batch_start(self, trainer, pl_module, batch,
                                      batch_idx, dataloader_idx=0) -> None:
            if not trainer.sanity_checking:
                self.val.append(time.perf_counter())

        def on_validation_end(self, trainer, pl_module) -> None:
            if not trainer.sanity_checking:
                self.val_end = time.perf_counter()

    own = os.environ.setdefault(ROOT_ENV, tempfile.mkdtemp(
        prefix='config-cost-'))
    clock = Clock()
    # a config's own ModelCheckpoint stays (its cost is the config's);
    # otherwise none is written
    callbacks = _config(config).get('callbacks') or []
    keeps = any('ModelCheckpoint' in str(c.get('class_path', ''))
                for c in callbacks if isinstance(c, dict))
    cli = run_cli(['fit', '-c', config,
                   '--trainer.max_steps', str(steps),
                   '--trainer.val_check_interval', str(steps),
                   '--trainer.check_val_every_n_epoch', '1',
                   '--trainer.limit_val_batches', str(val_steps),
                   '--trainer.num_sanity_val_steps', '0',
                   '--trainer.logger', 'false',
                   *([] if keeps else ['--trainer.enable_checkpointing',
                                       'false']),
                   '--trainer.default_root_dir', own,
                   *(extra or [])], callbacks=[clock])
    trainer = cli.trainer
    if not trainer.is_global_zero:
        return None
    if len(clock.train) < 2 * steps or not clock.val:
        raise RuntimeError(f'the run took {len(clock.train) // 2} training '
                           f'steps and {len(clock.val)} validation batches '
                           f'of the {steps} and {val_steps} asked: the '
                           f'config is shorter than that')
    if trainer.max_epochs is None or trainer.max_epochs < 1:
        raise ValueError(f'{config}: give trainer.max_epochs (the estimate '
                         f'counts its epochs)')
    starts = clock.train[0::2]
    own_config = _config(config)
    collective = getattr(trainer.datamodule.loading, 'collective', False)
    limit = own_config.get('limit_val_batches')
    if collective and not isinstance(limit, int):
        val_batches: Optional[int] = None  # the loader ended at val_steps
    else:
        val_batches = _count(clock.val_total or 0, limit)
    sanity = own_config.get('num_sanity_val_steps', 2)
    sanity = sanity if val_batches is None else min(sanity, val_batches)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return Cost(
        setup_s=starts[0] - STARTED,
        first_step_s=starts[1] - starts[0],
        step_s=(clock.train[-1] - starts[1]) / (steps - 1),
        val_start_s=clock.val[0] - clock.val_start,
        val_batch_s=(clock.val_end - clock.val[0]) / len(clock.val),
        epochs=int(trainer.max_epochs),
        train_batches=clock.train_total,
        val_batches=val_batches,
        sanity_batches=int(sanity or 0),
        steps=steps, val_steps=len(clock.val), peak_rss_bytes=peak,
        load=os.getloadavg()[0], ranks=trainer.world_size)


def main(argv: Optional[List[str]] = None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    extra: List[str] = []
    if '--' in words:
        at = words.index('--')
        words, extra = words[:at], words[at + 1:]
    parser = argparse.ArgumentParser(
        prog='config_cost.py',
        description=__doc__.strip().splitlines()[0])
    parser.add_argument('config', help='a config file (configs/NAME.yaml)')
    parser.add_argument('--steps', type=int, default=20,
                        help='training steps to time (at least 2)')
    parser.add_argument('--val-steps', type=int, default=3,
                        help='validation batches to time')
    parser.add_argument('--json', action='store_true',
                        help='print the measurement as JSON too')
    args = parser.parse_args(words)
    if not Path(args.config).is_file():
        parser.error(f"'{args.config}' is not a file")
    cost = measure(args.config, args.steps, args.val_steps, extra)
    if cost is None:  # a rank other than the first
        return 0
    command = ' '.join(['python scripts/config_cost.py', args.config,
                        *([f'--steps {args.steps}'] if args.steps != 20
                          else []), *(['--', *extra] if extra else [])])
    print(header(cost, command))
    if args.json:
        print(json.dumps({**asdict(cost), 'estimate_s': cost.estimate_s}))
    return 0


if __name__ == '__main__':
    sys.exit(main())
