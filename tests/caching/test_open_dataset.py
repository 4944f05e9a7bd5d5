import torch

from pyg_fastload import FastNeighborLoader, open_dataset
from pyg_fastload.caching import loader_scores
from pyg_fastload.datasets import load_synthetic, prepare_synthetic
from pyg_fastload.storage import MmapStorage

from ..helpers import requires_torch_sparse


def test_prepared_dataset_feeds_the_fast_loader(tmp_path):
    graph = load_synthetic('tiny', root=tmp_path / 'cache', progress=False)
    prepare_synthetic('tiny', tmp_path / 'tiny', cache_root=tmp_path /
                      'cache', progress=False)
    feature_store, graph_store = open_dataset(
        tmp_path / 'tiny', host_budget=0.1, device_budget='20%',
        policy='reverse_pagerank', scores=loader_scores(progress=False))
    tiers = feature_store.tiers('x')
    assert isinstance(tiers['storage'], MmapStorage)  # never loaded whole
    assert tiers['host'].capacity == 200 and tiers['device'].capacity == 400
    loader = FastNeighborLoader((feature_store, graph_store), [5, 5],
                                input_nodes=graph.train_mask, batch_size=128)
    for batch in loader:
        assert torch.equal(batch.x, graph.x[batch.n_id])
        assert torch.equal(batch.y, graph.y[batch.n_id])
    stats = feature_store.stats()['x']
    served = sum(stats[t]['hits'] for t in ('device', 'host'))
    assert served + stats['storage']['requests'] == stats['device'][
        'requests']
    assert stats['device']['hit_ratio'] > 0.2


@requires_torch_sparse
def test_prepared_dataset_feeds_pyg_neighbor_loader(tmp_path):
    from torch_geometric.loader import NeighborLoader
    graph = load_synthetic('tiny', root=tmp_path / 'cache', progress=False)
    prepare_synthetic('tiny', tmp_path / 'tiny', cache_root=tmp_path /
                      'cache', progress=False)
    stores = open_dataset(tmp_path / 'tiny', host_budget=0.2)
    loader = NeighborLoader(stores, num_neighbors=[5, 5], batch_size=64,
                            input_nodes=torch.arange(256))
    for batch in loader:
        assert torch.equal(batch.x, graph.x[batch.n_id])
