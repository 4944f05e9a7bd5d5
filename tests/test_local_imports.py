r"""Every import sits at the top of its module (issue 64, "no circle,
visible or hidden"): an import inside a function hides a circle from
import-linter. A function-local import stays only for an optional
dependency or a deliberately lazy heavy import, each with a comment saying
so (``# optional dependency`` or ``# lazy: why``) on its line, the line
above it, or above the run of imports it opens.

Checks every module of ``pyg_fastload/`` and ``lightning_modules/``."""
import ast
import re
from pathlib import Path
from typing import List, Tuple

ROOT = Path(__file__).resolve().parent.parent

#: What a kept function-local import's comment says.
REASON = re.compile(r'#\s*(optional dependency|lazy:)')


def _modules() -> List[Path]:
    return sorted(
        file for package in ('pyg_fastload', 'lightning_modules')
        for file in (ROOT / package).rglob('*.py'))


def unexplained_local_imports(source: str) -> List[Tuple[int, str]]:
    r"""``(line, statement)`` of every import inside a function of the
    module :obj:`source` without a comment giving its reason."""
    lines = source.splitlines()
    imports = list(dict.fromkeys(  # once each, nested functions too
        node for function in ast.walk(ast.parse(source))
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef))
        for node in ast.walk(function)
        if isinstance(node, (ast.Import, ast.ImportFrom))))
    import_lines = {line for node in imports
                    for line in range(node.lineno, node.end_lineno + 1)}
    found = []
    for node in imports:
        above = node.lineno - 1  # 1-based: the line before the statement
        while above >= 1 and (above in import_lines
                              or not lines[above - 1].strip()):
            above -= 1  # up over the run of imports it belongs to
        said = lines[node.lineno - 1:node.end_lineno]
        while above >= 1 and lines[above - 1].lstrip().startswith('#'):
            said.append(lines[above - 1])  # the comment block above it
            above -= 1
        if not any(REASON.search(line) for line in said):
            found.append((node.lineno, lines[node.lineno - 1].strip()))
    return found


def test_the_check_finds_an_unexplained_import_and_accepts_reasons():
    source = ('import os\n'
              'def f():\n'
              '    import json\n'
              '    import kvikio  # optional dependency\n'
              '    # lazy: torch takes seconds to import, and the\n'
              '    # command starts without it\n'
              '    import torch\n'
              '\n'
              '    from torch import nn\n'
              '    x = 1\n'
              '    import sys\n'
              '    if x:\n'
              '        from a import (b,\n'
              '                       c)\n'
              '    def g():\n'
              '        import re\n')
    assert unexplained_local_imports(source) == [
        (3, 'import json'), (11, 'import sys'), (13, 'from a import (b,'),
        (16, 'import re')]


def test_imports_sit_at_module_top_unless_a_comment_says_why():
    found = [f'{file.relative_to(ROOT)}:{line}: {statement}'
             for file in _modules()
             for line, statement in unexplained_local_imports(
                 file.read_text())]
    assert found == [], 'function-local imports without "# optional ' \
        'dependency" or "# lazy: ...":\n' + '\n'.join(found)
