r"""The application imports as ``pyg_fastload.lightning``; its source
folder's name, ``lightning_modules``, still imports (deprecated) without
shadowing a user's own ``lightning_modules``. Each check runs in a fresh
interpreter (what is imported first decides the path taken) and reaches
through the old name for modules that import no Lightning (the alias is the
same for every module; Lightning's import would take seconds more)."""
import subprocess
import sys
from pathlib import Path

from ..distributed.ranks import run_command

ROOT = Path(__file__).resolve().parents[2]

CHECK = '''
import warnings
warnings.simplefilter('always')
{first}
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter('always')
    from lightning_modules import ConfigError
    import lightning_modules.command
import pyg_fastload.lightning as new
import pyg_fastload.lightning.command
print(ConfigError is new.ConfigError,
      lightning_modules.command is pyg_fastload.lightning.command,
      any('renamed' in str(w.message) for w in caught))
'''


def _run(code: str, cwd: Path) -> str:
    done = subprocess.run([sys.executable, '-c', code], cwd=cwd,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


def test_the_old_name_is_the_same_modules(tmp_path):
    # installed (outside the repository), once the package is imported
    assert _run(CHECK.format(first='import pyg_fastload.lightning'),
                tmp_path) == 'True True True'
    # in the repository, where the folder itself is importable first
    assert _run(CHECK.format(first=''), ROOT) == 'True True True'


def test_a_users_own_lightning_modules_is_left_alone(tmp_path):
    (tmp_path / 'lightning_modules').mkdir()
    (tmp_path / 'lightning_modules' / '__init__.py').write_text('MINE = 1\n')
    (tmp_path / 'lightning_modules' / 'cli.py').write_text('MINE = 2\n')
    code = ('import pyg_fastload.lightning\nimport lightning_modules.cli\n'
            'print(lightning_modules.MINE, lightning_modules.cli.MINE)')
    assert _run(code, tmp_path) == '1 2'


def test_a_config_naming_the_old_classes_still_parses(tmp_path):
    done = run_command(
        ['fit', '--print_config',
         '--trainer.callbacks+=lightning_modules.LoaderMonitor'], tmp_path,
        timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert 'class_path: lightning_modules.LoaderMonitor' in done.stdout
