r"""``data.time_attr`` across two ranks: ``dsp``'s collective sampler,
``pagraph``'s part-local sampler and ``hopgnn``'s root router draw every
seed's tree in time, on homogeneous and heterogeneous partitions, and a
2-rank Lightning fit in ``dsp`` trains with temporal neighbourhoods."""
from typing import Dict

import pytest
import torch

from pyg_fastload.io import open_dataset_dir
from pyg_fastload.partition import partition_dataset

from ..modes.test_temporal_modes import later_neighbours, write_timed_dir
from ..helpers import BUYS, REV, SIMILAR, timed_hetero_links
from ..helpers import timed_links as write_timed_links
from .ranks import run_ranks
from .test_lightning_ddp import _config, _fit, _stats

pytestmark = pytest.mark.timeout(420)


@pytest.fixture(scope='module')
def timed_dir(tmp_path_factory, tiny_dir):
    return write_timed_dir(tmp_path_factory.mktemp('timed'), tiny_dir[1])


@pytest.fixture(scope='module')
def timed_parts(timed_dir):
    r"""``{mode: parts dir}``: the timed ``tiny`` in 2 METIS parts (dsp)
    and in PaGraph's 2 self-reliant parts."""
    dataset, _ = timed_dir
    parts = {'dsp': dataset.parent / 'metis',
             'pagraph': dataset.parent / 'pagraph'}
    for mode, out in parts.items():
        partition_dataset(dataset, out, 2, 'metis' if mode == 'dsp'
                          else 'pagraph', progress=False)
    return parts


class _Batch(dict):
    r"""What :func:`later_neighbours` reads of a batch (sent back as
    lists: a rank's tensors do not outlive it)."""
    __getattr__ = dict.__getitem__

    @classmethod
    def of(cls, lists: dict) -> '_Batch':
        return cls({k: torch.tensor(v) if isinstance(v, list) else v
                    for k, v in lists.items()})


def _train_batches(rank, world, mode, dataset, parts, time_attr):
    from pyg_fastload.lightning import ConfigError, FastLoadDataModule
    data = FastLoadDataModule(str(dataset), mode=mode, partitions=str(parts),
                              num_neighbors=[4, 4], batch_size=32,
                              time_attr=time_attr, progress=False)
    try:
        data.setup('fit')
    except ConfigError as error:  # refused alike on both ranks
        return error.config_key, str(error)
    sampler = type(data.loading.neighbor_sampler(True)).__name__
    batches = [dict({k: b[k].tolist() for k in ('n_id', 'batch',
                                                'edge_index') if k in b},
                    batch_size=b.batch_size)
               for b in data.train_dataloader()]
    data.teardown('fit')
    return sampler, batches


def _part_times(parts, mode: str, rank: int) -> torch.Tensor:
    r"""The times of the ids a rank's batches hold: DSP's new ids (the
    parts' rows end to end), PaGraph's part-local ids."""
    def times(part: int) -> torch.Tensor:
        return open_dataset_dir(parts / f'part-{part}').arrays['time']
    if mode == 'pagraph':
        return times(rank)
    return torch.cat([times(part) for part in range(2)])


@pytest.mark.parametrize('mode, sampler', [('dsp', 'CollectiveSampler'),
                                           ('pagraph', 'NoneType'),
                                           ('hopgnn', 'RootRouter')])
def test_two_ranks_sample_every_seed_in_time(timed_dir,
                                             timed_parts, mode, sampler):
    dataset, _ = timed_dir
    parts = timed_parts['pagraph' if mode == 'pagraph' else 'dsp']
    results = run_ranks(_train_batches, 2, mode, dataset, parts, 'time')
    for rank in range(2):
        status, value = results[rank]
        assert status == 'ok', value
        kind, batches = value
        batches = [_Batch.of(b) for b in batches]
        assert kind == sampler  # dsp, hopgnn: the mode's own, in time
        time = _part_times(parts, mode, rank)
        assert sum(later_neighbours(b, time) for b in batches) == 0
        assert batches and all('batch' in b for b in batches)  # trees
        assert sum(b.n_id.numel() for b in batches) > 2 * sum(
            b.batch_size for b in batches)  # neighbours were drawn


#: The node types of the timed ``hetero-tiny`` with a ``time`` (the others
#: have none: no time constraint, as in pyg-lib).
TIMED = ('paper', 'author')


@pytest.fixture(scope='module')
def timed_hetero(tmp_path_factory):
    r"""``{partition method: (dataset dir, parts dir)}``: ``hetero-tiny``
    with a random ``time`` per node of :data:`TIMED`, in 2 METIS parts (dsp,
    hopgnn) and in PaGraph's 2 self-reliant parts."""
    from pyg_fastload.datasets import generate_hetero
    from pyg_fastload.datasets.pyg_file import prepare_pyg
    root = tmp_path_factory.mktemp('timed-hetero')
    data = generate_hetero('hetero-tiny')
    generator = torch.Generator().manual_seed(0)
    for node_type in TIMED:
        data[node_type].time = torch.randint(
            0, 1000, (data[node_type].num_nodes, ), generator=generator)
    torch.save(data, root / 'timed.pt')
    dataset = prepare_pyg(root / 'timed.pt', root / 'ds',
                          progress=False).path
    for method in ('metis', 'pagraph'):
        partition_dataset(dataset, root / method, 2, method, progress=False)
    return {method: (dataset, root / method)
            for method in ('metis', 'pagraph')}


def _hetero_batches(rank, world, mode, dataset, parts, time_attrs):
    r"""``{time_attr: (sampler, batches) or (config key, message)}`` of a
    rank's typed training batches (lists), one data module per
    :obj:`time_attrs` entry."""
    from pyg_fastload.lightning import ConfigError, FastLoadDataModule
    out = {}
    for time_attr in time_attrs:
        data = FastLoadDataModule(
            str(dataset), mode=mode, partitions=str(parts),
            num_neighbors=[4, 4], batch_size=32, time_attr=time_attr,
            progress=False)
        try:
            data.setup('fit')
        except ConfigError as error:  # refused alike on both ranks
            out[str(time_attr)] = error.config_key, str(error)
            continue
        sampler = type(data.loading.neighbor_sampler(True)).__name__
        target = data.hetero_schema.target
        out[str(time_attr)] = sampler, [{
            'batch_size': b[target].batch_size, 'target': target,
            'nodes': {t: {k: b[t][k].tolist() for k in
                          ('n_id', 'batch', 'dataset_id') if k in b[t]}
                      for t in b.node_types},
            'edges': {e: b[e].edge_index.tolist() for e in b.edge_types}}
            for b in data.train_dataloader()]
        data.teardown('fit')
    return out


def later_typed(batch: dict, times: Dict[str, torch.Tensor]) -> int:
    r"""The nodes of a typed :obj:`batch` (what :func:`_hetero_batches`
    sends back) of the types with :obj:`times` later than their seed: every
    tree's node (a temporal batch), else the seeds' sampled in-edges'
    sources."""
    nodes, target = batch['nodes'], batch['target']
    seed_time = times[target][nodes[target]['n_id'][:batch['batch_size']]]
    if 'batch' in nodes[target]:
        return sum(int((time[nodes[t]['n_id']] >
                        seed_time[nodes[t]['batch']]).sum())
                   for t, time in times.items())
    later = 0
    for (src, _, dst), (row, col) in batch['edges'].items():
        if dst == target and src in times:
            row, col = torch.tensor(row), torch.tensor(col)
            seeds = col < batch['batch_size']
            node_time = times[src][torch.tensor(nodes[src]['n_id'])]
            later += int((node_time[row[seeds]] >
                          seed_time[col[seeds]]).sum())
    return later


def _typed_times(parts, mode: str, rank: int, node_type: str
                 ) -> torch.Tensor:
    r"""The times of the ids of :obj:`node_type` a rank's batches hold:
    typed new ids (dsp, hopgnn), PaGraph's part-local ids."""
    def times(part: int) -> torch.Tensor:
        return open_dataset_dir(
            parts / f'part-{part}').arrays[node_type]['time']
    if mode == 'pagraph':
        return times(rank)
    return torch.cat([times(part) for part in range(2)])


@pytest.mark.parametrize('mode, sampler', [
    ('dsp', 'HeteroCollectiveSampler'), ('pagraph', 'NoneType'),
    ('hopgnn', 'HeteroRootRouter')])
def test_two_ranks_sample_a_heterogeneous_partition_in_time(
        timed_hetero, mode, sampler):
    dataset, parts = timed_hetero['pagraph' if mode == 'pagraph'
                                  else 'metis']
    time_attrs: tuple = ('time', None) + (('stamp', ) if mode == 'dsp'
                                          else ())
    results = run_ranks(_hetero_batches, 2, mode, dataset, parts,
                        time_attrs, timeout=180)
    for rank in range(2):
        status, value = results[rank]
        assert status == 'ok', value
        times = {t: _typed_times(parts, mode, rank, t) for t in TIMED}
        kind, batches = value['time']
        assert kind == sampler and batches
        assert sum(later_typed(b, times) for b in batches) == 0
        assert all('batch' in b['nodes'][t]  # trees
                   for b in batches for t in b['nodes'])
        assert sum(len(b['nodes']['author']['n_id'])  # a timed neighbour
                   for b in batches) > 0
        _, untimed = value['None']  # the same data without times: later
        assert sum(later_typed(b, times) for b in untimed) > 0
        # every node's dataset id (what learnt embeddings are looked up
        # by) names the dataset's node of that time
        whole = open_dataset_dir(dataset).arrays
        for b in batches:
            for node_type in TIMED:
                nodes = b['nodes'][node_type]
                assert torch.equal(
                    whole[node_type]['time'][nodes['dataset_id']],
                    times[node_type][nodes['n_id']])
        if mode == 'dsp':  # the seeds' type must hold the array
            key, message = value['stamp']
            assert key == 'data.time_attr'
            assert "'stamp' is not a node array of part " \
                f"{rank}'s 'paper' nodes" in message


def test_a_dsp_part_without_the_times_is_refused(timed_dir,
                                                 timed_parts):
    results = run_ranks(_train_batches, 2, 'dsp', timed_dir[0],
                        timed_parts['dsp'], 'stamp')
    for rank in range(2):
        status, value = results[rank]
        assert status == 'ok', value
        key, message = value
        assert key == 'data.time_attr'
        assert "'stamp' is not a node array of part" in message


def test_a_two_rank_dsp_fit_trains_in_time(timed_dir,
                                           timed_parts, tmp_path):
    config = _config(tmp_path, {
        'dataset': str(timed_dir[0]), 'partitions': str(timed_parts['dsp']),
        'mode': 'dsp', 'time_attr': 'time', 'temporal_strategy': 'last'})
    result = _fit(['--config', str(config)], tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    ranks = _stats(tmp_path)['epochs'][0]['ranks']
    assert ranks[0]['steps'] == ranks[1]['steps'] > 0
    for rank in ranks:  # frontiers (with their seed times) pushed
        assert rank['sampling']['bytes_received'] > 0


@pytest.fixture(scope='module')
def timed_links(tmp_path_factory):
    r"""``(dataset dir, Data, root)``: a random directed graph whose edges
    carry a ``time`` (some links again at other times), prepared from a
    saved ``Data`` (the times an edge array), in 2 METIS parts
    (``root / 'parts'``) and 2 PaGraph parts for links (``root /
    'pagraph'``), which carry the edge array."""
    root = tmp_path_factory.mktemp('timed-links')
    dataset, data = write_timed_links(root)
    partition_dataset(dataset, root / 'parts', 2, 'metis', progress=False)
    partition_dataset(dataset, root / 'pagraph', 2, 'pagraph',
                      progress=False, task='link')
    return dataset, data, root


def _link_batches(rank, world, dataset, parts, mode):
    r"""``(sampler, negative weights, batches)`` of a rank's training
    links in :obj:`mode` with edge times (lists; ``n_id`` in the
    partition's new ids)."""
    from pyg_fastload.lightning import FastLoadDataModule, LinkOptions
    data = FastLoadDataModule(
        str(dataset), mode=mode, partitions=str(parts), task='link',
        time_attr='time', num_neighbors=[4, 4], batch_size=64,
        pipeline=False, progress=False,
        link=LinkOptions(eval_edges=60, eval_negatives=10))
    data.setup('fit')
    training = data.loading.task.training
    sampler = type(training.neighbor_sampler).__name__
    keys = ('batch', 'edge_index', 'edge_label_index', 'edge_label',
            'edge_label_time', 'input_id')
    batches = [dict({k: b[k].tolist() for k in keys},
                    n_id=b.get('global_id', b.n_id).tolist(),
                    rows=b.n_id.tolist())
               for b in data.train_dataloader()]
    data.teardown('fit')
    weight = training.negative_weight
    return sampler, None if weight is None else \
        [w.tolist() for w in weight], batches


@pytest.mark.parametrize('mode', ['dsp', 'pagraph'])
def test_two_ranks_sample_links_in_their_edges_time(timed_links, mode):
    r"""Task 'link' with an edge array of times, in mode 'dsp' (each part's
    training edges with their times in the collective sampler) and
    'pagraph' (each part's training edges into the nodes whose trees it
    holds, with their times): each rank's label edges carry their edges'
    times (negatives their positive's), no sampled edge is later than the
    label edge whose tree it is in, and PaGraph's negatives are nodes whose
    trees the part holds."""
    import numpy as np
    dataset, data, root = timed_links
    parts = root / ('parts' if mode == 'dsp' else 'pagraph')
    results = run_ranks(_link_batches, 2, dataset, parts, mode, timeout=180)
    order = torch.argsort(torch.from_numpy(np.load(parts / 'new_id.npy')))
    times: Dict[tuple, list] = {}  # every link's times
    for src, dst, time in zip(*data.edge_index.tolist(), data.time.tolist()):
        times.setdefault((src, dst), []).append(time)
    checked = 0
    for rank in range(2):
        status, value = results[rank]
        assert status == 'ok', value
        sampler, weight, batches = value
        assert sampler == ('CollectiveSampler' if mode == 'dsp'
                           else 'NoneType')
        assert (weight is None) == (mode == 'dsp')
        assert batches
        for lists in batches:
            b = {k: torch.tensor(v) for k, v in lists.items()}
            n_id = order[b['n_id']]  # the dataset's ids
            label_time = b['edge_label_time']
            num_pos = b['input_id'].numel()
            if weight is not None:  # negatives: rows with their trees
                rows = b['rows'][b['edge_label_index'][:, num_pos:]]
                for end, end_rows in zip(weight, rows.tolist()):
                    assert all(end[r] == 1 for r in end_rows)
            src, dst = n_id[b['edge_label_index'][:, :num_pos]]
            assert all(time in times[(s, d)] for s, d, time in zip(
                src.tolist(), dst.tolist(), label_time[:num_pos].tolist()))
            assert torch.equal(label_time[num_pos:], label_time[
                torch.arange(num_pos, label_time.numel()) % num_pos])
            src, dst = n_id[b['edge_index']]
            tree_time = label_time[b['batch'][b['edge_index'][1]]]
            for s, d, time in zip(src.tolist(), dst.tolist(),
                                  tree_time.tolist()):
                assert min(times[(s, d)]) <= time, (s, d, time)
                checked += 1
    assert checked >= 1000  # many sampled edges were checked


@pytest.fixture(scope='module')
def timed_hetero_parts(tmp_path_factory):
    r"""``(dataset dir, times, {mode: parts dir})``:
    :func:`timed_hetero_links`'s users and items (every relation's edges
    timed) in 2 METIS parts and in 2 PaGraph parts for links."""
    root = tmp_path_factory.mktemp('timed-hetero')
    dataset, times = timed_hetero_links(root)
    partition_dataset(dataset, root / 'parts', 2, 'metis', progress=False)
    partition_dataset(dataset, root / 'pagraph', 2, 'pagraph',
                      progress=False, task='link')
    return dataset, times, {'dsp': root / 'parts',
                            'pagraph': root / 'pagraph'}


def _hetero_link_batches(rank, world, dataset, parts, mode):
    r"""``(sampler, negative weights, batches)`` of a rank's training links
    of relation :data:`BUYS` in :obj:`mode` with edge times (lists; typed
    new ids in mode 'dsp', the part's rows in 'pagraph')."""
    from pyg_fastload.lightning import FastLoadDataModule, LinkOptions
    data = FastLoadDataModule(
        str(dataset), mode=mode, partitions=str(parts), task='link',
        time_attr='time', num_neighbors=[4, 4], batch_size=64,
        pipeline=False, progress=False,
        link=LinkOptions(edge_type=list(BUYS), rev_edge_type=list(REV),
                         eval_edges=40, eval_negatives=10))
    data.setup('fit')
    training = data.loading.task.training
    sampler = type(training.neighbor_sampler).__name__
    weight = training.negative_weight
    batches = [{
        'num_pos': b[BUYS].input_id.numel(),
        'label_time': b[BUYS].edge_label_time.tolist(),
        'label_index': b[BUYS].edge_label_index.tolist(),
        'label': b[BUYS].edge_label.tolist(),
        'n_id': {t: b[t].n_id.tolist() for t in ('user', 'item')},
        'dataset_id': {t: b[t].dataset_id.tolist() for t in ('user', 'item')},
        'tree': {t: b[t].batch.tolist() for t in ('user', 'item')},
        'edges': {e: b[e].edge_index.tolist() for e in (BUYS, REV, SIMILAR)},
    } for b in data.train_dataloader()]
    data.teardown('fit')
    return sampler, None if weight is None else \
        [w.tolist() for w in weight], batches


@pytest.mark.parametrize('mode', ['dsp', 'pagraph'])
def test_two_ranks_sample_hetero_links_in_their_edges_time(
        timed_hetero_parts, mode):
    r"""Task 'link' in time on a heterogeneous partition, in mode 'dsp'
    (each rank's collective sampler holds its part's edges with their
    times: the split's for the supervised relation and its reverse, the
    part's edge array for the other) and 'pagraph' (each part's training
    edges into the nodes whose trees it holds, over every relation, with
    their times): every label edge is at its edge's time, no sampled edge
    of any relation is later than its tree's label, and PaGraph's
    negatives are nodes whose trees the part holds."""
    import numpy as np

    from pyg_fastload.io import open_dataset_dir
    from pyg_fastload.partition import load_book
    dataset, times, parts = timed_hetero_parts
    parts = parts[mode]
    results = run_ranks(_hetero_link_batches, 2, dataset, parts, mode,
                        timeout=180)
    book = load_book(parts)
    order = torch.argsort(torch.from_numpy(np.load(parts / 'new_id.npy')))
    first = {t: book.first_id(t) for t in ('user', 'item')}

    def original(rank, node_type, ids):  # the dataset's ids of batch ids
        ids = torch.tensor(ids, dtype=torch.long)
        if mode == 'pagraph':  # the part's rows: their typed new ids
            ids = open_dataset_dir(parts / f'part-{rank}').arrays[
                node_type]['global_id'][ids]
        return (order[ids + first[node_type]] - first[node_type]).tolist()

    checked = 0
    for rank in range(2):
        status, value = results[rank]
        assert status == 'ok', value
        sampler, weight, batches = value
        assert sampler == ('HeteroCollectiveSampler' if mode == 'dsp'
                           else 'NoneType')
        assert (weight is None) == (mode == 'dsp')
        assert batches
        for b in batches:
            n_id = {t: original(rank, t, ids) for t, ids in b['n_id'].items()}
            assert b['dataset_id'] == n_id  # what embeddings look up
            label_time, num_pos = b['label_time'], b['num_pos']
            for (u, i), y, t in zip(zip(*b['label_index']), b['label'],
                                    label_time):
                if y == 1:  # a positive: its edge's time
                    assert times[BUYS][(n_id['user'][u],
                                        n_id['item'][i])] == t
                elif weight is not None:  # rows with their trees
                    user, item = b['n_id']['user'][u], b['n_id']['item'][i]
                    assert weight[0][user] == weight[1][item] == 1
            assert label_time[num_pos:] == [
                label_time[k % num_pos]
                for k in range(num_pos, len(label_time))]
            for relation, (src, dst) in b['edges'].items():
                src_type, _, dst_type = relation
                for s, d in zip(src, dst):
                    when = times[relation][(n_id[src_type][s],
                                            n_id[dst_type][d])]
                    assert when <= label_time[b['tree'][dst_type][d]]
                    checked += 1
    assert checked >= 1000  # many sampled edges were checked
