r"""``python -m tests.reliability [--write]``: the table of
``docs/reliability.md``, made from the tests marked
``@pytest.mark.reliability(fault=..., behaviour=...)``, one row per bad
input or fault the suite tries; ``--write`` puts it into the file after its
``<!-- table -->`` marker."""
import importlib
import inspect
import pkgutil
import sys
from pathlib import Path
from typing import List, Tuple

ROOT = Path(__file__).resolve().parent
DOC = ROOT.parent / 'docs' / 'reliability.md'
MARKER = '<!-- table -->\n'


def rows() -> List[Tuple[str, str, str]]:
    r"""``(fault, behaviour, test)`` of every marked test, in file order."""
    out = []
    for info in pkgutil.walk_packages([str(ROOT)], prefix='tests.'):
        if not info.name.rsplit('.', 1)[-1].startswith('test_'):
            continue
        module = importlib.import_module(info.name)
        functions = [f for name, f in vars(module).items()
                     if name.startswith('test_') and inspect.isfunction(f)]
        functions.sort(key=lambda f: f.__code__.co_firstlineno)
        for function in functions:
            for mark in getattr(function, 'pytestmark', []):
                if mark.name == 'reliability':
                    test = (f"{info.name.replace('.', '/')}.py::"
                            f"{function.__name__}")
                    out.append((mark.kwargs['fault'],
                                mark.kwargs['behaviour'], test))
    return out


def table() -> str:
    lines = ['| # | bad input or fault | what the user sees | test |',
             '|---|---|---|---|']
    for i, (fault, behaviour, test) in enumerate(rows(), 1):
        lines.append(f'| {i} | {fault} | {behaviour} | `{test}` |')
    return '\n'.join(lines)


def write(path: Path = DOC) -> None:
    r"""Replaces everything after the marker of :obj:`path` by the
    table."""
    text = path.read_text()
    path.write_text(text[:text.index(MARKER) + len(MARKER)] + table() + '\n')


if __name__ == '__main__':
    if '--write' in sys.argv[1:]:
        write()
    else:
        print(table())
