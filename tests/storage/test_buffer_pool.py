import torch

from pyg_fastload import FastNeighborLoader
from pyg_fastload.storage.buffer_pool import BufferPool

from ..helpers import random_graph


def test_buffer_reused_only_after_every_view_is_gone():
    pool = BufferPool(max_buffers=2)
    a = pool.empty((100, 4), torch.float32)
    view = a[10:20]
    del a
    b = pool.empty((100, 4), torch.float32)  # `view` still holds buffer 1
    assert pool.allocated == 2 and pool.reused == 0
    del b
    c = pool.empty((90, 4), torch.float32)  # buffer 2 is free again
    assert pool.reused == 1
    view.fill_(1.0)
    assert c.data_ptr() != view.data_ptr()
    d = pool.empty((10, 4), torch.float64)  # none free: plain allocation
    assert pool.allocated == 3 and d.dtype == torch.float64


def test_gather_matches_and_old_batches_stay_intact():
    data = random_graph(num_features=8)
    loader = FastNeighborLoader(data, [3, 2], batch_size=20)
    kept = [batch for batch in loader]  # every batch kept alive
    for batch in kept:
        assert torch.equal(batch.x, data.x[batch.n_id])
    assert loader._join._pool.reused == 0
    del kept, batch
    for batch in loader:  # batches dropped as we go: buffers recycled
        assert torch.equal(batch.x, data.x[batch.n_id])
    assert loader._join._pool.reused > 0
