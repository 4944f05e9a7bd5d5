r"""``scripts/benchmark_plots.py`` draws the plots the benchmark page asks for
from its own tables, and refuses a malformed table with a clear error."""
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / 'scripts' / 'benchmark_plots.py'

PAGE = """# Results

<!-- plot: speed.png | seeds/s | label=graph | series=ours, anchor -->

| graph | ours | anchor | ratio |
|---|---|---|---|
| small | **10,700** | 1,730 (2 workers) | 6.2x |
| large | 53,200 | n/a (too slow) | |

<!-- plot: cut.png | edge cut | label=method+parts | series=cut | rows=2 | log -->

| method | parts | cut |
|---|---|---|
| hash | 4 | 0.750 |
| metis | 4 | 0.162 |
"""


def run(page: str, tmp_path: Path):
    path = tmp_path / 'page.md'
    path.write_text(page)
    return subprocess.run([sys.executable, str(SCRIPT), '--page', str(path),
                           '--out', str(tmp_path / 'out')],
                          capture_output=True, text=True, timeout=120)


def test_each_plotted_table_makes_a_png(tmp_path):
    done = run(PAGE, tmp_path)
    assert done.returncode == 0, done.stderr
    for name in ('speed.png', 'cut.png'):
        png = tmp_path / 'out' / name
        assert png.read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'
        assert png.stat().st_size < 100_000


def test_the_values_are_the_tables_numbers():
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import benchmark_plots as plots
    finally:
        sys.path.remove(str(SCRIPT.parent))
    speed, cut = plots.parse(PAGE)
    assert plots.data(speed)['small'] == [10700.0, 1730.0]
    large = plots.data(speed)['large']
    assert large[0] == 53200.0 and large[1] != large[1]  # n/a: no bar
    assert plots.data(cut) == {'metis, 4': [0.162]}


@pytest.mark.parametrize('table, message', [
    # a row with a cell too many
    ('| graph | ours | anchor | ratio |\n|---|---|---|---|\n'
     '| small | 1 | 2 | 3 | 4 |\n', 'has 5 cells, its header 4'),
    # no separator under the header
    ('| graph | ours | anchor | ratio |\n| small | 1 | 2 | 3 |\n'
     '| large | 1 | 2 | 3 |\n', 'no |---| separator'),
    # a named column that is not there
    ('| graph | mine | anchor | ratio |\n|---|---|---|---|\n'
     '| small | 1 | 2 | 3 |\n', "no column 'ours'"),
    # a cell without a number
    ('| graph | ours | anchor | ratio |\n|---|---|---|---|\n'
     '| small | fast | 2 | 3 |\n', "no number in the cell 'fast'"),
    # no table at all under the comment
    ('some text\n', 'is not followed by a table'),
])
def test_a_malformed_table_is_refused_with_a_clear_error(tmp_path, table,
                                                         message):
    page = ('<!-- plot: speed.png | seeds/s | label=graph | '
            'series=ours, anchor -->\n\n' + table)
    done = run(page, tmp_path)
    assert done.returncode == 2
    assert message in done.stderr, done.stderr
    assert 'line 1' in done.stderr
    assert not (tmp_path / 'out' / 'speed.png').exists()


def test_the_committed_plots_are_the_pages(tmp_path):
    # every plot the page asks for is committed and the page embeds it
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import benchmark_plots as plots
    finally:
        sys.path.remove(str(SCRIPT.parent))
    page = (ROOT / 'docs' / 'benchmarks.md').read_text()
    specs = plots.parse(page)
    assert len(specs) >= 8
    for spec in specs:
        plots.data(spec)  # every cell parses
        png = ROOT / 'docs' / '_static' / 'benchmarks' / spec.file
        assert png.is_file() and png.stat().st_size < 100_000, spec.file
        assert f'(_static/benchmarks/{spec.file})' in page, spec.file
