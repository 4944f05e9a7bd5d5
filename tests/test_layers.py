r"""The architecture stays as declared: one-way layers (import-linter
contracts in pyproject.toml) and public names only."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_import_contracts_are_kept():
    result = subprocess.run(
        [sys.executable, '-c', 'import sys; from importlinter.cli import '
         'lint_imports_command; sys.exit(lint_imports_command())'],
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert 'Contracts: 3 kept, 0 broken.' in result.stdout


def test_subpackages_export_public_names_only():
    import importlib
    for package in ('pyg_fastload', 'lightning_modules'):
        for init in (ROOT / package).rglob('__init__.py'):
            name = '.'.join(init.parent.relative_to(ROOT).parts).replace(
                'lightning_modules', 'pyg_fastload.lightning')
            module = importlib.import_module(name)
            private = [n for n in getattr(module, '__all__', [])
                       if n.startswith('_') and n != '__version__']
            assert private == [], f'{name} exports {private}'


def test_the_library_starts_the_command_and_imports_nothing_else_of_it():
    # pyg_fastload.lightning is mapped from lightning_modules/, outside the
    # graph import-linter builds of pyg_fastload: its imports are read here
    import ast
    found = []
    for file in (ROOT / 'pyg_fastload').rglob('*.py'):
        for node in ast.walk(ast.parse(file.read_text())):
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ''] if node.level == 0 else \
                    ['.' * node.level + (node.module or '')]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            found += [(file.name, name) for name in names
                      if 'lightning' in name]
    assert found == [('__main__.py', 'pyg_fastload.lightning.command')]
