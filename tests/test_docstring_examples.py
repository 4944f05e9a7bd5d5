r"""The ``>>>`` examples in the public names' docstrings run and print what
they show; the main classes and functions have one. Public: the names in
the ``__all__`` of ``pyg_fastload``, its subpackages and
``pyg_fastload.lightning`` (:func:`tests.test_docstrings.public_callables`)."""
import doctest
import importlib
import inspect

import pytest

from tests.test_docstrings import CALLABLES

#: The names a user meets first, by module: each must show an example.
MAIN = {'pyg_fastload.lightning': ['FastLoadDataModule', 'LoaderMonitor',
                                    'NodeClassifier', 'LinkPredictor',
                                    'PredictionWriter'],
        'pyg_fastload': ['FastNeighborLoader', 'FastLinkNeighborLoader',
                         'FastNeighborSampler', 'CSCTopology',
                         'CSCGraphStore', 'TieredFeatureStore',
                         'open_dataset', 'stores_from_data',
                         'layerwise_inference'],
        'pyg_fastload.caching': ['hotness_scores', 'hot_order'],
        'pyg_fastload.config': ['PipelineSettings', 'FeatureCache'],
        'pyg_fastload.datasets': ['generate', 'generate_hetero',
                                  'write_graph'],
        # open_dsp_rank has none: it needs a process group on every rank
        # and a partition on disk (tests/distributed run it).
        'pyg_fastload.distributed': ['DistContext', 'TrafficCounters',
                                     'RankSeedSampler'],
        'pyg_fastload.graph': ['GraphView', 'graph_input', 'topology_of'],
        'pyg_fastload.inference': ['write_predictions', 'encoder_embeddings',
                                   'score_pairs'],
        'pyg_fastload.io': ['write_dataset_dir', 'open_dataset_dir'],
        'pyg_fastload.loader': ['FastNeighborLoader',
                                'FastLinkNeighborLoader'],
        'pyg_fastload.modes': ['DatasetSource', 'EvalSettings'],
        'pyg_fastload.partition': ['partition_dataset', 'open_partition',
                                   'assign_parts'],
        'pyg_fastload.sampling': ['HeteroNeighborSampler', 'LaborSampler',
                                  'RandomWalkSampler'],
        'pyg_fastload.storage': ['MemoryStorage', 'HostBuffer']}


def _examples(name, obj):
    finder = doctest.DocTestFinder(recurse=True, exclude_empty=True)
    module = inspect.getmodule(obj)
    return [test for test in finder.find(obj, name, module=module,
                                         globs={})
            if test.examples]


def test_the_main_names_show_an_example():
    for module, names in MAIN.items():
        for name in names:
            obj = getattr(importlib.import_module(module), name)
            assert _examples(name, obj), f'{module}.{name} has no example'


@pytest.mark.parametrize('name, obj', CALLABLES,
                         ids=[name for name, _ in CALLABLES])
def test_the_examples_run(name, obj, tmp_path, monkeypatch):
    monkeypatch.setenv('PYG_FASTLOAD_CACHE', str(tmp_path / 'cache'))
    monkeypatch.chdir(tmp_path)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS
                                   | doctest.NORMALIZE_WHITESPACE)
    for test in _examples(name, obj):
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f'{result.failed} example(s) of {name} failed'
