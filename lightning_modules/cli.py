r"""``pyg-fastload fit|validate|test|predict``: LightningCLI over
:class:`NodeClassifier` (or :class:`LinkPredictor`) and
:class:`FastLoadDataModule`."""
from __future__ import annotations

import os
import pickle
import re
import sys
import warnings
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import pytorch_lightning as pl
import yaml
from jsonargparse import set_parsing_settings
from pytorch_lightning.callbacks import ModelCheckpoint
from pytorch_lightning.cli import LightningCLI
from pytorch_lightning.strategies import DDPStrategy

from pyg_fastload.config import FeatureCache, PipelineSettings, SettingError
from pyg_fastload.distributed.startup import form_restarted_group
from pyg_fastload.errors import USAGE_EXIT
from pyg_fastload.modes import EvalSettings, ModeOptions
from pyg_fastload.modes.link_split import LinkOptions
from pyg_fastload.sampling import SAMPLERS

from .callbacks import LoaderMonitor
from .cli_errors import ConciseParser
from .datamodule import FastLoadDataModule
from .dist_monitor import DistributedMonitor
from .errors import ConfigError, config_section
from .run_end import RunEnd

__all__ = ['FastLoadCLI', 'SUBCOMMANDS', 'IMPORT_ALLOWLIST', 'ALLOW_ENV',
           'run_cli', 'restrict_imports', 'configs_dir', 'resolve_configs',
           'shipped_configs']

#: The trainer entry points that go through LightningCLI.
SUBCOMMANDS = ('fit', 'validate', 'test', 'predict')

#: The only packages whose classes a config file, the command line or an
#: environment variable may name (``class_path``, or any other import path
#: in a value): this package's and Lightning's (callbacks, loggers,
#: strategies, plugins, profilers). Anything else, ``os.system`` included, is
#: refused before it is imported.
IMPORT_ALLOWLIST = ('pyg_fastload', 'lightning_modules', 'pytorch_lightning',
                    'lightning_fabric', 'lightning.pytorch',
                    'lightning.fabric')

#: The environment variable naming more packages a config may import from
#: (comma-separated, e.g. the operator's own callbacks: ``my_project``).
ALLOW_ENV = 'PYG_FASTLOAD_ALLOW_IMPORTS'

_DOTTED = re.compile(r'^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$')


def allowed_packages() -> List[str]:
    r""":data:`IMPORT_ALLOWLIST` and the packages the operator names in
    ``$PYG_FASTLOAD_ALLOW_IMPORTS`` (each checked)."""
    extra = [p.strip() for p in os.environ.get(ALLOW_ENV, '').split(',')
             if p.strip()]
    for entry in extra:
        if not _DOTTED.match(entry) or entry.split('.')[0] == 'jsonargparse':
            raise SystemExit(f"pyg-fastload: ${ALLOW_ENV} names {entry!r}, "
                             f"which is not a package path such as "
                             f"'my_project.callbacks'")
    return [*IMPORT_ALLOWLIST, *extra]


def restrict_imports() -> None:
    r"""Lets parsed values import only from :func:`allowed_packages`
    (jsonargparse otherwise instantiates any ``class_path`` given for a
    parameter typed ``Any`` or a class, and imports any module named)."""
    set_parsing_settings(import_path_denylist=['*'],
                         import_path_allowlist=allowed_packages())


#: What ``--ckpt_path`` may be besides a file: Lightning's own names.
_CKPT_NAMES = ('last', 'best', 'hpc', 'registry')

#: The model a config that names none trains.
DEFAULT_MODEL = 'pyg_fastload.lightning.NodeClassifier'
#: The models of this package by the short names configs use.
_SHORT_NAMES = {'NodeClassifier': DEFAULT_MODEL,
                'LinkPredictor': 'pyg_fastload.lightning.LinkPredictor'}


class FastLoadCLI(LightningCLI):
    r"""LightningCLI with pyg-fastload's defaults: the loader and
    distributed monitor callbacks and what a fit ends with
    (:class:`~pyg_fastload.lightning.run_end.RunEnd`), seed 0, and
    configuration errors reported with their config key
    (``data.feature_cache.host_budget``) before anything trains."""
    def __init__(self, *args: Any, default_model: str = DEFAULT_MODEL,
                 **kwargs: Any):
        self._default_model = default_model
        super().__init__(*args, **kwargs)

    def add_arguments_to_parser(self, parser: Any) -> None:
        r"""``model`` defaults to :class:`NodeClassifier` (a config's
        ``model:`` keys are its arguments); ``model: class_path:
        LinkPredictor`` picks the link predictor. The default is the class
        the command line names (:func:`named_model_class`): a switch of
        class in jsonargparse keeps the old class's values of the arguments
        both share, so the defaults must be the named class's own. A named
        class that may not be imported (``os.system``) leaves the default
        model: parsing then refuses the name in one line, with its key."""
        try:
            parser.set_defaults({'model': {'class_path': self._default_model}})
        except ImportError:
            parser.set_defaults({'model': {'class_path': DEFAULT_MODEL}})

    def _parse_ckpt_path(self) -> None:
        r"""Lightning's reading of ``--ckpt_path``'s hyper-parameters, its
        failures (a plain pickle, a file of other bytes, ``hyper_parameters``
        that is not a mapping) in one line naming the file, as is a path
        that names no file (Lightning's names of a checkpoint, ``last``,
        ``best``, ``hpc``, ``registry``, are left to it)."""
        subcommand = self.config.get('subcommand')
        path = self.config[subcommand].get('ckpt_path') if subcommand \
            else None
        if isinstance(path, str) and path not in _CKPT_NAMES and \
                not path.startswith('registry:') and '://' not in path and \
                not Path(path).expanduser().is_file():
            self.parser.error(f"--ckpt_path '{path}' names no file; give a "
                              f".ckpt file written by pyg-fastload fit (its "
                              f"'written: ... checkpoint PATH' line)")
        try:
            with warnings.catch_warnings():  # torch's note on a pickle's
                warnings.filterwarnings(  # protocol: not the error
                    'ignore', message='Detected pickle protocol')
                super()._parse_ckpt_path()
        except (pickle.UnpicklingError, EOFError, RuntimeError,
                AttributeError, TypeError) as error:
            path = self.config[self.config.subcommand].ckpt_path
            what = (f'torch.load: {type(error).__name__}' if isinstance(
                error, (pickle.UnpicklingError, EOFError, RuntimeError))
                else "its 'hyper_parameters' is not a mapping of the "
                     "model's arguments")
            self.parser.error(f"--ckpt_path '{path}' is not a Lightning "
                              f"checkpoint ({what}); give a .ckpt file "
                              f"written by pyg-fastload fit "
                              f"(lightning_logs/version_N/checkpoints/)")

    def _instantiate_trainer(self, config: Dict[str, Any],
                             callbacks: List[pl.Callback]) -> pl.Trainer:
        r"""``predict`` logs nothing and saves no checkpoint, so it gets no
        logger, no checkpoint callback and no copy of its config: a fit's
        config (the command a fit prints) would otherwise make a
        ``version_N`` directory holding only ``config.yaml`` and
        ``hparams.yaml`` (which ``report`` takes for a fit stopped before its
        first batch), and the checkpoint callback restored there warns that
        its directory changed."""
        if self.subcommand != 'predict':
            return super()._instantiate_trainer(config, callbacks)
        config = {**config, 'logger': False, 'enable_checkpointing': False}
        if isinstance(config.get('callbacks'), list):
            config['callbacks'] = [c for c in config['callbacks']
                                   if not isinstance(c, ModelCheckpoint)]
        callbacks = [c for c in callbacks
                     if not isinstance(c, ModelCheckpoint)]
        save_config, self.save_config_callback = \
            self.save_config_callback, None
        try:
            return super()._instantiate_trainer(config, callbacks)
        finally:
            self.save_config_callback = save_config

    def _run_subcommand(self, subcommand: str) -> None:
        r"""Runs :obj:`subcommand`; ``predict`` without Lightning's note
        that the checkpoint's callbacks (its checkpoint callback, left out
        above) are missing: their state only matters to training."""
        if subcommand != 'predict':
            return super()._run_subcommand(subcommand)
        with warnings.catch_warnings():
            warnings.filterwarnings('ignore', message=(
                'Be aware that when using `ckpt_path`, callbacks used to '
                'create the checkpoint'))
            return super()._run_subcommand(subcommand)

    def instantiate_classes(self) -> None:
        self._check_nested()
        try:
            super().instantiate_classes()
            with config_section('data'):
                self.datamodule.spec.placement(
                    self.trainer.strategy.root_device)
            # The dataset's shape and labels, checked before the model
            # allocates anything by them.
            if self.datamodule.loading.task.labelled:
                self.datamodule.num_classes  # noqa: B018 (reads, checks)
        except (ConfigError, ValueError) as error:
            # the model is built inside jsonargparse (subclass mode), which
            # wraps its ConfigError in a ValueError
            cause: Optional[BaseException] = error
            while cause is not None and not isinstance(cause, ConfigError):
                cause = cause.__cause__
            if cause is None:
                raise
            self.parser.error(f"config key '{cause.config_key}': "
                              f"{cause.detail}")

    def before_fit(self) -> None:
        r"""A rank that ``torchrun --max-restarts`` restarted forms its
        process group on keys of its attempt's own
        (:func:`~pyg_fastload.distributed.startup.form_restarted_group`),
        which Lightning's strategy then finds formed."""
        strategy = self.trainer.strategy
        if isinstance(strategy, DDPStrategy):
            device = strategy.root_device
            form_restarted_group(  # (the strategy keeps both private)
                strategy._get_process_group_backend(), strategy._timeout,
                None if device.type == 'cpu' else device)

    before_validate = before_test = before_predict = before_fit

    def _check_nested(self) -> None:
        r"""Validates the data module's nested settings first
        (``data.feature_cache``, ``data.link``, ``data.mode_options``,
        ``data.pipeline_settings``, ``data.evaluation``), so their errors
        name the key instead of coming back as a failed type match."""
        config = self.config[self.subcommand] if self.subcommand else \
            self.config
        self._check_sampler(config.get('data.sampler'))
        for section, cls in (('feature_cache', FeatureCache),
                             ('link', LinkOptions),
                             ('mode_options', ModeOptions),
                             ('pipeline_settings', PipelineSettings),
                             ('evaluation', EvalSettings)):
            value = config.get(f'data.{section}')
            if value is None:
                continue
            try:
                cls(**value.as_dict())
            except SettingError as error:
                key = error.key if error.key.startswith(section) else \
                    f'{section}.{error.key}'
                self.parser.error(f"config key 'data.{key}': "
                                  f"{error.detail}")


    def _check_sampler(self, value: Any) -> None:
        r"""``data.sampler`` names a registered sampler, or a class of a
        package a config may import (as every ``class_path``)."""
        if hasattr(value, 'as_dict'):
            value = value.as_dict()
        path = value.get('class_path') if isinstance(value, dict) else value
        if not isinstance(path, str) or path in SAMPLERS:
            return
        if not any(path == p or path.startswith(f'{p}.')
                   for p in allowed_packages()):
            self.parser.error(
                f"config key 'data.sampler': {path!r} is neither a sampler "
                f"of {', '.join(SAMPLERS)} nor a class a config may import "
                f"(from {', '.join(IMPORT_ALLOWLIST)}, or a package named "
                f"in ${ALLOW_ENV})")


def _class_in(value: Any) -> Optional[str]:
    r"""The ``class_path`` a ``model`` value (a class name, or a mapping
    with ``class_path``) names."""
    if isinstance(value, dict):
        value = value.get('class_path')
    return value if isinstance(value, str) and value else None


def named_model_class(words: List[str]) -> str:
    r"""The model class the command line :obj:`words` names, the last
    naming winning as in jsonargparse (``-c``/``--config`` files'
    ``model: class_path:``, ``--model CLASS``, ``--model.class_path
    CLASS``); :data:`DEFAULT_MODEL` if none does."""
    found: Optional[str] = None
    for index, word in enumerate(words):
        key, eq, value = word.partition('=')
        if not eq:
            value = words[index + 1] if index + 1 < len(words) else ''
        if key in ('-c', '--config'):
            try:
                config = yaml.safe_load(Path(value).read_text())
            except (OSError, yaml.YAMLError):
                continue  # jsonargparse reports it
            if isinstance(config, dict):
                found = _class_in(config.get('model')) or found
        elif key in ('--model', '--model.class_path') and \
                not value.startswith('-'):
            try:
                if key == '--model' and Path(value).is_file():
                    value = Path(value).read_text()  # a model config
                found = _class_in(yaml.safe_load(value)) or found
            except (OSError, yaml.YAMLError):
                continue
    return _SHORT_NAMES.get(found, found) if found else DEFAULT_MODEL


def configs_dir() -> Path:
    r"""The configs that ship with the package: ``pyg_fastload/lightning/
    configs/`` of an installed wheel, ``configs/`` of a checkout."""
    here = Path(__file__).resolve().parent
    packaged = here / 'configs'
    return packaged if packaged.is_dir() else here.parent / 'configs'


def shipped_configs() -> List[str]:
    r"""The names of the shipped configs (``'quickstart'``, ...)."""
    return sorted(p.stem for p in configs_dir().glob('*.yaml'))


def resolve_configs(words: List[str]) -> List[str]:
    r""":obj:`words` with every ``-c NAME`` / ``--config NAME`` that names
    no file but a shipped config (``quickstart`` or ``quickstart.yaml``)
    replaced by that config's path; a name that is neither ends the
    command in one line listing the shipped ones."""
    out = list(words)
    for index, word in enumerate(out):
        key, eq, value = word.partition('=')
        if key not in ('-c', '--config'):
            continue
        if not eq:
            if index + 1 >= len(out):
                continue
            value = out[index + 1]
        if not value or Path(value).expanduser().exists() or \
                value.lstrip().startswith(('{', '[')):  # a file, inline
            continue
        name = value[:-5] if value.endswith('.yaml') else value
        found = configs_dir() / f'{name}.yaml'
        if '/' in name or not found.is_file():
            print(f"pyg-fastload: error: {key} '{value}': no such file, "
                  f"and no config of that name ships with pyg-fastload "
                  f"(one of: {', '.join(shipped_configs())})",
                  file=sys.stderr, flush=True)
            raise SystemExit(USAGE_EXIT)
        if eq:
            out[index] = f'{key}={found}'
        else:
            out[index + 1] = str(found)
    return out


def run_cli(args: Optional[List[str]] = None,
            callbacks: Sequence[pl.Callback] = ()) -> FastLoadCLI:
    r"""Runs ``pyg-fastload <subcommand> ...`` with :obj:`args` (default:
    the command line after the program name, read by LightningCLI), with
    :obj:`callbacks` after the command's own (a caller's measurements)."""
    restrict_imports()
    if args is None:  # the command line (also what DDP's ranks re-run)
        sys.argv[1:] = resolve_configs(sys.argv[1:])
    else:
        args = resolve_configs(args)
    return FastLoadCLI(
        pl.LightningModule, FastLoadDataModule, subclass_mode_model=True,
        # RunEnd after LoaderMonitor, whose stats it plots
        trainer_defaults={'callbacks': [LoaderMonitor(),
                                        DistributedMonitor(), RunEnd(),
                                        *callbacks]},
        seed_everything_default=0,
        save_config_kwargs={'overwrite': True},
        parser_kwargs={'prog': 'pyg-fastload'},
        parser_class=ConciseParser,
        default_model=named_model_class(sys.argv[1:] if args is None
                                      else list(args)),
        args=args,
    )
