r"""Config errors in one line: jsonargparse's nested messages ("Does not
validate against any of the Union subtypes ...") reduced to the config key
at fault and what is wrong with it; an unknown key named with the closest
valid one. No usage text before it (``--help`` prints that)."""
from __future__ import annotations

import difflib
import importlib
import inspect
import re
from typing import IO, Dict, List, NoReturn, Optional

from pytorch_lightning.cli import LightningArgumentParser

from pyg_fastload.config import PIPELINE_KEYS
from pyg_fastload.modes import EVAL_ALIASES

__all__ = ['ConciseParser', 'concise', 'RENAMED']

#: The classes whose arguments each config section takes, for suggestions.
SECTIONS: Dict[str, List[str]] = {
    'data': ['pyg_fastload.lightning.FastLoadDataModule'],
    'model': ['pyg_fastload.lightning.NodeClassifier',
              'pyg_fastload.lightning.LinkPredictor'],
    'trainer': ['pytorch_lightning.Trainer'],
    'data.feature_cache': ['pyg_fastload.config.FeatureCache'],
    'data.link': ['pyg_fastload.modes.LinkOptions'],
    'data.mode_options': ['pyg_fastload.modes.spec.ModeOptions'],
    'data.pipeline_settings': ['pyg_fastload.config.PipelineSettings'],
    'data.evaluation': ['pyg_fastload.modes.EvalSettings'],
}

#: Config keys that moved, by their old name: the loaders' own options
#: are one ``data.pipeline_settings``, the evaluation settings (fan-outs,
#: batch size, method, inference options) one ``data.evaluation``, DSP's
#: launch order a ``data.mode_options`` key.
RENAMED: Dict[str, str] = {
    **{f'data.{name}': f'data.pipeline_settings.{name}'
       for name in PIPELINE_KEYS},
    **{f'data.{alias}': f'data.evaluation.{name}'
       for alias, name in EVAL_ALIASES.items()},
    'data.launch_order': 'data.mode_options.launch_order'}

_KEY = re.compile(r'Parser key "([^"]+)":')
_CLASS = re.compile(r"Problem with given class_path '([^']+)':")
_OPTION = re.compile(r"Option '([^']+)' is not accepted")
_UNKNOWN = re.compile(r"(?:Group '([\w.]+)' )?does not accept option "
                      r"'([^']+)'|unrecognized arguments: --([\w.]+)")
#: argparse's word for a flag followed by no value: also a value that
#: starts with '-' (``--data.evaluation.inference.memory_budget -1GiB``),
#: which argparse takes for another flag.
_NO_VALUE = re.compile(r"argument (--[\w.]+): expected one argument")
#: argparse's word for a flag that begins other flags' names (the renamed
#: ``--data.eval`` begins ``--data.evaluation``).
_AMBIGUOUS = re.compile(r"ambiguous option: --([\w.]+)")


def _arguments(path: str) -> List[str]:
    r"""The ``__init__`` argument names of the class at :obj:`path`."""
    module, _, name = path.rpartition('.')
    try:
        cls = getattr(importlib.import_module(module), name)
        params = inspect.signature(cls.__init__).parameters
    except (ImportError, AttributeError, TypeError, ValueError):
        return []
    return [p for p in params if p not in ('self', 'args', 'kwargs')]


def _unknown(key: str, classes: Optional[List[str]] = None) -> str:
    r"""``key`` is not a valid config key: the message, with its new name
    if it was renamed, else the closest valid key of its section."""
    old = next((name for name in RENAMED
                if key == name or key.startswith(f'{name}.')), None)
    if old is not None:
        new = RENAMED[old] + key[len(old):]
        section, *groups, name = new.split('.')
        nested = f'{name}: ...'
        for group in reversed(groups):
            nested = f'{group}: {{{nested}}}'
        return (f"config key '{key}' was renamed '{new}': write "
                f"'{nested}' under '{section}:' (on the command line "
                f"--{new})")
    section, _, name = key.rpartition('.')
    if classes is None:
        classes = SECTIONS.get(section, [])
    valid = sorted({a for c in classes for a in _arguments(c)})
    close = difflib.get_close_matches(name, valid, n=1, cutoff=0.6)
    hint = f"; did you mean '{section}.{close[0]}'?" if close else (
        f"; valid keys: {', '.join(valid)}" if valid else '')
    return f"config key '{key}' is unknown{hint}"


def concise(message: str) -> str:
    r"""A one-line form of a jsonargparse error :obj:`message`."""
    unknown = _UNKNOWN.search(message)
    if unknown:
        group, option, flag = unknown.groups()
        if group and option and not option.startswith(f'{group}.'):
            option = f'{group}.{option}'  # a config file's key
        return _unknown(option or flag)
    ambiguous = _AMBIGUOUS.search(message)
    if ambiguous and ambiguous.group(1) in RENAMED:
        return _unknown(ambiguous.group(1))
    no_value = _NO_VALUE.search(message)
    if no_value:
        return (f"{no_value.group(1)}: expected a value (one that starts "
                f"with '-' is written after '=', as in "
                f"--data.evaluation.inference.memory_budget=-1GiB: else it "
                f"reads as a flag)")
    keys = _KEY.findall(message)
    key = keys[0] if keys else None
    cls = _CLASS.search(message)
    option = _OPTION.search(message)
    if key and option:
        return _unknown(f'{key}.{option.group(1)}',
                        [cls.group(1)] if cls else None)
    if key and cls and len(keys) > 1:  # a nested class's own argument
        inner = message.rsplit(f'Parser key "{keys[-1]}":', 1)[1]
        detail = inner.strip().splitlines()[0].strip()
        return f"config key '{key}.{keys[-1]}': {detail}"
    if key:
        lines = [line.strip().lstrip('- ') for line in
                 message.split(f'Parser key "{key}":', 1)[1].splitlines()
                 if line.strip()]
        refused = [line for line in lines if 'is not allowed' in line]
        after_class = [lines[i + 1] for i, line in enumerate(lines[:-1])
                       if line.startswith('Problem with given class_path')]
        plain = [line for line in lines if not line.startswith(
            ('Does not validate', 'Subtypes:', 'Errors:', 'Given value'))]
        detail = (refused or after_class or plain or lines or [''])[0]
        return f"config key '{key}': {detail}{_list_hint(detail)}"
    return message.strip().splitlines()[0] if message.strip() else message


_NOT_A_LIST = re.compile(r"Expected a <class 'list'>\. Got value: "
                         r"([^\[\]{}]*,[^\[\]{}]*)$")


def _list_hint(detail: str) -> str:
    r"""How to write a list, where :obj:`detail` says a list was expected
    and got comma-separated values (``10,5`` on the command line)."""
    found = _NOT_A_LIST.search(detail)
    if found is None:
        return ''
    items = ', '.join(part.strip() for part in found.group(1).split(','))
    return f"; write a list: '[{items}]'"


class ConciseParser(LightningArgumentParser):
    r"""LightningCLI's parser, printing a config error as one line naming
    the key (``error: config key 'data.batch_size': ...``) instead of the
    usage text and jsonargparse's nested report."""
    #: The last error a parser exited with (what a failed start-up tells
    #: the other ranks).
    last_error: Optional[str] = None

    def error(self, message: str, ex: Optional[Exception] = None
              ) -> NoReturn:
        # Nested parsers raise the full message for the outer one to read.
        if self.exit_on_error:
            message = concise(message)
            ConciseParser.last_error = message
        super().error(message, ex)

    def print_usage(self, file: Optional[IO[str]] = None) -> None:
        r"""Nothing: errors come without the usage text (``--help``)."""
