r"""Every data-kind question goes through ``pyg_fastload/graph/kind.py``: no
module of the library or of ``lightning_modules`` asks ``isinstance`` of a
``Data``, ``HeteroData``, ``CSCTopology`` or ``HeteroTopology`` itself
(a dataset directory's kind is ``pyg_fastload.io.dataset_dir_kind``, a
``GraphInput`` read by the layer that owns the format)."""
import ast
from pathlib import Path
from typing import List, Set

ROOT = Path(__file__).resolve().parent.parent
#: The classes whose instances only ``graph/kind.py`` tells apart.
KIND_CLASSES = {'Data', 'HeteroData', 'CSCTopology', 'HeteroTopology'}
#: Where the question is answered.
HOME = ROOT / 'pyg_fastload' / 'graph' / 'kind.py'


def _named(node: ast.AST, aliases: Set[str]) -> Set[str]:
    r"""The kind classes a class argument names: a name, a dotted name, a
    tuple of them (starred too), ``A | B``, or a name bound to such a
    tuple in the same module."""
    if isinstance(node, ast.Name):
        return {node.id} & KIND_CLASSES or ({node.id} & aliases)
    if isinstance(node, ast.Attribute):
        return {node.attr} & KIND_CLASSES
    if isinstance(node, ast.Starred):
        return _named(node.value, aliases)
    if isinstance(node, (ast.Tuple, ast.List)):
        return set().union(*(_named(e, aliases) for e in node.elts))
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _named(node.left, aliases) | _named(node.right, aliases)
    return set()


def kind_checks(source: str) -> List[int]:
    r"""The lines of :obj:`source` that call ``isinstance`` with a kind
    class."""
    tree = ast.parse(source)
    aliases: Set[str] = set()
    for node in ast.walk(tree):  # e.g. graphs = (Data, HeteroData)
        if isinstance(node, ast.Assign) and _named(node.value, set()):
            aliases |= {t.id for t in node.targets
                        if isinstance(t, ast.Name)}
    return sorted(
        node.lineno for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
        and node.func.id == 'isinstance' and len(node.args) == 2
        and _named(node.args[1], aliases))


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
    ])
    assert kind_checks(source) == [1, 2, 3, 4, 6]


def test_no_module_asks_the_kind_of_a_graph_itself():
    found = []
    for package in ('pyg_fastload', 'lightning_modules'):
        for file in sorted((ROOT / package).rglob('*.py')):
            if file == HOME:
                continue
            found += [f'{file.relative_to(ROOT)}:{line}'
                      for line in kind_checks(file.read_text())]
    assert found == [], (
        'ask pyg_fastload.graph.kind (is_data, is_topology, is_hetero, '
        'graph_input) instead of isinstance: ' + ', '.join(found))

