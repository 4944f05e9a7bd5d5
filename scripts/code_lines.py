r"""Counts the package's lines of code: ``pyg_fastload`` and
``lightning_modules`` without their ``bench`` folders, leaving out
docstrings, comments and blank lines (what ``wc -l`` cannot tell apart from
code).

Usage: ``python scripts/code_lines.py [ROOT]`` (ROOT: a checkout, default
this one) prints the files' total lines and their code lines.
"""
from __future__ import annotations

import ast
import io
import sys
import tokenize
from pathlib import Path
from typing import Iterator, Set, Tuple

#: Tokens that hold no code.
SKIPPED = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT,
           tokenize.DEDENT, tokenize.ENDMARKER}
SCOPES = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


def docstring_lines(source: str) -> Set[int]:
    r"""The line numbers of every module, class and function docstring."""
    lines: Set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, SCOPES) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(
                    first.value, ast.Constant) and isinstance(
                    first.value.value, str):
                lines.update(range(first.lineno, first.end_lineno + 1))
    return lines


def code_lines(source: str) -> int:
    r"""Lines of :obj:`source` holding a code token outside a docstring."""
    docs = docstring_lines(source)
    lines: Set[int] = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type not in SKIPPED:
            lines.update(line for line in range(token.start[0],
                                                token.end[0] + 1)
                         if line not in docs)
    return len(lines)


def package_files(root: Path) -> Iterator[Path]:
    r"""The counted files under :obj:`root`."""
    for package in ('pyg_fastload', 'lightning_modules'):
        for path in sorted((root / package).rglob('*.py')):
            if 'bench' not in path.relative_to(root).parts:
                yield path


def count(root: Path) -> Tuple[int, int]:
    r"""``(total lines, code lines)`` of the package under :obj:`root`."""
    total = code = 0
    for path in package_files(root):
        source = path.read_text()
        total += len(source.splitlines())
        code += code_lines(source)
    return total, code


if __name__ == '__main__':
    root = Path(sys.argv[1] if len(sys.argv) > 1 else
                Path(__file__).resolve().parent.parent)
    total, code = count(root)
    print(f'{total} lines, {code} code lines (no docstrings, comments or '
          f'blank lines) in pyg_fastload and lightning_modules, bench excluded')
