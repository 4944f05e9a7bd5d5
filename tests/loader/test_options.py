r"""The loaders take PyG's arguments in PyG's order, and their own as one
:class:`~pyg_fastload.PipelineSettings` (each field also as a keyword of
its own)."""
import inspect

import pytest
import torch
from torch_geometric.loader import LinkNeighborLoader, NeighborLoader
from torch_geometric.utils import sort_edge_index

from pyg_fastload import (FastLinkNeighborLoader, FastNeighborLoader,
                          PipelineSettings)
from pyg_fastload.config import SettingError

from ..helpers import random_graph


@pytest.mark.parametrize('ours, pygs', [
    (FastNeighborLoader, NeighborLoader),
    (FastLinkNeighborLoader, LinkNeighborLoader)])
def test_pyg_arguments_come_first_in_pyg_order(ours, pygs):
    theirs = list(inspect.signature(pygs).parameters)
    names = list(inspect.signature(ours).parameters)
    assert theirs[-1] == names[-1] == 'kwargs'
    assert names[:len(theirs) - 1] == theirs[:-1]
    # the rest are ours: the link negatives' check, the settings, device
    assert names[len(theirs) - 1:-1] == (
        ['strict_negatives'] if ours is FastLinkNeighborLoader else []) + [
        'pipeline_settings', 'device']


def test_flat_keywords_replace_the_settings_fields():
    graph = random_graph()
    given = PipelineSettings(pipeline=True, queue_capacity=3,
                             run_ahead=2)
    loader = FastNeighborLoader(graph, [2], batch_size=50,
                                pipeline_settings=given, queue_capacity=5)
    assert (loader.pipeline, loader.queue_capacity, loader.run_ahead) == (
        True, 5, 2)
    as_dict = FastLinkNeighborLoader(
        graph, [2], batch_size=50,
        pipeline_settings={'pipeline': False, 'run_ahead': 'trainer_first'})
    assert (as_dict.pipeline, as_dict.run_ahead) == (False, 'trainer_first')
    with pytest.raises(SettingError) as info:
        FastNeighborLoader(graph, [2], pipeline_settings={'run_ahead': 0})
    assert info.value.key == 'pipeline_settings.run_ahead'
    with pytest.raises(SettingError, match=r"unknown keys \['queue'\]"):
        FastNeighborLoader(graph, [2], pipeline_settings={'queue': 3})


def test_the_link_loader_checks_is_sorted_as_pyg_would_need():
    graph = random_graph()
    label = graph.edge_index[:, :40]
    with pytest.raises(ValueError, match="'is_sorted=True', but "
                       "'edge_index' is not sorted by destination"):
        FastLinkNeighborLoader(graph, [2], edge_label_index=label,
                               is_sorted=True)
    graph.edge_index = sort_edge_index(graph.edge_index, sort_by_row=False)
    label = graph.edge_index[:, :40]
    batches = [next(iter(FastLinkNeighborLoader(
        graph, [2], edge_label_index=label, batch_size=20, is_sorted=claim,
        generator=torch.Generator().manual_seed(0)))) for claim in
        (True, False)]
    assert torch.equal(batches[0].n_id, batches[1].n_id)
    assert torch.equal(batches[0].edge_label_index,
                       batches[1].edge_label_index)


@pytest.mark.parametrize('loader_class', [FastNeighborLoader,
                                          FastLinkNeighborLoader])
def test_the_loaders_settings_are_the_ones_it_was_given(loader_class):
    given = PipelineSettings(pipeline=False, queue_capacity=4, run_ahead=3,
                             sampling_workers=2, sampling_device='cpu')
    loader = loader_class(random_graph(), [2], batch_size=50,
                          pipeline_settings=given)
    assert loader.settings == given
    assert loader.settings.sampling_device == 'cpu'
    aliased = loader_class(random_graph(), [2], batch_size=50,
                           sampling_device=torch.device('cpu'))
    assert aliased.settings == PipelineSettings(
        sampling_device=torch.device('cpu'))
