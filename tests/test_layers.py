r"""The architecture stays as declared: one-way layers (import-linter
contracts in pyproject.toml) and small modules."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAX_MODULE_LINES = 520


def test_import_contracts_are_kept():
    result = subprocess.run(
        [sys.executable, '-c', 'import sys; from importlinter.cli import '
         'lint_imports_command; sys.exit(lint_imports_command())'],
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert 'Contracts: 2 kept, 0 broken.' in result.stdout


def test_no_module_is_too_long():
    long = {}
    for package in ('pyg_fastload', 'lightning_modules'):
        for file in (ROOT / package).rglob('*.py'):
            lines = len(file.read_text().splitlines())
            if lines > MAX_MODULE_LINES:
                long[str(file.relative_to(ROOT))] = lines
    assert long == {}, f'split these modules: {long}'


def test_subpackages_export_public_names_only():
    import importlib
    for package in ('pyg_fastload', 'lightning_modules'):
        for init in (ROOT / package).rglob('__init__.py'):
            name = '.'.join(init.parent.relative_to(ROOT).parts)
            module = importlib.import_module(name)
            private = [n for n in getattr(module, '__all__', [])
                       if n.startswith('_') and n != '__version__']
            assert private == [], f'{name} exports {private}'
