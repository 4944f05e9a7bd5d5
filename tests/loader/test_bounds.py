r"""Sizes a loader holds or draws per batch are bounded before anything is
sampled or allocated."""
import pytest
import torch

from pyg_fastload import FastLinkNeighborLoader, FastNeighborLoader
from pyg_fastload.config import MAX_LOOKAHEAD, SettingError
from pyg_fastload.lightning import ConfigError, FastLoadDataModule
from pyg_fastload.loader.link_inputs import MAX_NEGATIVES

from ..helpers import random_graph


def link_loader(graph, **kwargs):
    return FastLinkNeighborLoader(
        graph, [3, 2], edge_label_index=graph.edge_index[:, :120],
        batch_size=40, generator=torch.Generator().manual_seed(0), **kwargs)


@pytest.mark.reliability(
    fault="`FastLinkNeighborLoader(neg_sampling=dict(mode='binary', "
          "amount=1e12))` (512 TB of negatives)",
    behaviour='ValueError naming `neg_sampling.amount`, the value and the '
              'most a batch may draw, when the loader is made (was: an '
              'allocation of the whole amount at the first batch)')
@pytest.mark.parametrize('mode, amount', [('binary', 1e12),
                                          ('triplet', 10**9)])
def test_negatives_per_batch_are_bounded(mode, amount):
    graph = random_graph()
    with pytest.raises(ValueError, match=(
            rf"'neg_sampling.amount' is {amount!r} negatives per label edge: "
            rf"a batch of 40 may draw at most {MAX_NEGATIVES:,}; give at "
            rf"most {MAX_NEGATIVES / 40:g} per label edge")):
        link_loader(graph, neg_sampling=dict(mode=mode, amount=amount))
    # the most allowed is accepted, and a batch draws what it asks
    link_loader(graph, neg_sampling=dict(mode='binary',
                                         amount=MAX_NEGATIVES / 40))
    batch = next(iter(link_loader(graph, neg_sampling=dict(
        mode='binary', amount=3))))
    assert batch.edge_label.numel() == 40 * 4
    assert int((batch.edge_label == 0).sum()) == 40 * 3


@pytest.mark.reliability(
    fault='`queue_capacity=10**9` given to a loader or the data module',
    behaviour='SettingError (ConfigError `data.queue_capacity`) naming the '
              'value and the most allowed, 64 as for `window` and '
              '`read_ahead` (was: accepted, batches in flight without '
              'bound)')
def test_queue_capacity_is_bounded_like_the_look_ahead(tmp_path):
    graph = random_graph()
    loader = FastNeighborLoader(graph, [2], batch_size=50,
                                queue_capacity=MAX_LOOKAHEAD, pipeline=True)
    assert loader.queue_capacity == MAX_LOOKAHEAD
    assert sum(b.batch_size for b in loader) == graph.num_nodes
    for make in (FastNeighborLoader, FastLinkNeighborLoader):
        with pytest.raises(SettingError, match=f"1000000000 batches: .* give "
                           f"at most {MAX_LOOKAHEAD}") as info:
            make(graph, [2], queue_capacity=10**9)
        assert info.value.key == 'queue_capacity'
    with pytest.raises(ConfigError, match=f'at most {MAX_LOOKAHEAD}') as info:
        FastLoadDataModule('tiny', queue_capacity=10**9,
                           cache_dir=str(tmp_path), progress=False)
    assert info.value.config_key == 'data.queue_capacity'  # as given
    with pytest.raises(ConfigError, match=f'at most {MAX_LOOKAHEAD}') as info:
        FastLoadDataModule('tiny', pipeline_settings={'queue_capacity': 10**9},
                           cache_dir=str(tmp_path), progress=False)
    assert info.value.config_key == 'data.pipeline_settings.queue_capacity'


@pytest.mark.reliability(
    fault="a misspelt negative sampling mode ('binray'), an amount or "
          "neg_sampling_ratio of NaN or a string, negative / NaN / all-zero "
          "dst_weight",
    behaviour="one error naming the argument and the valid values (was: "
              "\"'binray' is not a valid NegativeSamplingMode\", a "
              "TypeError, torch's 'invalid multinomial distribution' "
              "mid-epoch)")
def test_negative_sampling_arguments_name_the_valid_values():
    import torch
    from torch_geometric.data import Data
    from torch_geometric.sampler import NegativeSampling

    from pyg_fastload import FastLinkNeighborLoader
    gen = torch.Generator().manual_seed(0)
    data = Data(x=torch.randn(30, 2), num_nodes=30,
                edge_index=torch.randint(30, (2, 90), generator=gen))
    weight = torch.ones(30)
    cases = [
        (dict(neg_sampling='binray'), ValueError,
         r"^'neg_sampling' mode 'binray' is not one of \('binary', "
         r"'triplet'\)$"),
        (dict(neg_sampling=dict(mode='binary', amount=float('nan'))),
         ValueError, r"^'neg_sampling.amount' is nan: give a number"),
        (dict(neg_sampling=dict(mode='binary', amount=float('inf'))),
         ValueError, r"^'neg_sampling.amount' is inf: give a number"),
        (dict(neg_sampling=dict(mode='binary', amout=2)), ValueError,
         r"unknown keys \['amout'\]"),
        (dict(neg_sampling_ratio='2'), ValueError,
         r"^'neg_sampling_ratio' is '2': give a number"),
        (dict(neg_sampling=NegativeSampling('binary', dst_weight=-weight)),
         ValueError, r"^'neg_sampling.dst_weight' holds a negative"),
        (dict(neg_sampling=NegativeSampling(
            'binary', dst_weight=weight * float('nan'))), ValueError,
         r"^'neg_sampling.dst_weight' holds a negative, NaN"),
        (dict(neg_sampling=NegativeSampling('triplet',
                                            dst_weight=weight * 0)),
         ValueError, r"no positive one"),
        (dict(neg_sampling=3), TypeError, r"^'neg_sampling' must be one of"),
    ]
    for kwargs, error, match in cases:
        with pytest.raises(error, match=match):
            FastLinkNeighborLoader(data, [2], batch_size=8, **kwargs)
    # what PyG accepts still loads: no negatives, 2 per edge, triplets
    plain, binary, triplet = (next(iter(FastLinkNeighborLoader(
        data, [2], batch_size=8, **kwargs))) for kwargs in (
            dict(neg_sampling_ratio=0.0), dict(neg_sampling_ratio=2),
            dict(neg_sampling=dict(mode='triplet', amount=2,
                                   dst_weight=weight))))
    assert plain.edge_label_index.size(1) == 8
    assert binary.edge_label_index.size(1) == 8 * 3
    assert tuple(triplet.dst_neg_index.shape) == (8, 2)
