r"""``task: link`` on heterogeneous graphs: the supervised relation and its
reverse split together (RandomLinkSplit's ``rev_edge_types``), evaluation
negatives of the destination type, and the bad settings named."""
import pytest
import torch

from pyg_fastload.config import SettingError
from pyg_fastload.lightning import ConfigError, FastLoadDataModule, \
    LinkOptions

from ..helpers import random_hetero_graph

WRITES = ('author', 'writes', 'paper')
REV = ('paper', 'rev_writes', 'author')


def _module(graph, cache=None, **link):
    options = dict(edge_type=list(WRITES), eval_edges=20, eval_negatives=9)
    options.update(link)
    return FastLoadDataModule(
        graph, task='link', num_neighbors=[4, 3], batch_size=32,
        eval_batch_size=50, link=LinkOptions(**options), progress=False,
        feature_cache=cache)


def _pairs(edges):
    return set(zip(*edges.tolist()))


def _sampled(batch, edge_type):
    r"""A batch's sampled edges of :obj:`edge_type` in global ids."""
    src, _, dst = edge_type
    local = batch[edge_type].edge_index
    return _pairs(torch.stack([batch[src].n_id[local[0]],
                               batch[dst].n_id[local[1]]]))


@pytest.mark.reliability(
    fault="a held-out author-writes-paper link carrying messages through "
          "the relation or its reverse ('rev_writes') where it is scored",
    behaviour='train/val batches sample training links only, in both '
              'relations; test batches add validation links; evaluation '
              'negatives are papers the author did not write')
@pytest.mark.parametrize('stores', [False, True])
def test_the_relation_and_its_reverse_are_held_out_together(stores):
    graph = random_hetero_graph()
    module = _module(graph, {'host_budget': 0.5} if stores else None)
    module.setup('fit')
    split = module.loading.task.split
    assert split.relation == (WRITES, REV)  # the reverse, found
    assert isinstance(module.data, tuple) == stores
    held = {s: _pairs(split.edges[s]) for s in ('val', 'test')}
    written = _pairs(graph[WRITES].edge_index)
    assert held['val'] and held['test'] and held['val'] <= written
    seen_val = False
    for name in ('train', 'val', 'test'):
        groups = 0
        for batch in getattr(module, f'{name}_dataloader')():
            sampled = _sampled(batch, WRITES) | {
                (a, p) for p, a in _sampled(batch, REV)}
            assert not sampled & held['test'], name
            if name == 'test':
                seen_val |= bool(sampled & held['val'])
            else:
                assert not sampled & held['val'], name
            if name == 'train':
                continue
            label = batch[WRITES].edge_label.view(-1, 10)
            pairs = batch[WRITES].edge_label_index
            ids = torch.stack([batch['author'].n_id[pairs[0]],
                               batch['paper'].n_id[pairs[1]]]).view(
                                   2, -1, 10)
            assert bool((label[:, 0] == 1).all() and
                        (label[:, 1:] == 0).all())
            for author, papers in zip(ids[0, :, 0].tolist(),
                                      ids[1].tolist()):
                assert (author, papers[0]) in held[name]
                assert not {(author, p) for p in papers[1:]} & written
            groups += label.size(0)
        if name != 'train':
            assert groups == min(20, split.edges[name].size(1)) > 0
    assert seen_val  # the test graph carries validation links


@pytest.mark.reliability(
    fault="a missing, unknown or malformed 'link.edge_type', a reverse "
          "relation of the wrong types, 'undirected' on a hetero graph, an "
          "edge type on a homogeneous one",
    behaviour='an error naming the key and listing the edge types')
def test_bad_relations_are_named():
    graph = random_hetero_graph()
    with pytest.raises(ConfigError, match=r"link.edge_type.*relation to "
                       r"predict, one of: \['paper', 'cites', 'paper'\]"):
        _module(graph, edge_type=None).setup('fit')
    with pytest.raises(ConfigError, match=r"link.edge_type.*\['author', "
                       r"'reads', 'paper'\] is not an edge type"):
        _module(graph, edge_type=['author', 'reads', 'paper']).setup('fit')
    with pytest.raises(ConfigError, match=r"link.rev_edge_type.*not an "
                       r"edge type from 'paper' to 'author'"):
        _module(graph, rev_edge_type=list(WRITES)).setup('fit')
    with pytest.raises(SettingError, match='link.edge_type.*must be a'):
        LinkOptions(edge_type=['author', 'writes'])
    with pytest.raises(ConfigError, match='link.undirected'):
        _module(graph, undirected=True).setup('fit')
    from torch_geometric.data import Data
    homogeneous = Data(x=torch.randn(20, 4),
                       edge_index=torch.randint(20, (2, 80)))
    with pytest.raises(ConfigError, match='heterogeneous graphs only'):
        FastLoadDataModule(homogeneous, task='link', progress=False,
                           link=LinkOptions(edge_type=list(WRITES))
                           ).setup('fit')


def test_no_reverse_relation_splits_the_relation_alone():
    graph = random_hetero_graph()
    del graph[REV]
    module = _module(graph)
    module.setup('fit')
    split = module.loading.task.split
    assert split.relation == (WRITES, None)
    train = module.loading.task.graphs['train']
    assert _pairs(train[WRITES].edge_index) == _pairs(split.edges['train'])


def test_a_graph_without_labels_trains_a_link_predictor():
    import pytorch_lightning as pl

    from pyg_fastload.lightning import LinkPredictor, NodeClassifier
    graph = random_hetero_graph()
    del graph['paper'].y  # nothing to classify: link prediction only
    module = _module(graph)
    trainer = pl.Trainer(max_epochs=1, logger=False, enable_progress_bar=False,
                         enable_checkpointing=False,
                         enable_model_summary=False)
    model = LinkPredictor(hidden_channels=8)
    trainer.fit(model, module)
    assert model.hparams.schema['target'] is None
    assert 'val_mrr' in trainer.callback_metrics
    again = LinkPredictor(**model.hparams)  # a checkpoint rebuilds it
    assert again.encoder is not None
    node = FastLoadDataModule(graph, num_neighbors=[3], progress=False)
    with pytest.raises(ConfigError, match="labels 'y' on exactly one"):
        pl.Trainer(max_epochs=1, logger=False).fit(NodeClassifier(), node)
