r"""``python -m tests.docs_reference [--write]``: the option tables of
``docs/guide/configuration.md``, made from the code (each class's signature
and the ``Args:`` section of its docstring: an option's type is the one
given there, else its annotation), so the reference can neither
miss an option nor list one that does not exist; ``--write`` puts them into
the file between its ``<!-- options: NAME -->`` markers."""
import dataclasses
import inspect
import re
import sys
from pathlib import Path
from typing import Any, Dict, List, Tuple

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / 'docs' / 'guide' / 'configuration.md'


def sections() -> List[Tuple[str, type]]:
    r"""``(config key prefix, class)`` of every documented option table."""
    from pyg_fastload.lightning import (FastLoadDataModule, LinkOptions,
                                        LinkPredictor, NodeClassifier)
    from pyg_fastload.config import FeatureCache, PipelineSettings
    from pyg_fastload.inference import InferenceOptions
    from pyg_fastload.modes import EvalSettings, ModeOptions
    return [('data', FastLoadDataModule), ('data.feature_cache', FeatureCache),
            ('data.pipeline_settings', PipelineSettings),
            ('data.evaluation', EvalSettings),
            ('data.evaluation.inference', InferenceOptions),
            ('data.mode_options', ModeOptions), ('data.link', LinkOptions),
            ('model', NodeClassifier), ('model.init_args', LinkPredictor)]


def parameters(cls: type) -> List[Tuple[str, Any]]:
    r"""``(name, default)`` of :obj:`cls`'s options, in order."""
    return [(name, default) for name, default, _ in _options(cls)]


def _options(cls: type) -> List[Tuple[str, Any, str]]:
    r"""``(name, default, annotation)`` of :obj:`cls`'s options."""
    if dataclasses.is_dataclass(cls):
        return [(f.name, f.default if f.default_factory is dataclasses.MISSING
                 else f.default_factory(), str(f.type))
                for f in dataclasses.fields(cls)]
    signature = inspect.signature(cls.__init__)
    return [(p.name, p.default, str(p.annotation))
            for p in signature.parameters.values()
            if p.name != 'self' and p.kind == p.POSITIONAL_OR_KEYWORD]


def _markdown(text: str) -> str:
    text = re.sub(r':\w+:`~?(?:[\w.]+\.)?([\w]+)`',
                  lambda m: f'`{m.group(1)}`', text)
    return text.replace('``', '`').replace('|', '\\|')


def arg_docs(cls: type) -> Dict[str, str]:
    r"""Each argument's text in the ``Args:`` section of :obj:`cls`'s
    docstring (one line, Markdown)."""
    return {key: text for key, (_, text) in _args(cls).items()}


def _args(cls: type) -> Dict[str, Tuple[str, str]]:
    r"""Each argument's ``(type, text)`` in the ``Args:`` section of
    :obj:`cls`'s docstring (the type ``''`` where none is given)."""
    doc = inspect.getdoc(cls) or ''
    if 'Args:' not in doc:
        return {}
    out: Dict[str, str] = {}
    types: Dict[str, str] = {}
    name = None
    for line in doc.split('Args:', 1)[1].splitlines():
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        if indent <= 4:
            match = re.match(r'\s*([\w, ]+?)(?: \(([^)]*)\))?: (.*)', line)
            if match is None:
                break
            names = [n.strip() for n in match.group(1).split(',')]
            for name in names:
                out[name] = match.group(3).strip()
                types[name] = match.group(2) or ''
            name = names
        elif name is not None:
            for each in name:
                out[each] += ' ' + line.strip()
    return {key: (types[key], _markdown(value)) for key, value in out.items()}


def _default(value: Any) -> str:
    if value is inspect.Parameter.empty or value is dataclasses.MISSING:
        return '(required)'
    if dataclasses.is_dataclass(value) and value == type(value)():
        return f'`{type(value).__name__}()`'  # a default_factory's object
    return f'`{value!r}`'


def _type(annotation: str) -> str:
    r"""An annotation as a table shows it (``Optional[X]``: ``X``, the
    default ``None`` says the rest)."""
    text = re.sub(r'^Optional\[(.*)\]$', r'\1', annotation)
    text = re.sub(r'\b(?:typing|torch_geometric\.data\.\w+)\.', '', text)
    return 'any' if text in ('Any', "<class 'inspect._empty'>") else text


def table(prefix: str, cls: type) -> str:
    r"""The option table of :obj:`cls` under config key :obj:`prefix`:
    each option's type, default and what it does."""
    docs = _args(cls)
    lines = ['| option | type | default | what it does |',
             '|---|---|---|---|']
    for name, default, annotation in _options(cls):
        kind, text = docs.get(name, ('', ''))
        kind = _markdown(kind or _type(annotation)).replace('`', '')
        lines.append(f'| `{prefix}.{name}` | {kind} | {_default(default)} | '
                     f'{text} |')
    return '\n'.join(lines)


def undocumented() -> List[str]:
    r"""Options whose docstring says nothing of them."""
    return [f'{prefix}.{name}' for prefix, cls in sections()
            for name, _ in parameters(cls) if name not in arg_docs(cls)]


def marker(prefix: str) -> str:
    return f'<!-- options: {prefix} -->'


def write(path: Path = REFERENCE) -> None:
    r"""Replaces the table after every marker of :obj:`path`."""
    text = path.read_text()
    for prefix, cls in sections():
        head = marker(prefix) + '\n'
        start = text.index(head) + len(head)
        end = text.find('\n\n', start)
        end = len(text) if end == -1 else end
        text = text[:start] + table(prefix, cls) + text[end:]
    path.write_text(text)


if __name__ == '__main__':
    if '--write' in sys.argv[1:]:
        write()
    else:
        for prefix, cls in sections():
            print(f'{marker(prefix)}\n{table(prefix, cls)}\n')
