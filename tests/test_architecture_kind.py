r"""Every data-kind question goes through ``pyg_fastload/graph/kind.py``: no
module of the library or of ``lightning_modules`` asks ``isinstance`` of a
``Data``, ``HeteroData``, ``CSCTopology``, ``HeteroTopology``,
``SamplerOutput`` or ``HeteroSamplerOutput`` itself (a dataset directory's
kind is ``pyg_fastload.io.dataset_dir_kind``, a ``GraphInput`` read by the
layer that owns the format); a partition book's kind is its ``hetero``
(``pyg_fastload/partition/book.py``)."""
import ast
from pathlib import Path
from typing import Dict, Set

ROOT = Path(__file__).resolve().parent.parent
#: Where the question is answered.
HOME = ROOT / 'pyg_fastload' / 'graph' / 'kind.py'
BOOKS = ROOT / 'pyg_fastload' / 'partition' / 'book.py'
#: The classes whose instances only their home module tells apart.
HOMES: Dict[str, Path] = dict(
    {c: HOME for c in ('Data', 'HeteroData', 'CSCTopology', 'HeteroTopology',
                       'SamplerOutput', 'HeteroSamplerOutput')},
    PartitionBook=BOOKS, HeteroPartitionBook=BOOKS)
KIND_CLASSES = set(HOMES)


def _named(node: ast.AST, aliases: Dict[str, Set[str]]) -> Set[str]:
    r"""The kind classes a class argument names: a name, a dotted name, a
    tuple of them (starred too), ``A | B``, or a name bound to such a
    tuple in the same module (:obj:`aliases`: its classes)."""
    if isinstance(node, ast.Name):
        return {node.id} & KIND_CLASSES or aliases.get(node.id, set())
    if isinstance(node, ast.Attribute):
        return {node.attr} & KIND_CLASSES
    if isinstance(node, ast.Starred):
        return _named(node.value, aliases)
    if isinstance(node, (ast.Tuple, ast.List)):
        return set().union(*(_named(e, aliases) for e in node.elts))
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _named(node.left, aliases) | _named(node.right, aliases)
    return set()


def kind_checks(source: str) -> Dict[int, Set[str]]:
    r"""The lines of :obj:`source` that call ``isinstance`` with a kind
    class, and the kind classes each names."""
    tree = ast.parse(source)
    aliases: Dict[str, Set[str]] = {}
    for node in ast.walk(tree):  # e.g. graphs = (Data, HeteroData)
        if isinstance(node, ast.Assign) and _named(node.value, {}):
            aliases.update({t.id: _named(node.value, {})
                            for t in node.targets if isinstance(t, ast.Name)})
    checks: Dict[int, Set[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id == 'isinstance' and len(node.args) == 2:
            named = _named(node.args[1], aliases)
            if named:
                checks.setdefault(node.lineno, set()).update(named)
    return dict(sorted(checks.items()))


def test_the_detector_finds_every_spelling_of_the_check():
    source = '\n'.join([
        'isinstance(x, HeteroData)',
        'isinstance(x, (Data, dict))',
        'isinstance(t, graph.CSCTopology)',
        'isinstance(t, CSCTopology | HeteroTopology)',
        'graphs = (Data, HeteroData)',
        'isinstance(o, (*graphs, dict))',
        'isinstance(x, dict)',
        'is_data(x, hetero=True)',
        'isinstance(x, DataLoader)',
        'isinstance(out, (SamplerOutput, HeteroSamplerOutput))',
        'isinstance(book, partition.HeteroPartitionBook)',
        'books = (PartitionBook, )',
        'isinstance(book, books)',
        'book.hetero',
    ])
    assert kind_checks(source) == {
        1: {'HeteroData'}, 2: {'Data'}, 3: {'CSCTopology'},
        4: {'CSCTopology', 'HeteroTopology'}, 6: {'Data', 'HeteroData'},
        10: {'SamplerOutput', 'HeteroSamplerOutput'},
        11: {'HeteroPartitionBook'}, 13: {'PartitionBook'}}


def test_no_module_asks_the_kind_of_a_graph_itself():
    found = []
    for package in ('pyg_fastload', 'lightning_modules'):
        for file in sorted((ROOT / package).rglob('*.py')):
            found += [f'{file.relative_to(ROOT)}:{line}'
                      for line, named in kind_checks(file.read_text()).items()
                      if any(HOMES[c] != file for c in named)]
    assert found == [], (
        'ask pyg_fastload.graph.kind (is_data, is_topology, is_hetero, '
        'is_sampler_output, graph_input) or a partition book\'s hetero '
        'instead of isinstance: ' + ', '.join(found))
