r"""Layer-wise inference (issue 45, items 1-2): with every in-neighbour it
equals the model's full-batch forward for every node; intermediates go to
files when they do not fit the memory budget, and are removed; a fan-out is
deterministic under a seed; bad input is refused with a clear error."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch_geometric.data import Data
from torch_geometric.nn import GAT, GCN, MLP, GraphSAGE, SAGEConv

from pyg_fastload import (CSCGraphStore, CSCTopology, TieredFeatureStore,
                          stores_from_data)
from pyg_fastload.inference import layerwise_inference

from ..helpers import random_hetero_graph, randomise_parameters

CHUNK = 37  # several chunks, the last one short


def graph(num_nodes: int = 150, num_edges: int = 1200,
          seed: int = 0) -> Data:
    r"""A random graph with repeated edges, self-loops (one node with two)
    and nodes without in-edges: every case of the normalisations."""
    gen = torch.Generator().manual_seed(seed)
    edge_index = torch.randint(0, num_nodes - 10, (2, num_edges),
                               generator=gen)  # the last 10: no in-edges
    loops = torch.tensor([[3, 3, 4, 7], [3, 3, 4, 7]])
    edge_index = torch.cat([edge_index, loops, edge_index[:, :20]], 1)
    return Data(x=torch.randn(num_nodes, 8, generator=gen),
                edge_index=edge_index, num_nodes=num_nodes)


def build(name: str, num_layers: int, **kwargs) -> torch.nn.Module:
    r"""A model whose every parameter is random: a bias PyG starts at zero
    (GCN's, GAT's) counts in what inference must reproduce."""
    torch.manual_seed(num_layers)
    cls = {'sage': GraphSAGE, 'gat': GAT, 'gcn': GCN}[name]
    if name == 'gat':
        kwargs.setdefault('heads', 2)
    model = cls(8, 16, num_layers, out_channels=5, **kwargs)
    return randomise_parameters(model, seed=num_layers).eval()


def close(out: torch.Tensor, ref: torch.Tensor) -> None:
    assert out.shape == ref.shape
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize('num_layers', [2, 3])
@pytest.mark.parametrize('name', ['sage', 'gat', 'gcn'])
def test_every_node_equals_the_full_batch_forward(name, num_layers):
    data = graph()
    model = build(name, num_layers)
    ref = model(data.x, data.edge_index)
    out = layerwise_inference(model, data, chunk_size=CHUNK, progress=False)
    close(out, ref)
    # one chunk, and no background thread: the same
    close(layerwise_inference(model, data, prefetch=False, progress=False),
          ref)


@pytest.mark.parametrize('name', ['sage', 'gcn'])
def test_hidden_gives_what_the_last_convolution_reads(name, tmp_path):
    data = graph()
    model = build(name, 3, norm='batch_norm')
    model.norms.train()  # give the norms running statistics
    model(data.x, data.edge_index)
    model.eval()
    with torch.no_grad():
        ref = data.x
        for conv, norm in zip(model.convs[:-1], model.norms):
            ref = model.act(norm(conv(ref, data.edge_index)))
    out = layerwise_inference(model, data, chunk_size=CHUNK, progress=False,
                              hidden=True)
    close(out, ref)
    assert out.shape == (data.num_nodes, 16)
    # through files too
    close(layerwise_inference(model, data, chunk_size=CHUNK, progress=False,
                              hidden=True, memory_budget=0,
                              work_dir=tmp_path), ref)
    with pytest.raises(ValueError, match="no 'jk'"):
        layerwise_inference(build(name, 2, jk='cat'), data, hidden=True,
                            progress=False)
    with pytest.raises(ValueError, match='2 or more layers'):
        layerwise_inference(build(name, 1), data, hidden=True,
                            progress=False)
    with pytest.raises(TypeError, match="'hidden' must be True or False"):
        layerwise_inference(model, data, hidden='yes', progress=False)


def test_with_hidden_gives_both_from_one_pass(tmp_path):
    data = graph()
    model = build('sage', 3)
    out = layerwise_inference(model, data, chunk_size=CHUNK, progress=False)
    hidden = layerwise_inference(model, data, chunk_size=CHUNK,
                                 progress=False, hidden=True)
    calls = []
    model.convs[0].register_forward_hook(lambda *args: calls.append(1))
    both = layerwise_inference(model, data, chunk_size=CHUNK,
                               progress=False, with_hidden=True)
    assert len(calls) == -(-data.num_nodes // CHUNK)  # layer 1 once
    close(both[0], out)
    close(both[1], hidden)
    work = tmp_path / 'work'  # over the budget: both kept as files
    out_file, hidden_file = layerwise_inference(
        model, data, chunk_size=CHUNK, progress=False, with_hidden=True,
        memory_budget=0, work_dir=work)
    close(out_file, out)
    close(hidden_file, hidden)
    [own] = work.iterdir()  # the run's own directory
    assert own.name.startswith('layerwise-')
    assert sorted(p.name for p in own.iterdir()) == ['hidden.bin',
                                                     'output.bin']
    with pytest.raises(ValueError, match='give one'):
        layerwise_inference(model, data, hidden=True, with_hidden=True,
                            progress=False)


def test_other_basic_gnns_are_exact():
    from torch_geometric.nn import GIN, PNA
    from torch_geometric.utils import degree
    data = graph()
    counts = degree(data.edge_index[1], data.num_nodes, dtype=torch.long)
    torch.manual_seed(0)
    pna = PNA(8, 16, 3, 5, aggregators=['mean', 'max', 'std'],
              scalers=['identity', 'amplification'],
              deg=torch.bincount(counts))  # PNAConv takes one node set
    for model in (GIN(8, 16, 3, 5), pna):
        randomise_parameters(model).eval()
        close(layerwise_inference(model, data, chunk_size=CHUNK,
                                  progress=False),
              model(data.x, data.edge_index))


@pytest.mark.parametrize('aggr', ['sum', 'max', 'min'])
def test_sage_aggregations_are_exact(aggr):
    # one sparse-dense product per chunk (PyG's fused path) for each
    data = graph()
    model = build('sage', 2, aggr=aggr)
    close(layerwise_inference(model, data, chunk_size=CHUNK, progress=False),
          model(data.x, data.edge_index))


@pytest.mark.parametrize('kwargs', [dict(improved=True),
                                    dict(add_self_loops=False),
                                    dict(normalize=False)])
def test_gcn_variants_are_exact(kwargs):
    data = graph()
    model = build('gcn', 2, **kwargs)
    close(layerwise_inference(model, data, chunk_size=CHUNK, progress=False),
          model(data.x, data.edge_index))


@pytest.mark.parametrize('jk', ['last', 'cat', 'max', 'lstm'])
def test_jumping_knowledge_norms_and_act_first_are_exact(jk):
    data = graph()
    model = GraphSAGE(8, 16, 3, out_channels=5, jk=jk, norm='batch_norm',
                      act='elu', act_first=True, dropout=0.5)
    randomise_parameters(model)
    with torch.no_grad():  # running statistics that change the outputs
        for norm in model.norms:
            norm.module.running_mean.uniform_(-1, 1)
            norm.module.running_var.uniform_(0.5, 2)
    model.train()  # inference runs it in eval mode, and puts it back
    out = layerwise_inference(model, data, chunk_size=CHUNK, progress=False)
    assert model.training
    model.eval()
    close(out, model(data.x, data.edge_index))


@pytest.mark.parametrize('kind', ['sage', 'gcn', 'gat'])
def test_the_node_classifier_network_is_exact(kind):
    from pyg_fastload.lightning import NodeClassifier
    data = graph()
    net = NodeClassifier(kind, in_channels=8, num_classes=4,
                         hidden_channels=16, num_layers=2, heads=2).net
    randomise_parameters(net).eval()
    close(layerwise_inference(net, data, chunk_size=CHUNK, progress=False),
          net(data.x, data.edge_index))


class ReddItSage(torch.nn.Module):
    r"""The model of PyG's ``examples/reddit.py``: ``convs``, and a ReLU
    and dropout between them in ``forward``."""
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.convs = torch.nn.ModuleList([SAGEConv(8, 16), SAGEConv(16, 16),
                                          SAGEConv(16, 4)])

    def forward(self, x, edge_index):
        for i, conv in enumerate(self.convs):
            x = conv(x, edge_index)
            if i < len(self.convs) - 1:
                x = F.dropout(x.relu(), p=0.5, training=self.training)
        return x


def test_a_module_with_convs_and_what_comes_between_them():
    data = graph()
    model = ReddItSage().eval()
    out = layerwise_inference(model, data, chunk_size=CHUNK, progress=False,
                              between=lambda i, x: x.relu())
    close(out, model(data.x, data.edge_index))


def test_a_pair_of_stores_with_features_in_a_file(tmp_path):
    data = graph()
    model = build('sage', 3)
    ref = model(data.x, data.edge_index)
    close(layerwise_inference(model, stores_from_data(data),
                              chunk_size=CHUNK, progress=False), ref)
    path = tmp_path / 'x.bin'
    data.x.numpy().tofile(path)
    features = TieredFeatureStore()
    features.put_mmap_tensor(str(path), torch.float32, data.x.shape, 'x')
    topology = CSCTopology.from_edge_index(data.edge_index, data.num_nodes)
    close(layerwise_inference(model, (features, CSCGraphStore(topology)),
                              chunk_size=CHUNK, progress=False), ref)


def spy_files(monkeypatch):
    r"""The paths of every file registered as a layer's rows."""
    paths = []
    put = TieredFeatureStore.put_mmap_tensor

    def record(self, path, *args, **kwargs):
        paths.append(path)
        return put(self, path, *args, **kwargs)
    monkeypatch.setattr(TieredFeatureStore, 'put_mmap_tensor', record)
    return paths


@pytest.mark.parametrize('name', ['sage', 'gcn'])
def test_a_zero_budget_puts_every_layer_in_a_file_and_removes_them(
        tmp_path, monkeypatch, name):
    data = graph()
    model = build(name, 3)
    files = spy_files(monkeypatch)
    work = tmp_path / 'work'  # made
    out = layerwise_inference(model, data, chunk_size=CHUNK, progress=False,
                              memory_budget=0, work_dir=work)
    close(out, model(data.x, data.edge_index))
    assert len(files) == 3  # every layer read back from a file
    # the intermediate files are gone; the outputs stay as output.bin, in
    # the run's own directory
    [own] = work.iterdir()
    assert sorted(p.name for p in own.iterdir()) == ['output.bin']
    kept = np.fromfile(own / 'output.bin', dtype=np.float32)
    assert torch.equal(torch.from_numpy(kept).view(out.shape), out)
    out[0] = 0  # copy-on-write: the file stays as written
    assert torch.equal(torch.from_numpy(np.fromfile(
        own / 'output.bin', dtype=np.float32)).view(out.shape)[0],
        torch.from_numpy(kept).view(out.shape)[0])


def test_layers_go_to_memory_or_a_file_by_size(tmp_path, monkeypatch):
    data = graph()
    model = GraphSAGE(8, 64, 3, out_channels=2).eval()
    files = spy_files(monkeypatch)
    hidden = data.num_nodes * 64 * 4  # bytes of a hidden layer
    # one hidden layer fits, two do not: layer 2 (read while layer 1 is
    # held) goes to a file, the small outputs fit beside it
    out = layerwise_inference(model, data, chunk_size=CHUNK, progress=False,
                              memory_budget=hidden + 100,
                              work_dir=tmp_path)
    close(out, model(data.x, data.edge_index))
    assert [p.rsplit('/', 1)[1].split('-')[0] for p in files] == ['layer2']
    assert list(tmp_path.iterdir()) == []
    # everything fits: no file and no directory needed
    out = layerwise_inference(model, data, progress=False,
                              memory_budget='1GiB')
    close(out, model(data.x, data.edge_index))


@pytest.mark.reliability(
    fault='a layer of layer-wise inference over the memory budget, and no '
    '`work_dir`',
    behaviour="`ValueError` naming the layer, its size and the budget, and "
    "'work_dir' / 'memory_budget' to fix it")
def test_a_layer_over_the_budget_without_a_work_dir_is_refused():
    with pytest.raises(ValueError, match=r"layer1's outputs take .* more "
                       r"than the memory budget of 0 B.*'work_dir'"):
        layerwise_inference(build('sage', 2), graph(), memory_budget=0,
                            progress=False)


@pytest.mark.reliability(
    fault='an error or Ctrl-C in the middle of layer-wise inference with '
    'layers in files',
    behaviour='every file it wrote is removed (no `output.bin` left looking '
    'complete); the model is put back in its training mode')
def test_an_interrupted_run_leaves_no_file(tmp_path):
    def between(i, x):
        if i == 1:
            raise KeyboardInterrupt
        return x.relu()
    model = ReddItSage().train()
    with pytest.raises(KeyboardInterrupt):
        layerwise_inference(model, graph(), chunk_size=CHUNK, progress=False,
                            memory_budget=0, work_dir=tmp_path,
                            between=between)
    assert list(tmp_path.iterdir()) == []
    assert model.training


def test_a_fan_out_is_deterministic_under_a_seed():
    data = graph()
    model = build('sage', 3)
    run = dict(chunk_size=CHUNK, progress=False, num_neighbors=[3, 2, -1])
    first = layerwise_inference(model, data, seed=1, **run)
    # the same draws whatever the chunking thread does
    again = layerwise_inference(model, data, seed=1, prefetch=False, **run)
    assert torch.equal(first, again)
    other = layerwise_inference(model, data, seed=2, **run)
    assert not torch.equal(first, other)
    exact = model(data.x, data.edge_index)
    assert not torch.allclose(first, exact, atol=1e-3)
    # a fan-out over every in-degree takes every neighbour; 0 takes none
    degree = int(torch.bincount(data.edge_index[1]).max())
    close(layerwise_inference(model, data, chunk_size=CHUNK, progress=False,
                              num_neighbors=[degree] * 3), exact)
    none = torch.empty(2, 0, dtype=torch.long)
    close(layerwise_inference(model, data, chunk_size=CHUNK, progress=False,
                              num_neighbors=[0] * 3), model(data.x, none))


def test_a_fan_out_draws_distinct_neighbours():
    from pyg_fastload.inference.blocks import chunk_block, chunk_generator
    data = graph()
    topology = CSCTopology.from_edge_index(data.edge_index, data.num_nodes)
    for chunk, start in enumerate(range(0, data.num_nodes, CHUNK)):
        end = min(start + CHUNK, data.num_nodes)
        block = chunk_block(topology, start, end, 4,
                            chunk_generator(0, 0, chunk))
        src, dst = block.sources[block.edge_index[0]], block.edge_index[1]
        for v in range(end - start):
            ids = topology.indices[topology.indptr[start + v]:
                                   topology.indptr[start + v + 1]].long()
            drawn = src[dst == v]
            # at most 4 edges, each one of the node's (repeated edges may
            # repeat an id, never more often than the graph has it)
            assert drawn.numel() == min(4, ids.numel())
            for u in drawn.unique().tolist():
                assert int((drawn == u).sum()) <= int((ids == u).sum())


@pytest.mark.reliability(
    fault='layer-wise inference of a model without `convs` (an MLP, a '
    'LightningModule, any module)',
    behaviour="`TypeError` saying it needs 'model.convs', a list of "
    "MessagePassing layers (pointing at `.net` where the module has one)")
def test_a_model_without_convs_is_refused():
    data = graph()
    with pytest.raises(TypeError, match=r"'model.convs', a list of "
                       r"torch_geometric.nn.MessagePassing layers.*"
                       r"Linear has no 'convs'"):
        layerwise_inference(torch.nn.Linear(8, 4), data, progress=False)
    with pytest.raises(TypeError, match=r"MLP has no 'convs' \(an MLP reads "
                       r"no neighbours"):
        layerwise_inference(MLP([8, 4]), data, progress=False)
    wrapper = torch.nn.Module()
    wrapper.net = build('sage', 2)
    with pytest.raises(TypeError, match=r"pass model.net"):
        layerwise_inference(wrapper, data, progress=False)


@pytest.mark.reliability(
    fault='layer-wise inference of a module with `convs` that is not a PyG '
    'BasicGNN, without `between`',
    behaviour="`TypeError` asking for between=f(i, x) (what follows each "
    "layer) or between=None")
def test_a_custom_model_must_say_what_comes_between_layers():
    with pytest.raises(TypeError, match=r"pass between=f.*between=None"):
        layerwise_inference(ReddItSage(), graph(), progress=False)


@pytest.mark.reliability(
    fault='layer-wise inference of a model whose norm mixes nodes in eval '
    'mode (GraphNorm, LayerNorm in graph mode, ...)',
    behaviour='`NotImplementedError` naming the norm and the row-wise ones '
    'it takes')
def test_a_norm_over_many_nodes_is_refused():
    model = GraphSAGE(8, 16, 2, out_channels=4, norm='graph_norm')
    with pytest.raises(NotImplementedError, match=r"norms\[0\] is "
                       r"GraphNorm.*row-wise norms"):
        layerwise_inference(model, graph(), progress=False)


@pytest.mark.reliability(
    fault='layer-wise inference with a fan-out for a GCN layer',
    behaviour="`ValueError`: GCN's normalisation reads every in-edge, give "
    "-1 for it")
def test_a_fan_out_for_gcn_is_refused():
    with pytest.raises(ValueError, match=r"'num_neighbors\[0\]' = 5 for a "
                       r"GCNConv layer.*give -1"):
        layerwise_inference(build('gcn', 2), graph(), num_neighbors=[5, -1],
                            progress=False)
    with pytest.raises(ValueError, match=r"3 values for a model of 2 layers"):
        layerwise_inference(build('sage', 2), graph(),
                            num_neighbors=[5, 5, 5], progress=False)


@pytest.mark.reliability(
    fault='layer-wise inference of an empty graph (no nodes)',
    behaviour='`ValueError`: the graph has no nodes')
def test_an_empty_graph_is_refused():
    empty = Data(x=torch.empty(0, 8), edge_index=torch.empty(2, 0).long(),
                 num_nodes=0)
    with pytest.raises(ValueError, match='the graph has no nodes'):
        layerwise_inference(build('sage', 2), empty, progress=False)
    no_x = Data(edge_index=torch.tensor([[0], [1]]), num_nodes=2)
    with pytest.raises(ValueError, match="no node features 'x'"):
        layerwise_inference(build('sage', 2), no_x, progress=False)
    short_x = Data(x=torch.randn(2, 8), edge_index=torch.tensor([[0], [1]]),
                   num_nodes=3)
    with pytest.raises(ValueError, match="'x' have 2 rows but the graph "
                                         "has 3 such nodes"):
        layerwise_inference(build('sage', 2), short_x, progress=False)


@pytest.mark.reliability(
    fault='a layer-wise inference `work_dir` that is a file',
    behaviour='`NotADirectoryError` naming the path, before any layer is '
    'computed')
def test_a_work_dir_that_is_a_file_is_refused(tmp_path):
    path = tmp_path / 'a-file'
    path.write_text('not a directory')
    with pytest.raises(NotADirectoryError, match=r"'work_dir' .*a-file' is "
                       r"a file"):
        layerwise_inference(build('sage', 2), graph(), work_dir=path,
                            progress=False)
    assert path.read_text() == 'not a directory'


@pytest.mark.reliability(
    fault="a layer-wise inference `work_dir` holding a user's `output.bin`, "
    "or an earlier run's outputs; two runs in one `work_dir`",
    behaviour="each run writes in a directory of its own "
    "(`work_dir/layerwise-*`, removed if it keeps nothing): no other file "
    "is written or removed (was: the user's `output.bin` refused, a "
    "heterogeneous run's `output-<k>.bin` overwritten)")
def test_runs_in_one_work_dir_never_touch_other_files(tmp_path):
    (tmp_path / 'output.bin').write_bytes(b'mine')
    model, data = build('sage', 2), graph()
    first = layerwise_inference(model, data, work_dir=tmp_path,
                                memory_budget=0, progress=False)
    runs = sorted(tmp_path.glob('layerwise-*'))
    other = build('sage', 2)
    with torch.no_grad():  # other weights, other outputs
        for param in other.parameters():
            param.add_(0.5)
    second = layerwise_inference(other, data, work_dir=tmp_path,
                                 memory_budget=0, progress=False)
    assert (tmp_path / 'output.bin').read_bytes() == b'mine'
    assert len(runs) == 1 and len(list(tmp_path.glob('layerwise-*'))) == 2
    # the first run's file was not overwritten by the second's
    close(first, model(data.x, data.edge_index))
    close(second, other(data.x, data.edge_index))
    # a run that keeps nothing in a file leaves no directory behind
    layerwise_inference(model, data, work_dir=tmp_path, progress=False)
    assert len(list(tmp_path.glob('layerwise-*'))) == 2


@pytest.mark.reliability(
    fault='layer-wise inference of a HeteroData',
    behaviour='`NotImplementedError` naming issue 45 and '
    '`data.to_homogeneous()`')
def test_a_homogeneous_model_on_a_hetero_graph_is_refused_naming_it():
    with pytest.raises(TypeError, match=r"heterogeneous.*HeteroConv.*"
                                        r"GraphSAGE has none"):
        layerwise_inference(build('sage', 2), random_hetero_graph(),
                            progress=False)


@pytest.mark.parametrize('stream', [False, True])
def test_reduce_stores_each_chunk_reduced(tmp_path, stream):
    data = graph()
    model = build('sage', 2)
    logits = model(data.x, data.edge_index)
    chunks = []

    def classes(y):
        chunks.append(y.size(0))
        return y.argmax(dim=-1)

    work = tmp_path / 'work'  # every layer over the budget: in files
    out = layerwise_inference(model, data, chunk_size=CHUNK, progress=False,
                              reduce=classes, stream=stream, memory_budget=0,
                              work_dir=work)
    assert torch.equal(out, logits.argmax(dim=-1))
    assert max(chunks) <= CHUNK and sum(chunks) == data.num_nodes
    # what is kept is the reduced rows: 8 bytes per node, not 5 floats
    [own] = work.iterdir()
    assert (own / 'output.bin').stat().st_size == 8 * data.num_nodes
    # the hidden rows of with_hidden are not reduced
    out, hidden = layerwise_inference(model, data, chunk_size=CHUNK,
                                      progress=False, with_hidden=True,
                                      reduce=classes)
    assert torch.equal(out, logits.argmax(dim=-1))
    close(hidden, layerwise_inference(model, data, chunk_size=CHUNK,
                                      progress=False, hidden=True))


def test_reduce_applies_after_a_jumping_knowledge_head():
    data = graph()
    model = build('sage', 3, jk='cat')
    out = layerwise_inference(model, data, chunk_size=CHUNK, progress=False,
                              reduce=lambda y: y.max(dim=-1).values)
    assert torch.allclose(out, model(data.x, data.edge_index).max(-1).values,
                          atol=1e-5)


@pytest.mark.reliability(
    fault='a `reduce` for layer-wise inference that is not a function, or '
    'that returns other than one row per row',
    behaviour="`TypeError`/`ValueError` naming 'reduce' and what it must "
    "return")
def test_a_reduce_that_does_not_keep_rows_is_refused():
    data = graph()
    model = build('sage', 2)
    with pytest.raises(TypeError, match="'reduce' must be a function"):
        layerwise_inference(model, data, reduce='argmax', progress=False)
    with pytest.raises(ValueError, match="'reduce' must return one row per "
                       "row it is given"):
        layerwise_inference(model, data, progress=False,
                            reduce=lambda y: y.argmax())


@pytest.mark.reliability(
    fault='two layer-wise inferences at once over one `work_dir` (two '
          'validations, two threads)',
    behaviour="each in a directory of its own under it: both exact, "
              "nothing left there after them")
def test_inferences_sharing_a_work_dir_at_once(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    from pyg_fastload.inference import WholeGraph
    data = graph()
    model = build('sage', 2)
    want = model(data.x, data.edge_index)
    work = tmp_path / 'work'
    whole = WholeGraph(data, chunk_size=CHUNK, memory_budget=0,
                       work_dir=str(work), progress=False)
    with ThreadPoolExecutor(2) as pool:
        outs = list(pool.map(lambda _: whole.outputs(model), range(2)))
    for out in outs:
        close(out, want)
    assert list(work.iterdir()) == []
