r"""Link predictors after training: every node's encoder embedding,
layer-wise and exact, and pairs scored from written embeddings."""
import pytest
import torch
from torch_geometric.data import Data
from torch_geometric.nn import GAT, GCN, GraphSAGE, MLP

from pyg_fastload.inference import (encoder_embeddings, load_pairs,
                                    read_predictions, score_pairs,
                                    write_predictions)


def _graph(num_nodes=300, num_edges=1500, channels=8, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return Data(x=torch.randn(num_nodes, channels, generator=gen),
                edge_index=torch.randint(0, num_nodes, (2, num_edges),
                                         generator=gen))


@pytest.mark.parametrize('encoder', [GraphSAGE, GCN, GAT])
def test_encoder_embeddings_equal_the_full_batch_forward(encoder):
    torch.manual_seed(0)
    data = _graph()
    model = encoder(8, 16, num_layers=2, out_channels=16).eval()
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
    model = GraphSAGE(8, 16, num_layers=2).eval()
    mlp = None if decoder is None else MLP([16, 16, 1], norm=None).eval()
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


def test_a_heterogeneous_graph_is_refused_naming_why():
    from torch_geometric.data import HeteroData
    data = HeteroData()
    data['a'].x = torch.randn(3, 2)
    with pytest.raises(NotImplementedError, match='heterogeneous link '
                                                  'predictor'):
        encoder_embeddings(GraphSAGE(2, 4, num_layers=2), data)
