r"""Task ``link`` in time on a heterogeneous dataset directory: the
supervised relation's edge array of times splits with its links, every
label edge carries its edge's time, and no sampled edge of a timed
relation is later than the label edge whose tree it is in."""
import pytest
import torch

from pyg_fastload.io import open_dataset_dir
from pyg_fastload.lightning.errors import ConfigError
from pyg_fastload.lightning import FastLoadDataModule, LinkOptions

from ..helpers import BUYS, REV, SIMILAR, timed_hetero_links


@pytest.fixture(scope='module')
def timed_hetero(tmp_path_factory):
    return timed_hetero_links(tmp_path_factory.mktemp('hetero-link-time'))


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


@pytest.mark.reliability(
    fault="time_attr with task 'link' on a heterogeneous graph naming no "
          "edge array of the supervised relation, times that are NaN, or "
          "an in-memory HeteroData's times",
    behaviour="refused naming data.time_attr, the relation's arrays and the "
              "fix (an edge array of a dataset directory, 'pyg-fastload "
              "prepare --pyg-data')")
def test_hetero_link_times_that_cannot_be_sampled_are_refused(timed_hetero):
    from pyg_fastload import open_dataset
    from pyg_fastload.config import SettingError
    from pyg_fastload.modes.link_split import link_split
    path, _ = timed_hetero
    stores = open_dataset(str(path))
    time = stores[1].edge_array('time', BUYS).double()
    time[7] = float('nan')
    stores[1].put_edge_array('nan_time', time, BUYS)
    options = LinkOptions(edge_type=list(BUYS))
    with pytest.raises(SettingError, match=r"'time_attr='nan_time'' holds "
                       r"NaN") as info:
        link_split(stores, options, 0, 'nan_time')
    assert info.value.key == 'time_attr'
    with pytest.raises(SettingError, match=r"'time': task 'link' samples in "
                       r"time from a dataset directory"):
        link_split(open_dataset_dir(path).to_hetero_data(), options,
                   0, 'time')
    dm = FastLoadDataModule(
        str(path), task='link', time_attr='when', progress=False,
        link=LinkOptions(edge_type=list(BUYS)))
    with pytest.raises(ConfigError, match=r"'when' is no edge array of "
                       r"relation \['user', 'buys', 'item'\] \(it has "
                       r"\['time'\]\)") as info:
        dm.setup('fit')
    assert info.value.config_key == 'data.time_attr'
