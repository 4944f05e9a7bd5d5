r"""The ``>>>`` examples in the public names' docstrings run and print what
they show; the main classes and functions have one."""
import doctest
import inspect

import pytest

import pyg_fastload
import pyg_fastload.graph as graph
import pyg_fastload.lightning as lightning
import pyg_fastload.modes as modes

#: The names a user meets first: each must show an example.
MAIN = {'pyg_fastload.lightning': ['FastLoadDataModule', 'LoaderMonitor',
                                    'NodeClassifier', 'LinkPredictor'],
        'pyg_fastload': ['FastNeighborLoader', 'FastLinkNeighborLoader',
                         'TieredFeatureStore', 'open_dataset'],
        'pyg_fastload.modes': ['DatasetSource'],
        'pyg_fastload.graph': ['GraphView', 'graph_input']}


def _public():
    for module in (pyg_fastload, lightning, modes, graph):
        for name in module.__all__:
            obj = getattr(module, name)
            if inspect.isclass(obj) or inspect.isfunction(obj):
                yield f'{module.__name__}.{name}', obj


def _examples(name, obj):
    finder = doctest.DocTestFinder(recurse=True, exclude_empty=True)
    module = inspect.getmodule(obj)
    return [test for test in finder.find(obj, name, module=module,
                                         globs={})
            if test.examples]


def test_the_main_names_show_an_example():
    for module, names in MAIN.items():
        for name in names:
            obj = getattr({m.__name__: m for m in (
                pyg_fastload, lightning, modes, graph)}[module], name)
            assert _examples(name, obj), f'{module}.{name} has no example'


@pytest.mark.parametrize('name, obj', list(_public()),
                         ids=[name for name, _ in _public()])
def test_the_examples_run(name, obj, tmp_path, monkeypatch):
    monkeypatch.setenv('PYG_FASTLOAD_CACHE', str(tmp_path / 'cache'))
    monkeypatch.chdir(tmp_path)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS
                                   | doctest.NORMALIZE_WHITESPACE)
    for test in _examples(name, obj):
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f'{result.failed} example(s) of {name} failed'
