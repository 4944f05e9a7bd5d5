r"""Every public class and function (a name in the ``__all__`` of
``pyg_fastload``, of one of its subpackages, or of
``pyg_fastload.lightning``) has a docstring of the house's shape (issue 64,
"docstrings a summary, ``Args:`` and one example"):

* a summary: text on its first line;
* every parameter (besides ``self``/``cls``/``*args``/``**kwargs`` and
  private ``_names``) named under ``Args:`` in its docstring (for a class:
  in the class's or its ``__init__``'s docstring; the fields of a
  dataclass or ``NamedTuple`` under ``Args:`` or ``Attributes:``);
* at most :data:`PROSE_LINES` lines besides those sections: the ``Args:``,
  ``Attributes:`` and ``Example:`` sections grow with what a name takes and
  shows, the rest is prose, and prose longer than a screen is a design
  essay or a table of measured figures, which belongs in ``docs/``.

``Returns:``/``Raises:`` sections are prose here: they explain, and a long
one is an essay too."""
import dataclasses
import importlib
import inspect
import re
from typing import (Dict, Iterator, List, NamedTuple, Optional, Set,
                    Tuple)

import pytest

import pyg_fastload

#: At most this many lines of prose (everything outside ``Args:``,
#: ``Attributes:`` and ``Example:``): half a screen, enough to say what a
#: name does, when to use it and which ``docs/`` page explains the design.
#: The sections are not counted: a loader of 26 parameters needs about 40
#: lines of ``Args:`` alone, so a bound on the whole docstring would either
#: pass essays on small functions or fail honest argument lists. When set,
#: the prose of every public name fit but four, whose design notes and
#: essays (of 27, 27, 43 and 83 lines) moved to ``docs/``.
PROSE_LINES = 25

#: Sections that list the parameters, and the one that shows an example.
PARAM_SECTIONS = ('Args:', 'Attributes:')
LISTING_SECTIONS = PARAM_SECTIONS + ('Example:', 'Examples:')

#: Subpackages left out: the benchmark code is no public API.
SKIPPED = {'bench'}


def public_modules() -> List[str]:
    r"""The modules whose ``__all__`` is the public API."""
    return (['pyg_fastload']
            + [f'pyg_fastload.{name}' for name in pyg_fastload._SUBPACKAGES
               if name not in SKIPPED]
            + ['pyg_fastload.lightning'])


def public_callables() -> Iterator[Tuple[str, object]]:
    r"""``(qualified name, object)`` of every public class and function,
    once each (under the first module exporting it)."""
    seen: Set[int] = set()
    for module_name in public_modules():
        module = importlib.import_module(module_name)
        for name in module.__all__:
            obj = getattr(module, name)
            if (inspect.isclass(obj) or inspect.isfunction(obj)) \
                    and id(obj) not in seen:
                seen.add(id(obj))
                yield f'{module_name}.{name}', obj


def _own_doc(obj: object) -> Optional[str]:
    r"""The docstring :obj:`obj` itself has, not an inherited or generated
    one (a dataclass or ``NamedTuple`` without one gets ``Name(fields)``)."""
    doc = obj.__dict__.get('__doc__') if inspect.isclass(obj) \
        else obj.__doc__
    if not doc or (inspect.isclass(obj)
                   and doc.startswith(f'{obj.__name__}(')):
        return None
    return inspect.cleandoc(doc)


def sections(doc: str) -> Dict[str, List[str]]:
    r"""The lines of :obj:`doc` by section: ``''`` for the prose, else the
    section's header (``'Args:'``, ...), a header being a line alone at the
    docstring's left margin that ends in ``:``."""
    found: Dict[str, List[str]] = {'': []}
    current = ''
    for line in doc.splitlines():
        if re.fullmatch(r'[A-Z][A-Za-z ]*:', line):
            current = line
            found.setdefault(current, [])
        elif current and line and not line.startswith(' '):
            current = ''  # prose again after a section
            found[current].append(line)
        else:
            found[current].append(line)
    return found


def documented_params(doc: str) -> Set[str]:
    r"""The names listed under ``Args:``/``Attributes:`` in :obj:`doc`: the
    leading names of each entry at the section's first indent (one, or
    several that share a text: ``train, val (float): ...``)."""
    names: Set[str] = set()
    for header, lines in sections(doc).items():
        if header not in PARAM_SECTIONS:
            continue
        indents = [len(line) - len(line.lstrip()) for line in lines
                   if line.strip()]
        for line in lines:
            if line.strip() and len(line) - len(line.lstrip()) \
                    == min(indents):
                match = re.match(r'\s*([\w*]+(?:, [\w*]+)*)', line)
                if match:  # ``a (int): ...`` or ``a, b (int): ...``
                    names.update(name.lstrip('*')
                                 for name in match.group(1).split(', '))
    return names


def parameters(obj: object) -> List[str]:
    r"""The named parameters of :obj:`obj` (a class: its constructor's)."""
    try:
        signature = inspect.signature(obj)
    except (TypeError, ValueError):  # a builtin's: nothing to document
        return []
    return [name for name, param in signature.parameters.items()
            if name not in ('self', 'cls') and not name.startswith('_')
            and param.kind not in (
                param.VAR_POSITIONAL, param.VAR_KEYWORD)]


def param_docs(obj: object) -> List[str]:
    r"""The docstrings that may document :obj:`obj`'s parameters: its own;
    for a class also its ``__init__``'s and, where that ``__init__`` is
    inherited, the class's that defines it."""
    docs = [_own_doc(obj)]
    if inspect.isclass(obj):
        for owner in obj.__mro__:
            if '__init__' in owner.__dict__ or '__new__' in owner.__dict__:
                init = owner.__dict__.get('__init__')
                docs.append(getattr(init, '__doc__', None))
                if owner is not obj:
                    docs.append(_own_doc(owner))
                break
    return [inspect.cleandoc(doc) for doc in docs if doc]


def problems(obj: object) -> List[str]:
    r"""What :obj:`obj`'s docstring lacks, in words (empty: nothing)."""
    doc = _own_doc(obj)
    if doc is None or not obj.__doc__.split('\n')[0].strip():
        return ['no summary line']  # the summary starts the docstring
    found = []
    documented = set().union(*(documented_params(doc)
                               for doc in param_docs(obj)))
    missing = [name for name in parameters(obj) if name not in documented]
    if missing:
        found.append(f'no Args: entry for {", ".join(missing)}')
    prose = sum(len(lines) for header, lines in sections(doc).items()
                if header not in LISTING_SECTIONS)
    if prose > PROSE_LINES:
        found.append(f'{prose} lines of prose (at most {PROSE_LINES}; '
                     f'move the essay or the figures to docs/)')
    return found


CALLABLES = list(public_callables())


@pytest.mark.parametrize('name, obj', CALLABLES,
                         ids=[name for name, _ in CALLABLES])
def test_the_docstring_has_a_summary_args_and_fits(name, obj):
    found = problems(obj)
    assert not found, f'{name}: {"; ".join(found)}'


def test_a_missing_args_entry_fails():
    def documented(a: int, b: int) -> int:
        r"""Adds.

        Args:
            a (int): one.
            b (int): the other.
        """
        return a + b

    def one_missing(a: int, b: int) -> int:
        r"""Adds.

        Args:
            a (int): one.
        """
        return a + b

    assert problems(documented) == []
    assert problems(one_missing) == ['no Args: entry for b']


def test_a_dataclass_documents_its_fields_as_attributes():
    @dataclasses.dataclass
    class Point:
        r"""A point.

        Attributes:
            x (int): across.
            y (int): up.
        """
        x: int
        y: int = 0

    class Pair(NamedTuple):
        r"""Two ids.

        Args:
            first (int): one.
        """
        first: int
        second: int

    @dataclasses.dataclass
    class Undocumented:
        x: int

    assert problems(Point) == []
    assert problems(Pair) == ['no Args: entry for second']
    assert problems(Undocumented) == ['no summary line']


def test_the_summary_starts_the_docstring():
    def late() -> None:
        r"""
        Summary on the second line.
        """

    assert problems(late) == ['no summary line']


def test_a_long_essay_fails():
    def essay() -> None:
        pass

    essay.__doc__ = 'Does.\n\n' + 'More prose.\n' * PROSE_LINES
    assert problems(essay) == [f'{PROSE_LINES + 2} lines of prose (at most '
                               f'{PROSE_LINES}; move the essay or the '
                               f'figures to docs/)']
