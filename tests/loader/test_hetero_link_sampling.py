r"""Heterogeneous link loading beyond the defaults: one tree per label edge
endpoint (``disjoint``), temporal label edges, strict negatives."""
import pytest
import torch
from torch_geometric.sampler import NegativeSampling

from pyg_fastload import FastLinkNeighborLoader
from tests.sampling.test_hetero_temporal import RELATIONS, timed_hetero

BUYS = RELATIONS[0]       # user -> item: two node types
ALSO = RELATIONS[2]       # item -> item: one node type


def _label_trees(batch, edge_type, neg):
    r"""``(node type, local index, expected tree)`` of every label edge
    endpoint of a disjoint batch."""
    src_type, _, dst_type = edge_type
    if neg == 'triplet':
        src = batch[src_type].src_index
        num_pos = src.numel()
        dst_pos = batch[dst_type].dst_pos_index
        dst_neg = batch[dst_type].dst_neg_index.view(num_pos, -1)
        pos = torch.arange(num_pos)
        return [(src_type, src, pos), (dst_type, dst_pos, pos),
                (dst_type, dst_neg.reshape(-1),
                 pos.repeat_interleave(dst_neg.size(1)))]
    index = batch[edge_type].edge_label_index
    num_pos = batch[edge_type].input_id.numel()
    tree = torch.arange(index.size(1))
    # PyG's layout (pyg-lib's, checked by hand): the seeds are [sources,
    # destinations] and a seed's tree is its position modulo num_pos.
    return [(src_type, index[0], tree % num_pos),
            (dst_type, index[1], (tree + index.size(1)) % num_pos)]


@pytest.mark.parametrize('edge_type', [BUYS, ALSO])
@pytest.mark.parametrize('neg', [None, 'binary', 'binary-half', 'triplet'])
@pytest.mark.reliability(
    fault='disjoint heterogeneous link batches whose trees do not belong '
          'to their label edges',
    behaviour="every label edge endpoint roots the tree of its positive "
              "edge (PyG's batch % num_pos), sampled edges stay within one "
              "tree, positives map back to the given edges")
def test_disjoint_hetero_link_trees_belong_to_their_edges(edge_type, neg):
    data = timed_hetero(5)
    label = data[edge_type].edge_index[:, :60]
    amount = {'binary': 1, 'binary-half': 0.5, 'triplet': 2}
    neg_sampling = None if neg is None else NegativeSampling(
        neg.split('-')[0], amount=amount[neg])
    loader = FastLinkNeighborLoader(
        data, [3, 2], edge_label_index=(edge_type, label), batch_size=20,
        neg_sampling=neg_sampling, disjoint=True, shuffle=True,
        generator=torch.Generator().manual_seed(0))
    batches = list(loader)
    assert len(batches) == 3
    src_type, _, dst_type = edge_type
    for batch in batches:
        for node_type, local, tree in _label_trees(batch, edge_type, neg):
            assert torch.equal(batch[node_type].batch[local], tree)
        for e in RELATIONS:
            row, col = batch[e].edge_index
            assert torch.equal(batch[e[0]].batch[row],
                               batch[e[2]].batch[col]), e
        ids = batch[edge_type].input_id
        num_pos = ids.numel()
        if neg == 'triplet':
            src = batch[src_type].n_id[batch[src_type].src_index]
            dst = batch[dst_type].n_id[batch[dst_type].dst_pos_index]
        else:
            index = batch[edge_type].edge_label_index[:, :num_pos]
            src = batch[src_type].n_id[index[0]]
            dst = batch[dst_type].n_id[index[1]]
        assert torch.equal(torch.stack([src, dst]), label[:, ids])


@pytest.mark.parametrize('neg', ['binary', 'triplet'])
@pytest.mark.reliability(
    fault='a temporal heterogeneous link batch with a neighbour or a '
          'negative later than its label edge, or without the label times',
    behaviour="neighbours and negatives are at or before the label edge's "
              "time; the batch carries edge_label_time (binary) or "
              "seed_time (triplet)")
def test_temporal_hetero_link_batches_respect_label_times(neg):
    data = timed_hetero(6)
    label = data[BUYS].edge_index[:, :48]
    label_time = torch.randint(40, 100, (48, ),
                               generator=torch.Generator().manual_seed(1))
    loader = FastLinkNeighborLoader(
        data, [3, 2], edge_label_index=(BUYS, label),
        edge_label_time=label_time, time_attr='time', disjoint=True,
        neg_sampling=NegativeSampling(neg, amount=2), batch_size=16,
        generator=torch.Generator().manual_seed(2))
    for batch in loader:
        ids = batch[BUYS].input_id
        num_pos = ids.numel()
        if neg == 'binary':
            when = batch[BUYS].edge_label_time
            index = batch[BUYS].edge_label_index
            assert torch.equal(when, label_time[ids].repeat(3))
            neg_items = batch['item'].n_id[index[1, num_pos:]]
            neg_time = when[num_pos:]
        else:
            when = batch['user'].seed_time
            assert torch.equal(when, label_time[ids])
            assert torch.equal(batch['item'].seed_time, when)
            neg_index = batch['item'].dst_neg_index
            neg_items = batch['item'].n_id[neg_index.reshape(-1)]
            neg_time = when.repeat_interleave(neg_index.size(1))
        assert bool((data['item'].time[neg_items] <= neg_time).all())
        for e in RELATIONS:
            row, col = batch[e].edge_index
            tree = batch[e[2]].batch[col]
            nbr = data[e[0]].time[batch[e[0]].n_id[row]]
            assert bool((nbr <= label_time[ids][tree]).all()), e


@pytest.mark.parametrize('neg', ['binary', 'triplet'])
@pytest.mark.reliability(
    fault='strict heterogeneous negatives that are true edges of the '
          'relation',
    behaviour='no negative pair is an edge of the label relation')
def test_strict_hetero_negatives_are_never_edges(neg):
    data = timed_hetero(7, num_edges=700)  # about 58% of user-item pairs
    pairs = set(zip(*data[BUYS].edge_index.tolist()))
    loader = FastLinkNeighborLoader(
        data, [2], edge_label_index=BUYS, batch_size=100,
        neg_sampling=NegativeSampling(neg, amount=3), strict_negatives=True,
        generator=torch.Generator().manual_seed(3))
    checked = 0
    for batch in loader:
        users, items = batch['user'].n_id, batch['item'].n_id
        if neg == 'binary':
            num_pos = batch[BUYS].input_id.numel()
            index = batch[BUYS].edge_label_index[:, num_pos:]
            src, dst = users[index[0]], items[index[1]]
        else:
            dst_neg = batch['item'].dst_neg_index
            src = users[batch['user'].src_index].repeat_interleave(
                dst_neg.size(1))
            dst = items[dst_neg.reshape(-1)]
        hits = [p for p in zip(src.tolist(), dst.tolist()) if p in pairs]
        assert not hits
        checked += src.numel()
    assert checked == 3 * 700


@pytest.mark.reliability(
    fault='strict heterogeneous triplet negatives for a source linked to '
          'every destination loop or return a true edge',
    behaviour='an error naming the node and the fix')
def test_strict_hetero_negatives_name_a_source_without_non_edges():
    data = timed_hetero(8)
    every = torch.arange(40)
    data[BUYS].edge_index = torch.cat([data[BUYS].edge_index, torch.stack(
        [torch.zeros(40, dtype=torch.long), every])], dim=1)
    loader = FastLinkNeighborLoader(
        data, [2], edge_label_index=(BUYS, torch.tensor([[0], [3]])),
        neg_sampling=NegativeSampling('triplet'), strict_negatives=True)
    with pytest.raises(ValueError, match='source node 0 has an edge to '
                                         'every node'):
        next(iter(loader))
