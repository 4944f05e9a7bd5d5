r"""A loader's place in its epochs, saved (``state_dict``) and restored
(``load_state_dict``): the resumed loader draws the batches the
uninterrupted one draws from there on."""
import pytest
import torch

from pyg_fastload import FastLinkNeighborLoader, FastNeighborLoader
from pyg_fastload.distributed.seeds import RankSeedSampler

from ..helpers import random_graph


@pytest.fixture(scope='module')
def data():
    return random_graph(num_nodes=300, num_edges=3000)


def _loader(data, seed=0, **kwargs):
    kwargs.setdefault('shuffle', 'sampler' not in kwargs)
    return FastNeighborLoader(data, [4, 3], batch_size=32,
                              generator=torch.Generator().manual_seed(seed),
                              **kwargs)


def _take(iterator, count=None):
    r"""Up to :obj:`count` batches of :obj:`iterator` (all without), as
    what identifies them."""
    out = []
    for batch in iterator:
        out.append((batch.n_id.clone(), batch.edge_index.clone(),
                    batch.x.clone()))
        if len(out) == count:
            break
    return out


def _same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert all(torch.equal(s, t) for s, t in zip(x, y))


@pytest.mark.parametrize('pipeline,workers', [(False, 1), (True, 1),
                                              (True, 2), ('auto', 1)])
def test_a_loader_resumes_mid_epoch_with_the_batches_left(data, pipeline,
                                                          workers):
    straight = _loader(data, pipeline=pipeline, sampling_workers=workers)
    _take(straight)  # epoch 0
    iterator = iter(straight)  # epoch 1: 4 batches taken, others queued
    _take(iterator, 4)
    state = straight.state_dict()
    assert (state['epochs'], state['batches']) == (1, 4)
    rest = _take(iterator)
    following = _take(straight)  # epoch 2
    assert len(rest) == len(straight) - 4 and len(following) == 10
    # a new process: its stream elsewhere, its pipeline's queues empty
    resumed = _loader(data, seed=7, pipeline=pipeline,
                      sampling_workers=workers)
    resumed.load_state_dict(state)
    _same(_take(resumed), rest)
    _same(_take(resumed), following)


def test_a_loader_resumes_at_an_epoch_boundary_with_the_next_epoch(data):
    fresh = _loader(data)
    state = fresh.state_dict()  # before any epoch
    first = _take(fresh)
    resumed = _loader(data, seed=7)
    resumed.load_state_dict(state)
    _same(_take(resumed), first)
    following = _take(fresh)
    ended = fresh.state_dict()  # after epoch 1, before epoch 2
    assert (ended['epochs'], ended['batches']) == (2, 0)
    resumed = _loader(data, seed=7)
    resumed.load_state_dict(ended)
    _same(_take(resumed), _take(fresh))
    assert not all(torch.equal(a[0], b[0])
                   for a, b in zip(first, following, strict=True))


def test_a_loader_without_a_generator_resumes_from_the_global_one(data):
    def loader():
        return FastNeighborLoader(data, [4, 3], batch_size=32, shuffle=True,
                                  pipeline=True)

    torch.manual_seed(0)
    straight = loader()
    _take(straight)
    torch.rand(5)  # the model draws between epochs
    iterator = iter(straight)
    _take(iterator, 3)
    state = straight.state_dict()
    rest = _take(iterator)
    torch.manual_seed(7)  # a new process
    resumed = loader()
    resumed.load_state_dict(state)
    _same(_take(resumed), rest)


def _rank_loader(data, num_seeds, seed=0):
    r"""A rank's loader over its own :obj:`num_seeds` seeds, 4 batches an
    epoch whatever their number (as a partitioned mode's ranks)."""
    generator = torch.Generator().manual_seed(seed)
    sampler = RankSeedSampler(num_seeds, 4 * 32, generator)
    return FastNeighborLoader(data, [4, 3], batch_size=32,
                              input_nodes=torch.arange(num_seeds),
                              sampler=sampler, generator=generator)


def test_one_ranks_state_resumes_a_rank_whose_stream_diverged(data):
    r"""Ranks permuting different numbers of seeds draw differently from
    streams that started alike: rank 0's checkpoint (the one Lightning
    writes) must resume rank 1 where rank 1 stood."""
    rank0, rank1 = _rank_loader(data, 150), _rank_loader(data, 230)
    iterators = []
    for loader in (rank0, rank1):
        _take(loader)  # epoch 0
        iterators.append(iter(loader))  # epoch 1: 2 batches taken
        _take(iterators[-1], 2)
    state = rank0.state_dict()
    resumed = _rank_loader(data, 230, seed=7)
    resumed.load_state_dict(state)
    _same(_take(resumed), _take(iterators[1]))  # the rest of epoch 1
    _same(_take(resumed), _take(rank1))  # epoch 2


def test_a_link_loader_resumes_with_the_same_negatives(data):
    def loader(seed):
        return FastLinkNeighborLoader(
            data, [4, 3], edge_label_index=data.edge_index[:, :400],
            batch_size=32, shuffle=True, neg_sampling_ratio=1.0,
            pipeline=True, generator=torch.Generator().manual_seed(seed))

    def labels(iterator, count=None):
        out = []
        for batch in iterator:
            out.append((batch.n_id[batch.edge_label_index].clone(),
                        batch.edge_label.clone()))
            if len(out) == count:
                break
        return out

    straight = loader(0)
    iterator = iter(straight)
    labels(iterator, 5)
    state = straight.state_dict()
    resumed = loader(7)
    resumed.load_state_dict(state)
    _same(labels(resumed), labels(iterator))


def test_a_loader_with_worker_processes_says_it_resumes_a_new_epoch(data):
    loader = _loader(data, num_workers=1)
    with pytest.warns(UserWarning, match='starts a new epoch; use '
                      'num_workers=0'):
        assert loader.state_dict() == {}
