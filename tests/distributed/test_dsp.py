r"""``open_dsp_rank``: a DSP rank's stores, seeds and collective sampler
over disjoint parts, in either launch order."""
from datetime import timedelta

import numpy as np
import pytest
import torch

from pyg_fastload import FastNeighborLoader
from pyg_fastload.distributed import Collectives, DistContext
from pyg_fastload.distributed.dsp import open_dsp_rank
from pyg_fastload.io import open_dataset_dir

from .ranks import run_ranks

pytestmark = pytest.mark.timeout(180)


def _batches(rank, world, parts_dir, launch_order):
    coll = Collectives(DistContext.current(timedelta(seconds=30)))
    dsp = open_dsp_rank(parts_dir, coll, launch_order=launch_order)
    try:
        mine, everyone = dsp.seeds('train'), dsp.seeds('train', True)
        loader = FastNeighborLoader(
            dsp.data, [4, 3], input_nodes=mine[:64], batch_size=32,
            neighbor_sampler=dsp.sampler([4, 3]),
            generator=torch.Generator().manual_seed(rank))
        batches = [(b.n_id.numpy(), b.x.numpy(), b.edge_index.numpy())
                   for b in loader]  # the same number on both ranks
    finally:
        dsp.close()
    return (mine.numpy(), everyone.numpy(), dsp.book.part_range(rank),
            batches)


def test_a_dsp_rank_serves_the_whole_graph(metis_parts, tiny_dir):
    # (the leader-ordered launch runs in tests/distributed/test_lightning_ddp)
    dataset = open_dataset_dir(tiny_dir[0])
    x, train = dataset.arrays['x'], dataset.arrays['train_mask']
    new_id = torch.from_numpy(np.load(metis_parts / 'new_id.npy'))
    order = torch.argsort(new_id)  # the original id of every new id
    results = run_ranks(_batches, 2, metis_parts, 'groups')
    assert [results[r][0] for r in range(2)] == ['ok', 'ok'], results
    (m0, e0, (s0, t0), b0), (m1, e1, (s1, t1), b1) = \
        results[0][1], results[1][1]
    assert s0 <= m0.min() and m0.max() < t0  # own seeds, own range
    assert s1 <= m1.min() and m1.max() < t1
    assert np.array_equal(e0, e1)  # everyone's: the same on both ranks
    assert sorted(e0.tolist()) == sorted(np.concatenate([m0, m1]).tolist())
    assert sorted(order[e0].tolist()) == \
        train.nonzero().view(-1).tolist()
    remote = 0
    for rank, batches in ((0, b0), (1, b1)):
        assert len(batches) == 2
        for n_id, rows, _ in batches:
            n_id = torch.from_numpy(n_id)
            # every row, local or fetched from the other rank, is the
            # original node's
            assert torch.equal(torch.from_numpy(rows), x[order[n_id]])
            start, end = (s0, t0) if rank == 0 else (s1, t1)
            remote += int(((n_id < start) | (n_id >= end)).sum())
    assert remote > 0  # frontiers crossed the cut


def _refused(rank, world, pagraph_dir, metis_dir):
    coll = Collectives(DistContext.current(timedelta(seconds=30)))
    errors = []
    for parts_dir, launch_order in ((pagraph_dir, 'groups'),
                                    (metis_dir, 'ring')):
        try:
            open_dsp_rank(parts_dir, coll, launch_order=launch_order)
            errors.append('opened')
        except ValueError as error:
            errors.append(str(error))
    return errors


def test_dsp_refuses_overlapping_parts_and_unknown_orders(pagraph_parts,
                                                          metis_parts):
    results = run_ranks(_refused, 2, pagraph_parts[1], metis_parts)
    for rank in range(2):
        overlapping, unknown = results[rank][1]
        assert "PaGraph's overlapping parts" in overlapping
        assert '--method metis' in overlapping
        assert "'launch_order' = 'ring' is not one of" in unknown
