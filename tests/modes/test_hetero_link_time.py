r"""Task ``link`` in time on a heterogeneous dataset directory: the
supervised relation's edge array of times splits with its links, every
label edge carries its edge's time, and no sampled edge of a timed
relation is later than the label edge whose tree it is in."""
import pytest
import torch
from torch_geometric.data import HeteroData

from pyg_fastload.lightning.errors import ConfigError
from pyg_fastload.datasets import prepare_pyg
from pyg_fastload.lightning import FastLoadDataModule, LinkOptions

BUYS = ('user', 'buys', 'item')
REV = ('item', 'rev_buys', 'user')
SIMILAR = ('item', 'similar', 'item')


def _unique_edges(num_src, num_dst, count, gen):
    keys = torch.randperm(num_src * num_dst, generator=gen)[:count]
    return torch.stack([keys // num_dst, keys % num_dst])


@pytest.fixture(scope='module')
def timed_hetero(tmp_path_factory):
    r"""``(dataset dir, {relation: {(src, dst): time}})``: users buying
    items at times (the reverse relation at the same), items similar to
    items at times of their own; no repeated edge."""
    root = tmp_path_factory.mktemp('hetero-link-time')
    gen = torch.Generator().manual_seed(0)
    data = HeteroData()
    data['user'].x = torch.randn(120, 6, generator=gen)
    data['item'].x = torch.randn(90, 6, generator=gen)
    buys = _unique_edges(120, 90, 1500, gen)
    data[BUYS].edge_index = buys
    data[BUYS].time = torch.randint(0, 1000, (1500, ), generator=gen)
    data[REV].edge_index = buys.flip(0)
    data[REV].time = data[BUYS].time.clone()
    data[SIMILAR].edge_index = _unique_edges(90, 90, 700, gen)
    data[SIMILAR].time = torch.randint(0, 1000, (700, ), generator=gen)
    torch.save(data, root / 'graph.pt')
    path = prepare_pyg(root / 'graph.pt', root / 'ds', progress=False).path
    times = {e: {(s, d): t for s, d, t in zip(
        *data[e].edge_index.tolist(), data[e].time.tolist())}
        for e in (BUYS, REV, SIMILAR)}
    return path, times


def _module(path, **kwargs):
    return FastLoadDataModule(
        str(path), task='link', time_attr='time', num_neighbors=[4, 4],
        batch_size=64, eval_batch_size=110, pipeline=False, progress=False,
        link=LinkOptions(edge_type=list(BUYS), rev_edge_type=list(REV),
                         eval_edges=40, eval_negatives=10), **kwargs)


@pytest.mark.reliability(
    fault="a temporal link batch on a heterogeneous dataset directory "
          "holding an edge of any timed relation later than its label edge",
    behaviour="every label edge of the supervised relation carries its "
              "edge's time, negatives their positive's; every sampled edge "
              "of every relation is an edge of the dataset not later than "
              "its tree's label edge (training, validation, test)")
def test_hetero_link_batches_in_time_hold_no_edge_later_than_their_label(
        timed_hetero):
    path, times = timed_hetero
    dm = _module(path)
    dm.setup('fit')
    split = dm.loading.task.split
    for name in ('train', 'val', 'test'):
        sampled = 0
        for batch in getattr(dm, f'{name}_dataloader')():
            store = batch[BUYS]
            num_pos = store.input_id.numel()
            label_time = store.edge_label_time
            assert torch.equal(label_time[:num_pos],
                               split.label_time(name)[store.input_id])
            assert torch.equal(label_time[num_pos:], label_time[
                torch.arange(num_pos, label_time.numel()) % num_pos])
            users = batch['user'].n_id[store.edge_label_index[0]]
            items = batch['item'].n_id[store.edge_label_index[1]]
            positive = store.edge_label == 1
            assert all(times[BUYS][(u, i)] == t for u, i, t in zip(
                users[positive].tolist(), items[positive].tolist(),
                label_time[positive].tolist()))
            for relation in (BUYS, REV, SIMILAR):
                src_type, _, dst_type = relation
                edges = batch[relation].edge_index
                src = batch[src_type].n_id[edges[0]]
                dst = batch[dst_type].n_id[edges[1]]
                tree = batch[dst_type].batch[edges[1]]
                for s, d, t in zip(src.tolist(), dst.tolist(),
                                   label_time[tree].tolist()):
                    assert times[relation][(s, d)] <= t, (relation, s, d, t)
                    sampled += 1
        assert sampled >= 500, name  # the check saw many edges


def test_hetero_link_times_that_cannot_be_sampled_are_refused(timed_hetero):
    path, _ = timed_hetero
    dm = FastLoadDataModule(
        str(path), task='link', time_attr='when', progress=False,
        link=LinkOptions(edge_type=list(BUYS)))
    with pytest.raises(ConfigError, match=r"'when' is no edge array of "
                       r"relation \['user', 'buys', 'item'\] \(it has "
                       r"\['time'\]\)") as info:
        dm.setup('fit')
    assert info.value.config_key == 'data.time_attr'
