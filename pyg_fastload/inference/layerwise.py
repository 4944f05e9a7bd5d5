r"""Layer-wise inference: every node's output, one layer at a time over all
its in-neighbours (PyG's ``examples/reddit.py`` pattern, in the library),
with each layer's outputs in memory or in a file by size."""
from __future__ import annotations

import contextlib
import sys
import tempfile
from pathlib import Path
from typing import (Any, Callable, Dict, Iterator, List, Optional,
                    Sequence, Union)

import torch
from torch import Tensor

from ..config import available_memory, check_fanouts, parse_budget
from ..graph import graph_input, is_topology, stores_of, topology_of
from ..distributed.collectives import Collectives
from ..graph.view import GraphView
from .layer_run import LayerRun, Rows
from .layers import AUTO, NodeInputs, is_gcn, model_layers

__all__ = ['layerwise_inference']


def layerwise_inference(
    model: torch.nn.Module,
    data: Any,
    *,
    num_neighbors: Optional[Sequence[int]] = None,
    seed: int = 0,
    chunk_size: int = 4096,
    memory_budget: Union[int, float, str, None] = 'auto',
    work_dir: Union[str, Path, None] = None,
    device: Union[str, torch.device, None] = None,
    between: Any = AUTO,
    prefetch: bool = True,
    progress: bool = True,
    hidden: bool = False,
    with_hidden: bool = False,
    collectives: Optional[Collectives] = None,
    stream: bool = False,
    reduce: Optional[Callable[[Tensor], Tensor]] = None,
) -> Any:
    r"""The model's output for every node, computed layer by layer: layer 1
    for all nodes in chunks of :obj:`chunk_size` destination nodes over all
    their in-neighbours, then layer 2 from layer 1's outputs, and so on
    (PyG's ``examples/reddit.py`` pattern, without a sampler and with each
    layer computed only for the chunk's nodes). With every in-neighbour the
    result equals the full-batch ``model(x, edge_index)`` for every node,
    within float tolerance, at a cost of one pass over the edges per layer
    instead of ``fan-out ** layers`` per node.

    :obj:`model` exposes its message-passing layers as ``model.convs``
    and is a PyG ``BasicGNN`` (what its ``forward`` does between layers is
    read from it) or any module with ``convs``, given :obj:`between`; on a
    heterogeneous graph its ``convs`` are ``HeteroConv`` layers and the
    result is a dict by node type. Each layer's outputs stay in memory
    while they fit :obj:`memory_budget`, else go to a file in
    :obj:`work_dir`. How chunks are built and computed, where the layers
    go, the model contract in full and the heterogeneous case:
    ``docs/guide/inference.md``, "How ``layerwise_inference`` computes".

    Args:
        model (torch.nn.Module): the model (its contract: above, and in
            full in the guide).
        data: a ``torch_geometric.data.Data`` with ``x`` and
            ``edge_index``, or a ``(FeatureStore, GraphStore)`` pair whose
            feature store holds ``x`` (e.g. from
            :func:`~pyg_fastload.open_dataset`); or a ``HeteroData`` (or typed
            stores) with ``x`` per node type that has features.
        num_neighbors (List[int], optional): at most this many
            in-neighbours per node, one value per layer (``-1``: all), drawn
            uniformly without replacement, afresh for every layer, with
            :obj:`seed` (the same draws on every run). Default: all
            in-neighbours, the exact result. Not for ``GCNConv`` layers,
            whose normalisation reads every in-edge.
        seed (int): the seed of the draws of :obj:`num_neighbors`.
        chunk_size (int): destination nodes per chunk.
        memory_budget (int, float or str): bytes of layer outputs held in
            memory at once: bytes, a size (``'8GiB'``), a fraction of the
            memory available when called, or ``'auto'`` (half of it).
            ``0`` puts every layer in :obj:`work_dir`.
        work_dir (str or pathlib.Path, optional): where the layers that do
            not fit the budget go (made if missing), in a directory of this
            run's own in it. Without it, a layer over the budget is an
            error.
        device (torch.device, optional): where chunks are computed
            (default: where the model's parameters are); outputs are
            stored on the CPU.
        between (callable or None): ``f(i, x)`` returning what follows
            layer ``i``'s output ``x`` in the model's forward, called after
            every layer but the last (:obj:`None`: nothing); ``'auto'``
            reads it from a ``BasicGNN`` (a heterogeneous model: its
            ``between(i, x)`` method).
        prefetch (bool): build the next chunk in a background thread.
        progress (bool): a progress bar per layer.
        hidden (bool): instead of the model's outputs, its last hidden
            layer's (what the last convolution reads, after the model's
            activation and norm: every node's embedding). Not for a model
            with ``jk``, whose output reads every layer.
        with_hidden (bool): both, from one pass: ``(outputs, hidden)``
            (the last hidden layer kept as ``hidden.bin`` beside
            ``output.bin`` when it does not fit the budget).
        collectives (Collectives, optional): the ranks that share the work
            (every rank calls with the same arguments): each computes every
            ``world_size``-th chunk of every layer and receives the other
            chunks' rows from the ranks that computed them, one exchange per
            round of ``world_size`` chunks; every rank returns every node's
            output (the same as one rank's, within float tolerance).
        stream (bool): aggregate the layers that take the mean or the sum
            of every in-neighbour's row (``SAGEConv``, ``GraphConv``,
            ``GINConv``) by reading their input in order, once per range
            of destinations as large as :obj:`memory_budget` allows
            (:mod:`~pyg_fastload.inference.streamed`), instead of
            gathering each chunk's in-neighbours: for an input on storage
            larger than memory, where gathered rows are random reads.
            Homogeneous graphs, one rank; other layers gather as before.
        reduce (callable, optional): applied to every chunk of the
            returned rows as it is computed (e.g. ``lambda y:
            y.argmax(dim=-1)``, the predicted classes), one row out per row
            in; the result holds what it returns, and the full rows are
            never stored (a graph whose outputs would not fit on disk). Not
            applied to the hidden rows of :obj:`with_hidden`.

    Returns:
        torch.Tensor: ``[num_nodes, out_channels]``, the rows in node order
        (a heterogeneous graph: a dict of them by node type); with
        :obj:`with_hidden`, a pair of them.

    Example:
        >>> import torch
        >>> from torch_geometric.data import Data
        >>> from torch_geometric.nn import GraphSAGE
        >>> from pyg_fastload.inference import layerwise_inference
        >>> edge_index = torch.randint(0, 100, (2, 500))
        >>> data = Data(x=torch.randn(100, 16), edge_index=edge_index)
        >>> model = GraphSAGE(16, 32, num_layers=2, out_channels=4).eval()
        >>> out = layerwise_inference(model, data, chunk_size=32,
        ...                           progress=False)
        >>> out.shape
        torch.Size([100, 4])
        >>> torch.allclose(out, model(data.x, data.edge_index), atol=1e-5)
        True
    """
    typed = graph_input(data).hetero
    if not isinstance(stream, bool):
        raise TypeError(f"'stream' must be True or False, got {stream!r}")
    if stream and typed:
        raise ValueError("'stream=True' is for homogeneous graphs (a "
                         "heterogeneous one gathers its chunks' "
                         "in-neighbours): leave it out")
    layers = model_layers(model, between, hetero=typed)
    convs = [list(layers.relations(i).values())
             for i in range(layers.num_layers)]
    for key, value in (('hidden', hidden), ('with_hidden', with_hidden)):
        if not isinstance(value, bool):
            raise TypeError(f"'{key}' must be True or False, got {value!r}")
        if value and (layers.num_layers < 2 or layers.head is not None):
            raise ValueError(f"'{key}=True' returns what the last "
                             f"convolution reads: the model needs 2 or more "
                             f"layers and no 'jk' (whose output reads every "
                             f"layer)")
    if reduce is not None and not callable(reduce):
        raise TypeError(f"'reduce' must be a function of a chunk's rows "
                        f"(e.g. lambda y: y.argmax(dim=-1)), got "
                        f"{reduce!r}")
    if hidden and with_hidden:
        raise ValueError("'hidden' returns the last hidden layer instead of "
                         "the outputs, 'with_hidden' both: give one")
    fanouts = fanouts_of(num_neighbors, convs)
    for key, value, low in (('chunk_size', chunk_size, 1),
                            ('seed', seed, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or \
                value < low:
            raise ValueError(f"'{key}' must be an int >= {low}, got "
                             f"{value!r}")
    budget = _budget(memory_budget)
    work = _work_dir(work_dir)
    topology = topology_of(data)
    if topology.num_nodes == 0:
        raise ValueError("the graph has no nodes: there is nothing to infer")
    if device is None:
        param = next(model.parameters(), None)
        device = param.device if param is not None else torch.device('cpu')
    device = torch.device(device)
    with torch.no_grad(), _eval(model), _run_dir(work) as own:
        return LayerRun(layers, topology, fanouts, seed, chunk_size, budget,
                        own, device, prefetch, progress,
                        layers.num_layers - 1 if hidden else
                        layers.num_layers, with_hidden, collectives,
                        stream=stream, reduce=reduce)(
            _inputs(data, topology, layers.node_inputs, device))


# Arguments ###################################################################

def fanouts_of(num_neighbors: Optional[Sequence[int]],
               convs: Sequence[Sequence[Any]]) -> List[int]:
    r"""One fan-out per layer (``-1``: all in-neighbours) from
    :obj:`num_neighbors`, checked against each layer's convolutions
    :obj:`convs` (one list per layer: each relation's, if typed)."""
    count = len(convs)
    if num_neighbors is None:
        return [-1] * count
    fanouts = check_fanouts(num_neighbors)
    if len(fanouts) != count:
        raise ValueError(f"'num_neighbors' has {len(fanouts)} values for a "
                         f"model of {count} layers: give one per layer")
    for i, (layer, fanout) in enumerate(zip(convs, fanouts)):
        if fanout >= 0 and any(is_gcn(c) and c.normalize for c in layer):
            raise ValueError(
                f"'num_neighbors[{i}]' = {fanout} for a GCNConv layer, "
                f"whose normalisation reads every in-edge: give -1 for it")
    return fanouts


def _budget(memory_budget: Union[int, float, str, None]) -> int:
    value = parse_budget('auto' if memory_budget is None else memory_budget,
                         'memory_budget', allow_auto=True)
    if isinstance(value, int):
        return value
    available = available_memory()
    if available == 0:  # unknown (no /proc/meminfo): no bound
        return sys.maxsize
    return available // 2 if value == 'auto' else int(value * available)


def _work_dir(work_dir: Union[str, Path, None]) -> Optional[Path]:
    if work_dir is None:
        return None
    path = Path(work_dir).expanduser()
    if path.exists() and not path.is_dir():
        raise NotADirectoryError(
            f"'work_dir' {str(path)!r} is a file, not a directory: give a "
            f"directory for the layers' outputs (it is made if missing)")
    return path


@contextlib.contextmanager
def _run_dir(work: Optional[Path]) -> Iterator[Optional[Path]]:
    r"""The run's own directory in :obj:`work` (:obj:`None` without one),
    removed at the end if the run kept nothing in it."""
    if work is None:
        yield None
        return
    work.mkdir(parents=True, exist_ok=True)
    own = Path(tempfile.mkdtemp(prefix='layerwise-', dir=work))
    try:
        yield own
    finally:
        if not any(own.iterdir()):
            own.rmdir()


def _inputs(data: Any, topology: Any, node_inputs: Optional[NodeInputs],
            device: torch.device) -> Dict[Optional[str], Rows]:
    r"""How the first layer's rows of every node type are read (a
    homogeneous graph's one type: :obj:`None`): the model's
    ``node_inputs`` on :obj:`device` where it has them, else the
    features."""
    def on_device(node_type: Optional[str], n_id: Tensor,
                  x: Optional[Tensor]) -> Tensor:
        return node_inputs(node_type, n_id.to(device),
                           None if x is None else x.to(device))

    view = GraphView.of(data)
    inputs = _features_only if node_inputs is None else on_device
    types = topology.node_types if is_topology(topology, hetero=True) \
        else [None]
    return {t: _rows(view, t, inputs) for t in types}


def _rows(view: GraphView, node_type: Optional[str],
          inputs: NodeInputs) -> Rows:
    r"""How :obj:`node_type`'s input rows are read: ``inputs(node_type,
    n_id, x)``, with its features ``x`` (:obj:`None` if it has none), one
    row per node."""
    rows = _num_rows(view, node_type)
    if rows is None:
        def read(ids: Tensor) -> Tensor:
            return inputs(node_type, ids, None)
        return read
    num_nodes = view.num_nodes(node_type)
    if rows != num_nodes:
        of = '' if node_type is None else f' of {node_type!r}'
        raise ValueError(f"the node features 'x'{of} have {rows} rows but "
                         f"the graph has {num_nodes} such nodes; give every "
                         f"node one row")

    def read(ids: Tensor) -> Tensor:
        return inputs(node_type, ids, view.node_attr('x', node_type, ids))
    return read


def _num_rows(view: GraphView, node_type: Optional[str]) -> Optional[int]:
    r"""The rows of :obj:`node_type`'s features ``x`` (:obj:`None` where it
    has none), read without reading them."""
    stores = stores_of(view.data)
    if stores is None:
        x = view.node_attr('x', node_type)
        return x.size(0) if isinstance(x, Tensor) else None
    size = stores[0].get_tensor_size(attr_name='x', group_name=node_type)
    return None if size is None else size[0]


def _features_only(node_type: Optional[str], n_id: Tensor,
                   x: Optional[Tensor]) -> Tensor:
    r"""A node type's first-layer rows where the model has no
    ``node_inputs``: its features."""
    if x is not None:
        return x
    if node_type is None:
        raise ValueError("the graph has no node features 'x': set "
                         "'data.x', or put them under attr_name='x' in the "
                         "FeatureStore")
    raise ValueError(
        f"node type {node_type!r} has no features 'x' and the model has "
        f"no node_inputs(node_type, n_id, x) saying what its nodes enter "
        f"the first layer with (an embedding, zeros)")


@contextlib.contextmanager
def _eval(model: torch.nn.Module) -> Iterator[None]:
    r"""The model in eval mode (no dropout, running norm statistics), put
    back as it was afterwards."""
    training = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(training)
