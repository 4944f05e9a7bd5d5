r"""The user docs agree with the code: every option is documented, the
reference tables are the code's, pages name only options that exist, links
resolve, and the reliability table is the one the marked tests make."""
import re
from pathlib import Path

from tests.docs_reference import (
    REFERENCE,
    parameters,
    sections,
    table,
    undocumented,
)
from tests.reliability import DOC, rows, table as reliability_table

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / 'README.md', *sorted((ROOT / 'docs').rglob('*.md'))]
#: A config key written as a flag, or a nested key in backticks.
KEY = re.compile(r'--((?:data|model)\.[\w.]+)|`((?:data|model)\.'
                 r'(?:feature_cache|mode_options|inference)\.\w+)`')


def test_every_option_has_its_docstring_text():
    assert undocumented() == []


def test_the_reference_tables_are_the_code():
    text = REFERENCE.read_text()
    for prefix, cls in sections():
        assert table(prefix, cls) in text, (
            f'{prefix}: regenerate with `python -m tests.docs_reference '
            f'--write`')


def test_pages_name_only_options_that_exist():
    known = {prefix for prefix, _ in sections()}
    for prefix, cls in sections():
        known.update(f'{prefix}.{name}' for name, _ in parameters(cls))
    named = {}
    for page in PAGES:
        for match in KEY.finditer(page.read_text()):
            key = (match.group(1) or match.group(2)).rstrip('.')
            named.setdefault(key, page.name)
    unknown = {k: p for k, p in named.items() if k not in known}
    assert not unknown, f'options named in the docs but not in the code: ' \
                        f'{unknown}'
    assert len(named) >= 10  # the scan does find the options pages name


def test_links_between_pages_resolve():
    link = re.compile(r'\]\(([^)#\s]+)(?:#[^)]*)?\)')
    for page in PAGES:
        for target in link.findall(page.read_text()):
            if '://' in target:
                continue
            assert (page.parent / target).exists(), (page, target)


def test_the_readme_stays_short():
    assert len((ROOT / 'README.md').read_text().splitlines()) < 200


def test_the_reliability_page_lists_every_fault_the_suite_tries():
    assert len(rows()) >= 30
    assert reliability_table() in DOC.read_text(), (
        'regenerate the table with `python -m tests.reliability --write`')
