r"""Layer-wise inference: every node's output, one layer at a time over all
its in-neighbours (PyG's ``examples/reddit.py`` pattern, in the library),
with each layer's outputs in memory or in a file by size."""
from __future__ import annotations

import contextlib
import sys
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence
from typing import Tuple, Union

import torch
from torch import Tensor
from tqdm.auto import tqdm

from ..config import (available_memory, check_fanouts, format_bytes,
                      parse_budget)
from ..graph import CSCTopology, graph_input, stores_of, topology_of
from ..storage import TieredFeatureStore
from .blocks import Block, GcnScale, chunk_block, chunk_generator, gcn_scale
from .layers import (AUTO, ModelLayers, is_gcn, model_layers,
                     takes_pair)
from .outputs import OUTPUT_FILE, LayerOutput

__all__ = ['layerwise_inference']

Rows = Callable[[Tensor], Tensor]

#: The issue that plans heterogeneous layer-wise inference.
_HETERO = ("layer-wise inference of a heterogeneous graph (HeteroData, "
           "to_hetero models) is not supported yet (issue 45): pass a "
           "homogeneous graph, e.g. data.to_homogeneous()")


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
) -> Tensor:
    r"""The model's output for every node, computed layer by layer: layer 1
    for all nodes in chunks of :obj:`chunk_size` destination nodes over all
    their in-neighbours, then layer 2 from layer 1's outputs, and so on
    (PyG's ``examples/reddit.py`` pattern, without a sampler and with each
    layer computed only for the chunk's nodes). With every in-neighbour the
    result equals the full-batch ``model(x, edge_index)`` for every node,
    within float tolerance, at a cost of one pass over the edges per layer
    instead of ``fan-out ** layers`` per node.

    For each chunk, the layer reads a bipartite block: the rows of the
    chunk's nodes followed by their other in-neighbours (each once), and the
    chunk's in-edges as a local ``edge_index``; it runs as
    ``conv((x_src, x_dst), edge_index)``, as PyG's layers take bipartite
    input, then what the model does between layers (in eval mode: dropout
    is off). On the CPU, a layer that aggregates with one sparse-dense
    product (PyG's fused ``message_and_aggregate``: ``SAGEConv``,
    ``GCNConv``, ``GINConv``, ...) gets the block as a sparse CSR
    ``adj_t`` instead, which makes no message per edge. A layer that takes
    one node set, such as ``PNAConv``, runs on the block as a graph of its
    sources and keeps the chunk's rows. ``GCNConv``, which takes no
    bipartite input and normalises by source degrees, is computed with its
    normalisation over the whole graph (``gcn_norm`` with self-loops,
    degrees from every in-edge), so it is exact too. While a chunk
    computes, a background thread builds the next one and gathers its rows
    (:obj:`prefetch`).

    **Where each layer's outputs go**: a tensor in memory when it fits
    :obj:`memory_budget` (with the other layers' outputs held at the time),
    else a raw row-major file in :obj:`work_dir`, written through a numpy
    memmap and read back memory-mapped through
    :meth:`~pyg_fastload.TieredFeatureStore.put_mmap_tensor`: such a layer
    is never whole in memory. An intermediate layer's file is removed as
    soon as the next layer is computed (and on any error or Ctrl-C). The
    model's outputs, when they do not fit the budget, are kept as
    ``work_dir/output.bin`` (written under a temporary name and renamed
    when complete; raw, row-major, the returned tensor's dtype and shape)
    and returned memory-mapped copy-on-write.

    **The model contract**: :obj:`model` exposes its message-passing layers
    as ``model.convs`` (a list of ``torch_geometric.nn.MessagePassing``
    layers, each reading one hop along ``flow='source_to_target'``), and
    is either

    - a PyG ``BasicGNN`` (``torch_geometric.nn.GraphSAGE``, ``GCN``,
      ``GAT``, ``GIN``, ...; the network of
      ``pyg_fastload.lightning.NodeClassifier`` is its ``.net``): what its
      ``forward`` does between layers is read from it (``act``,
      ``act_first``, ``norms``, ``dropout``, and ``jk`` with ``lin``, which
      then run on every node's rows after the last layer). Its norms must be
      row-wise in eval mode (``BatchNorm`` with running statistics,
      ``LayerNorm(mode='node')``, none);
    - or any module with ``convs``, given :obj:`between`: ``f(i, x)``
      returning what follows layer ``i``'s output ``x`` in the model's
      forward, called after every layer but the last (``None``: nothing).

    The convolutions get no edge weights or edge features.

    Args:
        model (torch.nn.Module): the model (see the contract above).
        data: a ``torch_geometric.data.Data`` with ``x`` and
            ``edge_index``, or a ``(FeatureStore, GraphStore)`` pair whose
            feature store holds ``x`` (e.g. from
            :func:`~pyg_fastload.open_dataset`). A ``HeteroData`` is not
            supported yet.
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
        work_dir (str or pathlib.Path, optional): the directory of the
            layers that do not fit the budget (made if missing). Without
            it, a layer over the budget is an error.
        device (torch.device, optional): where chunks are computed
            (default: where the model's parameters are); outputs are
            stored on the CPU.
        between (callable or None): see the contract above; ``'auto'``
            reads it from a ``BasicGNN``.
        prefetch (bool): build the next chunk in a background thread.
        progress (bool): a progress bar per layer.
        hidden (bool): instead of the model's outputs, its last hidden
            layer's (what the last convolution reads, after the model's
            activation and norm: every node's embedding). Not for a model
            with ``jk``, whose output reads every layer.

    Returns:
        torch.Tensor: ``[num_nodes, out_channels]``, the rows in node order.

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
    kind = graph_input(data)
    if kind.hetero:
        raise NotImplementedError(_HETERO)
    layers = model_layers(model, between)
    if not isinstance(hidden, bool):
        raise TypeError(f"'hidden' must be True or False, got {hidden!r}")
    if hidden and (layers.num_layers < 2 or layers.head is not None):
        raise ValueError("'hidden=True' returns what the last convolution "
                         "reads: the model needs 2 or more layers and no "
                         "'jk' (whose output reads every layer)")
    fanouts = _fanouts(num_neighbors, layers)
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
    read_x = _features(data, topology.num_nodes)
    if device is None:
        param = next(model.parameters(), None)
        device = param.device if param is not None else torch.device('cpu')
    run = _Run(layers, topology, fanouts, seed, chunk_size, budget, work,
               torch.device(device), prefetch, progress,
               layers.num_layers - 1 if hidden else layers.num_layers)
    with torch.no_grad(), _eval(model):
        return run(read_x)


class _Run:
    r"""One inference: the layers in turn, then the head."""
    def __init__(self, layers: ModelLayers, topology: CSCTopology,
                 fanouts: List[int], seed: int, chunk_size: int,
                 budget: int, work: Optional[Path], device: torch.device,
                 prefetch: bool, progress: bool, depth: int):
        self.layers, self.topology = layers, topology
        #: The layers computed: all, or all but the last (``hidden``).
        self.depth = depth
        self.fanouts, self.seed = fanouts, seed
        self.chunk_size, self.budget, self.work = chunk_size, budget, work
        self.device, self.prefetch, self.progress = device, prefetch, progress
        self.store = TieredFeatureStore()
        self.outputs: List[LayerOutput] = []  # alive, in memory or files
        self.kept: Dict[int, LayerOutput] = {}  # by layer, for the head
        self._scales: Dict[bool, GcnScale] = {}

    def __call__(self, read_x: Rows) -> Tensor:
        layers = self.layers
        final: Optional[LayerOutput] = None
        try:
            read = read_x
            last: Optional[LayerOutput] = None
            for i, conv in enumerate(layers.convs[:self.depth]):
                output = self._layer(i, conv, read)
                if layers.keeps(i):
                    self.kept[i] = output
                if last is not None and not layers.keeps(i - 1):
                    self._drop(last)
                read, last = output.rows, output
            hidden = self.depth < layers.num_layers
            final = self._head() if layers.head_pass and not hidden \
                else last
            return final.keep_as(self.work / OUTPUT_FILE
                                 if self.work is not None else None)
        finally:
            for output in list(self.outputs):
                if output is not final:
                    self._drop(output)

    # One layer ###############################################################

    def _scale(self, conv: Any) -> Optional[GcnScale]:
        if not (is_gcn(conv) and conv.normalize):
            return None
        key = bool(conv.add_self_loops)
        if key not in self._scales:
            self._scales[key] = gcn_scale(self.topology, key)
        return self._scales[key]

    def _prepare(self, layer: int, chunk: int, read: Rows,
                 gcn: Optional[GcnScale]) -> Tuple[Block, Tensor]:
        start = chunk * self.chunk_size
        end = min(start + self.chunk_size, self.topology.num_nodes)
        fanout = self.fanouts[layer]
        generator = chunk_generator(self.seed, layer, chunk) \
            if fanout >= 0 else None
        block = chunk_block(self.topology, start, end, fanout, generator,
                            gcn)
        x = read(block.sources)
        return block, x.to(self.device, non_blocking=True)

    def _layer(self, i: int, conv: Any, read: Rows) -> LayerOutput:
        layers = self.layers
        last = i == layers.num_layers - 1
        fused_head = last and layers.fused_head
        gcn = self._scale(conv)
        pair = takes_pair(conv)
        output: Optional[LayerOutput] = None
        desc = f'layer {i + 1}/{layers.num_layers}'
        with self._bar(desc) as bar:
            for block, x in self._chunks(i, read, gcn):
                y = _apply(conv, x, block, self.device, pair)
                if layers.after[i]:
                    y = layers.between(i, y)
                if fused_head:
                    y = layers.head([y])
                if output is None:
                    output = self._place(f'layer{i + 1}', y,
                                         last and not layers.head_pass)
                output.write(block.start, y.cpu())
                bar.update(block.num_dst)
        output.seal()
        return output

    def _chunks(self, layer: int, read: Rows, gcn: Optional[GcnScale]
                ) -> Iterator[Tuple[Block, Tensor]]:
        count = -(-self.topology.num_nodes // self.chunk_size)
        if not self.prefetch or count == 1:
            for chunk in range(count):
                yield self._prepare(layer, chunk, read, gcn)
            return
        with ThreadPoolExecutor(1, thread_name_prefix='layerwise') as pool:
            ahead: Future = pool.submit(self._prepare, layer, 0, read, gcn)
            try:
                for chunk in range(count):
                    current = ahead.result()
                    if chunk + 1 < count:
                        ahead = pool.submit(self._prepare, layer, chunk + 1,
                                            read, gcn)
                    yield current
            finally:
                ahead.cancel()

    # The head (jumping knowledge) ############################################

    def _head(self) -> LayerOutput:
        layers = self.layers
        reads = [self.kept[j] for j in layers.head_reads]
        output: Optional[LayerOutput] = None
        num_nodes = self.topology.num_nodes
        with self._bar('head') as bar:
            for start in range(0, num_nodes, self.chunk_size):
                ids = torch.arange(start, min(start + self.chunk_size,
                                              num_nodes))
                y = layers.head([r.rows(ids).to(self.device) for r in reads])
                if output is None:
                    output = self._place('head', y, True)
                output.write(start, y.cpu())
                bar.update(ids.numel())
        output.seal()
        for read in reads:
            self._drop(read)
        return output

    # Where outputs go ########################################################

    def _place(self, name: str, y: Tensor, final: bool) -> LayerOutput:
        shape = (self.topology.num_nodes, *y.shape[1:])
        size = self.topology.num_nodes * y[0].numel() * y.element_size()
        held = sum(o.nbytes for o in self.outputs if o.in_memory)
        directory = None
        if held + size > self.budget:
            if self.work is None:
                what = 'the outputs' if final else f'{name}\'s outputs'
                raise ValueError(
                    f"{what} take {format_bytes(size)}, more than the "
                    f"memory budget of {format_bytes(self.budget)} (with "
                    f"{format_bytes(held)} held): give 'work_dir' for them "
                    f"to go to a file, or raise 'memory_budget'")
            directory = self.work
        output = LayerOutput(self.store, name, shape, y.dtype, directory)
        self.outputs.append(output)
        return output

    def _drop(self, output: LayerOutput) -> None:
        output.release()
        if output in self.outputs:
            self.outputs.remove(output)

    def _bar(self, desc: str) -> Any:
        return tqdm(total=self.topology.num_nodes, desc=desc, unit='node',
                    disable=not self.progress, dynamic_ncols=True)


def _apply(conv: Any, x: Tensor, block: Block, device: torch.device,
           pair: bool) -> Tensor:
    r"""Layer :obj:`conv` on one block: bipartite where it takes a
    :obj:`pair` of inputs, as PyG's layers do; ``GCNConv`` as its
    ``forward`` computes, with the block's weights."""
    # A layer that aggregates with one sparse-dense product where it has
    # one (PyG's 'fuse': SAGEConv, GCNConv, GINConv, ...) gets the block
    # as a sparse matrix: no message per edge is made. On the CPU, where
    # torch's sparse products take every reduction.
    fused = getattr(conv, 'fuse', False) and device.type == 'cpu'
    gcn = is_gcn(conv)
    if fused and (pair or gcn):
        edges = block.adjacency(device, x.dtype)
    else:
        edges = block.edge_index.to(device, non_blocking=True)
    if gcn:  # GCNConv.forward after its normalisation
        h = conv.lin(x)
        weight = None if block.edge_weight is None or fused else \
            block.edge_weight.to(device=device, dtype=h.dtype)
        out = conv.propagate(edges, x=h, edge_weight=weight,
                             size=None if fused else
                             (h.size(0), block.num_dst))
        return out if conv.bias is None else out + conv.bias
    if pair:
        return conv((x, x[:block.num_dst]), edges)
    # A layer of one node set: the block as a graph of its sources, whose
    # first rows (the chunk's nodes) hold every in-edge they have
    return conv(x, edges)[:block.num_dst]


# Arguments ###################################################################

def _fanouts(num_neighbors: Optional[Sequence[int]],
             layers: ModelLayers) -> List[int]:
    count = layers.num_layers
    if num_neighbors is None:
        return [-1] * count
    fanouts = check_fanouts(num_neighbors)
    if len(fanouts) != count:
        raise ValueError(f"'num_neighbors' has {len(fanouts)} values for a "
                         f"model of {count} layers: give one per layer")
    for i, (conv, fanout) in enumerate(zip(layers.convs, fanouts)):
        if fanout >= 0 and is_gcn(conv) and conv.normalize:
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
    if (path / OUTPUT_FILE).exists():
        raise FileExistsError(
            f"'work_dir' {str(path)!r} already holds {OUTPUT_FILE} (the "
            f"outputs of an earlier run?): move or remove it, or give "
            f"another directory")
    path.mkdir(parents=True, exist_ok=True)
    return path


def _features(data: Any, num_nodes: int) -> Rows:
    r"""How the input rows are read: ``data.x`` indexed, or the feature
    store's ``x``."""
    stores = stores_of(data)
    if stores is not None:
        feature_store = stores[0]
        size = feature_store.get_tensor_size(attr_name='x', group_name=None)
        if size is None:
            raise ValueError("the FeatureStore has no 'x' tensor: put the "
                             "node features under attr_name='x'")
        rows = size[0]

        def read(ids: Tensor) -> Tensor:
            return feature_store.get_tensor(attr_name='x', group_name=None,
                                            index=ids)
    else:
        x = data.get('x') if hasattr(data, 'get') else None
        if not isinstance(x, Tensor):
            raise ValueError("the data object has no node features 'x': "
                             "set 'data.x'")
        rows = x.size(0)

        def read(ids: Tensor) -> Tensor:
            return torch.index_select(x, 0, ids.to(x.device))
    if rows != num_nodes:
        raise ValueError(f"the node features 'x' have {rows} rows but the "
                         f"graph has {num_nodes} nodes; give every node one "
                         f"row")
    return read


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
