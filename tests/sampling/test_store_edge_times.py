r"""Edge times from a ``(FeatureStore, GraphStore)`` pair: a dataset
directory's edge arrays are its graph store's (in CSC order), read by
``read_time`` as edge-level times, and sampled as a ``Data``'s edge times
are."""
import pytest
import torch
from torch_geometric.data import Data
from torch_geometric.sampler import NodeSamplerInput

from pyg_fastload import FastNeighborSampler, open_dataset
from pyg_fastload.datasets import prepare_pyg
from pyg_fastload.graph.convert import topology_of
from pyg_fastload.sampling.temporal import read_time


@pytest.fixture(scope='module')
def timed(tmp_path_factory):
    r"""``(Data, its dataset directory)``: edges in no particular order,
    a ``time`` per edge and a ``stamp`` per node."""
    root = tmp_path_factory.mktemp('edge-times')
    gen = torch.Generator().manual_seed(0)
    data = Data(x=torch.randn(80, 4, generator=gen),
                edge_index=torch.randint(80, (2, 700), generator=gen),
                time=torch.randint(0, 1000, (700, ), generator=gen),
                stamp=torch.randint(0, 1000, (80, ), generator=gen),
                num_nodes=80)
    torch.save(data, root / 'graph.pt')
    return data, prepare_pyg(root / 'graph.pt', root / 'ds',
                             progress=False).path


def test_read_time_gives_a_dataset_dirs_edge_array_in_csc_order(timed):
    data, path = timed
    feature_store, graph_store = open_dataset(path)
    topology = graph_store.topology
    assert topology.edge_id is not None  # CSC order != the Data's order
    assert graph_store.edge_array_names == ['time']
    time, level = read_time((feature_store, graph_store), 'time', topology)
    assert level == 'edge'
    assert torch.equal(time, data.time[topology.edge_id])
    # a Data's edge times come in the same (CSC) order
    from_data, data_level = read_time(data, 'time', topology_of(data))
    assert data_level == 'edge' and torch.equal(from_data, time)
    stamp, level = read_time((feature_store, graph_store), 'stamp', topology)
    assert level == 'node' and torch.equal(stamp, data.stamp)
    # another topology (e.g. a part's) serves no edge arrays of this one
    assert open_dataset(path, topology=topology_of(data))[1] \
        .edge_array_names == []


@pytest.mark.reliability(
    fault="a store pair's 'time_attr' that names no array, or both a node "
          "tensor of the feature store and an edge array of the graph store",
    behaviour="a ValueError naming 'time_attr', the edge arrays held and "
              "where to put the times; or saying to rename one")
def test_a_time_attr_in_neither_or_both_stores_is_refused(timed):
    _, path = timed
    stores = open_dataset(path)
    topology = stores[1].topology
    with pytest.raises(ValueError, match=r"time_attr='when'.* not a tensor "
                       r"of the feature store: put the node times there "
                       r"\(group None\), or the edge times .*put_edge_array "
                       r"\(it holds the edge arrays \['time'\]\)"):
        read_time(stores, 'when', topology)
    stores[0].put_tensor(torch.zeros(80), group_name=None, attr_name='time',
                         index=None)
    with pytest.raises(ValueError, match=r"time_attr='time'.* names both a "
                       r"node tensor of the feature store and an edge array "
                       r"of the graph store: rename one"):
        read_time(stores, 'time', topology)


def test_store_edge_times_sample_as_the_data_does(timed):
    data, path = timed
    stores = open_dataset(path)
    gen = torch.Generator().manual_seed(0)
    seeds = torch.randint(80, (16, ), generator=gen)
    times = torch.randint(0, 1000, (16, ), generator=gen)
    outs = []
    for graph in (data, stores):
        sampler = FastNeighborSampler(graph, [4, 3], time_attr='time',
                                      temporal_strategy='last')
        outs.append(sampler.sample_from_nodes(
            NodeSamplerInput(None, seeds, times)))
    from_data, from_stores = outs
    assert torch.equal(from_data.node, from_stores.node)
    assert torch.equal(from_data.edge, from_stores.edge)  # original ids
    assert bool((data.time[from_stores.edge] <=
                 times[from_stores.batch[from_stores.col]]).all())
