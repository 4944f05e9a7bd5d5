r"""Link predictors after training: every node's encoder embedding,
layer-wise and exact (one table per node type on a heterogeneous graph),
and pairs scored from written embeddings."""
import json

import pytest
import torch
from torch_geometric.data import Data
from torch_geometric.nn import GAT, GCN, GraphSAGE, MLP

from pyg_fastload.inference import (encoder_embeddings, load_pairs,
                                    read_predictions, score_pairs,
                                    write_embedding_tables,
                                    write_predictions)
from pyg_fastload.inference.prediction_files import node_tables

from ..helpers import randomise_parameters


def _graph(num_nodes=300, num_edges=1500, channels=8, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return Data(x=torch.randn(num_nodes, channels, generator=gen),
                edge_index=torch.randint(0, num_nodes, (2, num_edges),
                                         generator=gen))


@pytest.mark.parametrize('encoder', [GraphSAGE, GCN, GAT])
def test_encoder_embeddings_equal_the_full_batch_forward(encoder):
    torch.manual_seed(0)
    data = _graph()
    model = encoder(8, 16, num_layers=2, out_channels=16)
    randomise_parameters(model).eval()  # GCN's and GAT's biases too
    h = encoder_embeddings(model, data, chunk_size=37, progress=False)
    with torch.no_grad():
        full = model(data.x, data.edge_index)
    assert h.shape == (300, 16)
    assert torch.allclose(h, full, atol=1e-5)


@pytest.mark.parametrize('decoder', [None, 'mlp'])
def test_scores_from_written_embeddings_equal_the_full_batch_scores(
        tmp_path, decoder):
    torch.manual_seed(0)
    data = _graph()
    model = randomise_parameters(GraphSAGE(8, 16, num_layers=2)).eval()
    mlp = None if decoder is None else randomise_parameters(
        MLP([16, 16, 1], norm=None), seed=1).eval()
    h = encoder_embeddings(model, data, progress=False)
    path = write_predictions(tmp_path / 'emb', torch.arange(300), None,
                             embeddings=h)
    read = read_predictions(path)
    assert read['manifest']['kind'] == 'embeddings'
    assert 'predictions' not in read
    pairs = torch.randint(0, 300, (2, 1000))
    with torch.no_grad():
        full = model(data.x, data.edge_index)
        pair = full[pairs[0]] * full[pairs[1]]
        expected = pair.sum(-1) if mlp is None else mlp(pair).view(-1)
    for source in (path, h):
        scores = score_pairs(source, pairs, mlp, chunk_size=64)
        assert scores.shape == (1000, )
        assert torch.allclose(scores, expected, atol=1e-4)
    torch.save(pairs, tmp_path / 'pairs.pt')
    assert torch.allclose(score_pairs(path, tmp_path / 'pairs.pt', mlp),
                          expected, atol=1e-4)


def test_embeddings_of_some_nodes_are_scored_by_node_id(tmp_path):
    h = torch.arange(12.).view(6, 2)
    ids = torch.tensor([10, 3, 7, 20, 5, 1])
    path = write_predictions(tmp_path / 'emb', ids, None, embeddings=h)
    scores = score_pairs(path, torch.tensor([[10, 20], [3, 1]]))
    assert scores.tolist() == [(h[0] * h[1]).sum().item(),
                               (h[3] * h[5]).sum().item()]
    with pytest.raises(IndexError, match="node id 4, which has no row"):
        score_pairs(path, torch.tensor([[4], [3]]))


@pytest.mark.reliability(
    fault="pairs to score given as [P, 2], as floats, with a node id out of "
          "range or negative, a missing file or a list; chunk_size 0; a "
          "predictions directory without embeddings",
    behaviour="an error naming 'pairs' (or the argument), the value and the "
              "fix; nothing scored")
def test_bad_pairs_are_errors_naming_the_argument(tmp_path):
    h = torch.randn(5, 4)
    with pytest.raises(ValueError, match=r"'pairs' has shape \[3, 2\].*"
                                         r"\.t\(\)"):
        score_pairs(h, torch.zeros(3, 2, dtype=torch.long))
    with pytest.raises(TypeError, match=r"'pairs' has dtype torch.float32"
                                        r".*pairs.long\(\)"):
        score_pairs(h, torch.zeros(2, 3))
    with pytest.raises(IndexError, match=r"node id 5, out of range \[0, 5\)"):
        score_pairs(h, torch.tensor([[0, 5], [1, 1]]))
    with pytest.raises(IndexError, match=r"node id -1"):
        score_pairs(h, torch.tensor([[0, -1], [1, 1]]))
    with pytest.raises(FileNotFoundError, match="'pairs'.*not a file"):
        load_pairs(tmp_path / 'missing.pt')
    with pytest.raises(TypeError, match="'pairs' must be a"):
        score_pairs(h, [[0], [1]])
    with pytest.raises(ValueError, match="'chunk_size' must be"):
        score_pairs(h, torch.zeros(2, 1, dtype=torch.long), chunk_size=0)
    preds = write_predictions(tmp_path / 'p', torch.arange(2),
                              torch.tensor([0, 1]))
    assert read_predictions(preds)['manifest']['kind'] == 'predictions'
    with pytest.raises(ValueError, match='holds no embeddings.npy'):
        score_pairs(preds, torch.zeros(2, 1, dtype=torch.long))
    with pytest.raises(ValueError, match="give one of them"):
        write_predictions(tmp_path / 'q', torch.arange(2), None)
    assert score_pairs(h, torch.zeros(2, 0, dtype=torch.long)).numel() == 0


def _tables(embeddings, ids=None):
    r"""``{node_type: (node_ids, rows)}`` of every node of each type (or
    :obj:`ids`' nodes of those it names)."""
    ids = ids or {}
    return {t: (ids.get(t, torch.arange(rows.size(0))), rows)
            for t, rows in embeddings.items()}


WRITES = ('author', 'writes', 'paper')


@pytest.mark.parametrize('decoder', [None, 'mlp'])
def test_hetero_embeddings_are_a_table_per_type_scoring_the_relation(
        tmp_path, decoder):
    from pyg_fastload.datasets import generate_hetero
    from .test_typed_layerwise import _full_batch, _net
    data = generate_hetero('hetero-tiny')
    net = _net('sage', data)
    full = _full_batch(net, data)
    h = encoder_embeddings(net, data, chunk_size=64, progress=False)
    assert sorted(h) == sorted(data.node_types)  # every type, in node order
    for node_type, rows in h.items():
        assert torch.allclose(rows, full[node_type], atol=1e-5), node_type
    path = write_embedding_tables(tmp_path / 'emb', _tables(h),
                                  info={'model': 'test'})
    # the layout: a subdirectory per type, each a directory of one table
    assert sorted(p.name for p in path.iterdir()) == sorted(
        [*data.node_types, 'predictions.json'])
    manifest = json.loads((path / 'predictions.json').read_text())
    assert manifest['kind'] == 'embeddings' and manifest['files'] == {}
    assert manifest['node_types'] == {t: t for t in data.node_types}
    assert manifest['num_nodes'] == {t: data[t].num_nodes
                                     for t in data.node_types}
    assert node_tables(path) == manifest['node_types']
    for node_type in data.node_types:
        table = read_predictions(path / node_type)
        assert table['manifest']['node_type'] == node_type
        assert table['manifest']['kind'] == 'embeddings'
        assert table['manifest']['model'] == 'test'
        assert sorted(p.name for p in (path / node_type).iterdir()) == [
            'embeddings.npy', 'node_ids.npy', 'predictions.json']
        assert torch.equal(read_predictions(path, node_type=node_type)[
            'embeddings'], h[node_type])
    torch.manual_seed(1)
    width = full['paper'].size(1)
    mlp = None if decoder is None else MLP([width, 16, 1],
                                           norm=None).eval()
    pairs = torch.stack([torch.randint(0, 300, (1000, )),
                         torch.randint(0, 400, (1000, ))])
    with torch.no_grad():
        pair = full['author'][pairs[0]] * full['paper'][pairs[1]]
        expected = pair.sum(-1) if mlp is None else mlp(pair).view(-1)
    for source in (path, h):
        scores = score_pairs(source, pairs, mlp, edge_type=WRITES,
                             chunk_size=97)
        assert torch.allclose(scores, expected, atol=1e-4)


def test_a_type_not_named_as_a_file_gets_a_numbered_subdirectory(tmp_path):
    path = write_embedding_tables(tmp_path / 'emb', _tables(
        {'paper': torch.randn(4, 2), 'a/../b': torch.randn(3, 2)}))
    assert node_tables(path) == {'a/../b': 'type-0', 'paper': 'paper'}
    assert read_predictions(path, node_type='a/../b')[
        'manifest']['node_type'] == 'a/../b'
    again = write_embedding_tables(path, _tables(
        {'paper': torch.randn(2, 2)}), overwrite=True)  # ours: replaced
    assert sorted(p.name for p in again.iterdir()) == ['paper',
                                                       'predictions.json']


@pytest.mark.reliability(
    fault="heterogeneous embeddings scored with pairs out of range of (or "
          "missing from) their node type's table, from tables or a "
          "directory without a type of the relation, a homogeneous table "
          "given with a relation (a heterogeneous model) or one table per "
          "type without one; a bad edge_type; a directory of one table per "
          "type read without its node type",
    behaviour="an error naming 'pairs' (its row, the relation's source and "
              "destination types), 'embeddings' (the types it holds), "
              "'edge_type' or 'node_type', the value and the fix; nothing "
              "scored")
def test_bad_hetero_embeddings_or_pairs_are_errors_naming_them(tmp_path):
    h = {'author': torch.randn(3, 4), 'paper': torch.randn(5, 4)}
    typed = write_embedding_tables(tmp_path / 'typed', _tables(h))
    single = write_predictions(tmp_path / 'single', torch.arange(5), None,
                               embeddings=h['paper'])
    for source in (h, typed):
        with pytest.raises(IndexError, match=(
                r"'pairs' row 0 holds node id 3, out of range \[0, 3\) of "
                r"the 3 embeddings of node type 'author'.*row 0 holds ids "
                r"of the source type 'author'")):
            score_pairs(source, torch.tensor([[0, 3], [0, 0]]),
                        edge_type=WRITES)
        with pytest.raises(IndexError, match=(
                r"'pairs' row 1 holds node id -1, out of range \[0, 5\) "
                r"of the 5 embeddings of node type 'paper'.*destination "
                r"type 'paper'")):
            score_pairs(source, torch.tensor([[0], [-1]]), edge_type=WRITES)
        with pytest.raises(ValueError, match=(
                r"(one table per node type|a dict of tables).*"
                r"\['author', 'paper'\].*pass edge_type=")):
            score_pairs(source, torch.zeros(2, 1, dtype=torch.long))
        with pytest.raises(ValueError, match=(
                r"no table of node type 'venue' \(only of \['author', "
                r"'paper'\]\)")):
            score_pairs(source, torch.zeros(2, 1, dtype=torch.long),
                        edge_type=('author', 'in', 'venue'))
    with pytest.raises(ValueError, match=(
            r"'embeddings': '.*single' holds one table \(a homogeneous "
            r"model's embeddings\), not one per node type, but edge_type "
            r"\['author', 'writes', 'paper'\]")):
        score_pairs(single, torch.zeros(2, 1, dtype=torch.long),
                    edge_type=WRITES)
    with pytest.raises(ValueError, match=r"'embeddings' is one \[N, H\] "
                                         r"table, not one per node type"):
        score_pairs(h['paper'], torch.zeros(2, 1, dtype=torch.long),
                    edge_type=WRITES)
    with pytest.raises(TypeError, match=r"'edge_type' must be the scored "
                                        r"relation.*'author-paper'"):
        score_pairs(h, torch.zeros(2, 1, dtype=torch.long),
                    edge_type='author-paper')
    some = write_embedding_tables(tmp_path / 'some', _tables(
        h, {'paper': torch.tensor([0, 2, 4, 6, 8])}))
    with pytest.raises(IndexError, match=(
            r"'pairs' row 1 holds node id 1, which has no row in the "
            r"embeddings of node type 'paper'")):
        score_pairs(some, torch.tensor([[0], [1]]), edge_type=WRITES)
    assert score_pairs(some, torch.tensor([[2], [8]]), edge_type=WRITES
                       ).item() == pytest.approx(float(h['author'][2] @
                                                       h['paper'][4]))
    with pytest.raises(ValueError, match=r"holds one embedding table per "
                                         r"node type.*pass node_type="):
        read_predictions(typed)
    with pytest.raises(ValueError, match=r"node_type='venue' was given"):
        read_predictions(typed, node_type='venue')
    with pytest.raises(ValueError, match=r"'node_type': .* holds one table, "
                                         r"of node type None, not of "
                                         r"'paper'"):
        read_predictions(single, node_type='paper')
    with pytest.raises(ValueError, match="'tables' must be a non-empty"):
        write_embedding_tables(tmp_path / 'none', {})
