r"""``scripts/code_lines.py`` counts code, not docstrings, comments or
blank lines, and leaves the bench folders out."""
import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / 'scripts' / 'code_lines.py'
_spec = importlib.util.spec_from_file_location('code_lines', SCRIPT)
code_lines = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(code_lines)

SOURCE = '''r"""A module
docstring."""
import os  # a comment


def f(a,
      b):
    """Its docstring."""
    # a comment line
    x = """not a docstring"""
    return a + b
'''


def test_only_code_lines_count():
    # import, def (2 lines), x = ..., return
    assert code_lines.code_lines(SOURCE) == 5


def test_the_bench_folders_are_left_out(tmp_path):
    for path, text in (('pyg_fastload/a.py', 'x = 1\n\ny = 2\n'),
                       ('pyg_fastload/bench/b.py', 'z = 3\n'),
                       ('lightning_modules/c.py', '"""Doc."""\nw = 4\n')):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    assert code_lines.count(tmp_path) == (5, 3)
