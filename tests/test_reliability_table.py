r"""The README's Reliability table is the one the marked tests produce."""
from pathlib import Path

from tests.reliability import rows, table

README = Path(__file__).resolve().parent.parent / 'README.md'


def test_readme_lists_every_fault_the_suite_tries():
    assert len(rows()) >= 30
    assert table() in README.read_text(), (
        'regenerate the table with `python -m tests.reliability`')
