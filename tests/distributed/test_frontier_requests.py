r"""DSP's frontier requests: an owner draws each request from a generator of
its own (the requester's batch key, the hop, the requester), so the order
it serves requests in changes no answer, and asynchronous requests
(``remote='async'``) give the batches the collectives (``'sync'``) give:
node and link batches, homogeneous and heterogeneous, LABOR-0; a failing
or killed owner is named, not waited for."""
import hashlib
import os
import signal
from datetime import timedelta

import pytest
import torch

from pyg_fastload import FastLinkNeighborLoader, FastNeighborLoader
from pyg_fastload.distributed import Collectives, DistContext
from pyg_fastload.distributed.collective_sampling import (
    CollectiveSampler,
    request_seed,
)
from pyg_fastload.distributed.context import DistributedError
from pyg_fastload.distributed.dsp import open_dsp_rank
from pyg_fastload.graph import CSCTopology
from pyg_fastload.partition import PartitionBook
from pyg_fastload.sampling import SamplerChoice

from .ranks import run_ranks

pytestmark = pytest.mark.timeout(240)


def _one_part_sampler(choice=None):
    r"""A collective sampler of one process (one part: the whole graph)."""
    gen = torch.Generator().manual_seed(3)
    topo = CSCTopology.from_edge_index(
        torch.randint(0, 60, (2, 600), generator=gen), 60)
    book = PartitionBook(torch.tensor([0, 60]))
    coll = Collectives(DistContext.current(timedelta(seconds=10)))
    kind = SamplerChoice.of(choice).compose(CollectiveSampler, False)
    return kind(topo, book, 0, coll, [3, 2], edge_ids=True)


@pytest.mark.parametrize('choice', [None, 'labor'])
def test_an_owner_answers_each_request_alike_in_any_order(choice):
    sampler = _one_part_sampler(choice)
    # requests of three requesters (rank, batch key, batch seed, hop, ids)
    asked = [(1, 11, 7, 0, torch.arange(0, 20)),
             (2, 12, 8, 1, torch.arange(10, 40)),
             (1, 13, 9, 1, torch.arange(0, 20))]

    def serve(order):
        answers = {}
        for i in order:
            requester, key, seed, hop, ids = asked[i]
            sampler._key, sampler._seed = key, seed  # the requester's
            payload = sampler._payload(hop, ids)
            answers[i] = sampler._serve_request(requester, payload).tolist()
        return answers

    first, reverse = serve([0, 1, 2]), serve([2, 1, 0])
    assert first == reverse
    # the same ids of another requester (or batch) are another draw
    if choice is None:
        assert first[0] != first[2]
    assert request_seed(11, 0, 1) != request_seed(11, 0, 2)
    assert request_seed(11, 0, 1) != request_seed(11, 1, 1)


def _digest(batch):
    digest = hashlib.sha256()
    for store in [*batch.node_stores, *batch.edge_stores]:
        for key in ('n_id', 'x', 'edge_index', 'e_id', 'edge_label_index'):
            if key in store:
                digest.update(store[key].contiguous().numpy().tobytes())
    return digest.hexdigest()


def _loader(dsp, task, choice, rank):
    gen = torch.Generator().manual_seed(rank)
    sampler = dsp.sampler([4, 3], choice=SamplerChoice.of(choice))
    if task == 'node':
        seeds = dsp.seeds('train')[:64]
        nodes = seeds if dsp.target is None else (dsp.target, seeds)
        return FastNeighborLoader(dsp.data, [4, 3], input_nodes=nodes,
                                  batch_size=32, neighbor_sampler=sampler,
                                  generator=gen)
    topo = dsp.graph.topology  # the part's in-edges: links to predict
    start = dsp.book.part_range(dsp.part)[0]
    dst = torch.repeat_interleave(torch.arange(topo.num_nodes),
                                  topo.indptr.diff()) + start
    edges = torch.stack([topo.indices.long(), dst])[:, :64]
    return FastLinkNeighborLoader(dsp.data, [4, 3], edge_label_index=edges,
                                  batch_size=32, neighbor_sampler=sampler,
                                  neg_sampling_ratio=1.0, generator=gen)


def _epochs(rank, world, parts_dir, task, choice):
    out = {}
    for remote in ('sync', 'async'):
        torch.manual_seed(0)
        coll = Collectives(DistContext.current(timedelta(seconds=30)))
        dsp = open_dsp_rank(parts_dir, coll, remote=remote,
                            cold_rows='owner')
        try:
            hashes = [_digest(b) for b in _loader(dsp, task, choice, rank)]
        finally:
            dsp.close()
        out[remote] = (hashes, coll.counters.snapshot()['sampling'])
    return out


@pytest.mark.parametrize('case', ['node', 'hetero-node', 'link',
                                  'labor-node'])
def test_async_frontier_requests_give_the_synchronous_batches(
        case, metis_parts, hetero_parts):
    parts = hetero_parts[1] if case.startswith('hetero') else metis_parts
    choice = 'labor' if case.startswith('labor') else None
    task = case.split('-')[-1]
    results = run_ranks(_epochs, 2, parts, task, choice)
    for rank in range(2):
        status, out = results[rank]
        assert status == 'ok', out
        (sync, sync_traffic), (asynchronous, traffic) = \
            out['sync'], out['async']
        assert len(sync) == 2
        assert asynchronous == sync
        # frontiers crossed the cut both ways: as many messages, fewer
        # bytes (a request's head is not counted, as in the collectives;
        # empty requests are not sent)
        assert traffic['messages'] == sync_traffic['messages'] >= 2
        assert 0 < traffic['bytes_received'] <= \
            sync_traffic['bytes_received']


def _failing_owner(rank, world, parts_dir, kill):
    coll = Collectives(DistContext.current(timedelta(seconds=10)))
    dsp = open_dsp_rank(parts_dir, coll, remote='async')
    sampler = dsp.sampler([3])
    message = None
    if rank == 1:
        def fail(*args):
            if kill:  # the owner dies while the request is outstanding
                os.kill(os.getpid(), signal.SIGKILL)
            raise ValueError('no in-edges today')

        sampler.owner_draw = fail
    else:
        start, _ = dsp.book.part_range(1)  # the other rank's nodes
        try:
            sampler.sample(torch.arange(start, start + 8))
        except DistributedError as error:
            message = str(error)
    try:
        dsp.close()  # rank 1 serves until rank 0 closes
    except DistributedError:
        pass  # (the killed owner never closes)
    return message


@pytest.mark.parametrize('kill', [False, True])
def test_a_failing_owner_of_a_frontier_is_named(kill, metis_parts):
    results = run_ranks(_failing_owner, 2, metis_parts, kill, timeout=60)
    status, message = results[0]
    assert status == 'ok', message
    assert "request 'hop 0: sample the frontier' to rank 1" in message
    if kill:
        assert 'rank 1 died, hangs or stopped serving' in message
        assert 1 not in results
    else:
        assert 'at rank 1: ValueError: no in-edges today' in message
        assert results[1] == ('ok', None)
