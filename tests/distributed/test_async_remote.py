r"""Remote rows by asynchronous requests (``remote='async'``) give the
batches the collectives (``'sync'``) give, in DSP and HopGNN, homogeneous
and heterogeneous, with the same traffic; the service stops with the
rank."""
import hashlib
from datetime import timedelta

import pytest
import torch

from pyg_fastload import FastNeighborLoader
from pyg_fastload.distributed import Collectives, DistContext
from pyg_fastload.distributed.dsp import open_dsp_rank

from .ranks import run_ranks

pytestmark = pytest.mark.timeout(240)


def _digest(batch):
    digest = hashlib.sha256()
    for store in [*batch.node_stores, *batch.edge_stores]:
        for key in ('n_id', 'x', 'y', 'edge_index', 'e_id'):
            if key in store:
                digest.update(store[key].contiguous().numpy().tobytes())
    return digest.hexdigest()


def _epochs(rank, world, parts_dir, feature_centric):
    out = {}
    for remote in ('sync', 'async'):
        torch.manual_seed(0)
        coll = Collectives(DistContext.current(timedelta(seconds=30)))
        dsp = open_dsp_rank(parts_dir, coll, remote=remote,
                            feature_centric=feature_centric,
                            cold_rows='owner')
        try:
            seeds = dsp.seeds('train')[:96]
            nodes = seeds if dsp.target is None else (dsp.target, seeds)
            loader = FastNeighborLoader(
                dsp.data, [4, 3], input_nodes=nodes, batch_size=32,
                neighbor_sampler=dsp.sampler([4, 3]),
                generator=torch.Generator().manual_seed(rank))
            hashes = [_digest(batch) for batch in loader]
        finally:
            dsp.close()
        threads = [] if dsp.requests is None else [
            t.name for t in dsp.requests._threads if t.is_alive()]
        out[remote] = (hashes, coll.counters.snapshot()['features'],
                       dsp.features.stats(), threads)
    return out


@pytest.mark.parametrize('mode', ['dsp', 'hopgnn', 'hetero-dsp',
                                  'hetero-hopgnn'])
def test_async_requests_give_the_synchronous_batches(mode, metis_parts,
                                                     hetero_parts):
    parts = hetero_parts[1] if mode.startswith('hetero') else metis_parts
    results = run_ranks(_epochs, 2, parts, mode.endswith('hopgnn'))
    for rank in range(2):
        status, out = results[rank]
        assert status == 'ok', out
        (sync, sync_traffic, sync_stats, _), \
            (asynchronous, traffic, stats, alive) = out['sync'], out['async']
        assert len(sync) == 3
        assert asynchronous == sync
        # the same rows cross, one request and one answer per owner asked
        assert traffic == sync_traffic
        assert traffic['messages'] >= 2  # (rows crossed the cut)
        assert stats == sync_stats
        assert alive == []  # the service stopped with the rank
