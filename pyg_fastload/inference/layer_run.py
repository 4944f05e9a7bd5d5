r"""The engine of layer-wise inference (:class:`LayerRun`): the layers in
turn, each for every node type a relation leads into (a homogeneous graph:
its one type, ``None``), over chunks of destination nodes, the next chunk
prepared while the current one computes, each layer's outputs placed in
memory or in a file by size; :func:`apply_layer` runs one convolution on
one chunk's block."""
from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import (Any, Callable, Dict, Iterator, List, Optional, Tuple,
                    Union)

import torch
from torch import Tensor
from tqdm.auto import tqdm

from ..config import format_bytes
from ..distributed.collectives import Collectives
from ..graph import CSCTopology, EdgeType, HeteroTopology, is_topology
from ..storage import TieredFeatureStore
from .blocks import Block, GcnScale, chunk_block, chunk_generator, gcn_scale
from .layers import ModelLayers, is_gcn, takes_pair
from .outputs import LayerOutput, output_file
from .streamed import (BLOCK_ROWS, aggregate_range, apply_virtual, is_mean,
                       stream_ranges, streamable)

__all__ = ['LayerRun', 'apply_layer', 'Rows']

Rows = Callable[[Tensor], Tensor]
#: What a chunk's preparation hands the layer: ``(conv, block, x_src,
#: x_dst)`` per relation into the chunk's type.
Chunk = List[Tuple[Any, Block, Tensor, Optional[Tensor]]]
#: A node type (:obj:`None`: a homogeneous graph's one type).
NodeType = Optional[str]
Relation = Optional[EdgeType]
Outputs = Dict[NodeType, LayerOutput]


def _ends(relation: Relation) -> Tuple[NodeType, NodeType]:
    r"""The source and destination type of :obj:`relation`."""
    return (None, None) if relation is None else (relation[0], relation[2])


class LayerRun:
    r"""One inference: the layers in turn, then the head.

    Called with the first layer's rows of every node type (``{None:
    read}`` for a homogeneous graph), it returns the outputs of every type
    the last layer leads into: a dict by type, or a homogeneous graph's
    tensor (with ``keep_hidden``, a pair of them)."""
    def __init__(self, layers: ModelLayers,
                 topology: Union[CSCTopology, HeteroTopology],
                 fanouts: List[int], seed: int, chunk_size: int,
                 budget: int, work: Optional[Path], device: torch.device,
                 prefetch: bool, progress: bool, depth: int,
                 keep_hidden: bool = False,
                 collectives: Optional[Collectives] = None,
                 stream: bool = False,
                 reduce: Optional[Callable[[Tensor], Tensor]] = None):
        self.layers, self.topology = layers, topology
        #: Whether the graph has node and edge types (else one of each).
        self.hetero = is_topology(topology, hetero=True)
        self.node_types: List[NodeType] = list(topology.node_types) \
            if self.hetero else [None]
        self._relations: Dict[Relation, CSCTopology] = \
            {e: topology.relation_topology(e)
             for e in topology.edge_types} if self.hetero else \
            {None: topology}
        #: The ranks sharing the chunks of every layer (None: this one
        #: computes all).
        self.collectives = collectives
        #: Whether layers that aggregate by a mean or a sum stream their
        #: input (:mod:`~pyg_fastload.inference.streamed`).
        self.stream = stream
        #: The layers computed: all, or all but the last (``hidden``).
        self.depth = depth
        #: Whether the last layer's input is returned too (``with_hidden``).
        self.keep_hidden = keep_hidden
        #: What the returned rows are stored as, chunk by chunk (None: as
        #: computed), and the layer they come from (``depth``: the head).
        self.reduce = reduce
        self._returned = depth if getattr(layers, 'head_pass', False) and \
            depth == layers.num_layers else depth - 1
        self.fanouts, self.seed = fanouts, seed
        self.chunk_size, self.budget, self.work = chunk_size, budget, work
        self.device, self.prefetch, self.progress = device, prefetch, progress
        self.store = TieredFeatureStore()
        self.outputs: List[LayerOutput] = []  # alive, in memory or files
        self.kept: Dict[int, Outputs] = {}  # by layer, for the head
        self._scales: Dict[Tuple[Relation, bool], GcnScale] = {}

    def __call__(self, reads: Dict[NodeType, Rows]) -> Any:
        layers = self.layers
        reads = dict(reads)
        held: Outputs = {}
        hidden: Outputs = {}  # the last layer's input
        computed: Outputs = {}
        try:
            for i in range(self.depth):
                if self.keep_hidden and i == layers.num_layers - 1:
                    hidden = {t: held[t] for t in computed}
                computed = self._layer(i, reads)
                if layers.keeps(i):
                    self.kept[i] = computed
                for node_type, output in computed.items():
                    before = held.get(node_type)
                    if before is not None and node_type not in hidden and \
                            not layers.keeps(i - 1):
                        self._drop(before)
                    held[node_type] = output
                    reads[node_type] = output.rows
            # the types into which a relation of the last layer leads
            final = {t: self._head(t) for t in computed} \
                if layers.head_pass and self.depth == layers.num_layers \
                else {t: held[t] for t in computed}
            out = self._keep(final, 'output')
            return (out, self._keep(hidden, 'hidden')) if hidden else out
        finally:
            for output in list(self.outputs):
                self._drop(output)  # (a kept one is the caller's now)

    def _keep(self, outputs: Outputs, kind: str) -> Any:
        r"""The returned rows of every type (a homogeneous graph's tensor),
        kept in files in :attr:`work` where over the budget."""
        kept = {t: output.keep_as(self._kept_file(output_file(
                    kind, None if t is None else self.node_types.index(t))))
                for t, output in outputs.items()}
        return kept if self.hetero else kept[None]

    def _kept_file(self, name: str) -> Optional[Path]:
        r"""Where returned rows over the budget are kept."""
        return None if self.work is None else self.work / name

    def _num_nodes(self, node_type: NodeType) -> int:
        return self.topology.num_nodes if node_type is None else \
            self.topology.num_nodes_of(node_type)

    # One layer ###############################################################

    def _scale(self, relation: Relation, conv: Any) -> Optional[GcnScale]:
        if not (is_gcn(conv) and conv.normalize):
            return None
        key = (relation, bool(conv.add_self_loops))
        if key not in self._scales:
            self._scales[key] = gcn_scale(self._relations[relation], key[1])
        return self._scales[key]

    def _layer(self, i: int, reads: Dict[NodeType, Rows]) -> Outputs:
        r"""Layer :obj:`i`'s outputs of every type a relation leads
        into."""
        layers = self.layers
        by_type: Dict[NodeType, List[Tuple[Relation, Any]]] = {}
        for relation, conv in layers.relations(i).items():
            if relation not in self._relations:
                raise ValueError(f"the model's convs[{i}] has relation "
                                 f"{list(relation)}, which the graph does "
                                 f"not have; its relations: "
                                 f"{[list(e) for e in self._relations]}")
            by_type.setdefault(_ends(relation)[1], []).append(
                (relation, conv))
        last = i == layers.num_layers - 1

        def compute(parts: Chunk) -> Tensor:
            return self._finish(i, layers.group(i, [
                apply_layer(conv, x_src, block, self.device,
                            takes_pair(conv), x_dst)
                for conv, block, x_src, x_dst in parts]))

        out: Outputs = {}
        for node_type, relations in by_type.items():
            rows = self._num_nodes(node_type)
            relation, conv = relations[0]
            if len(relations) == 1 and self._streams(i, conv):
                computed = self._streamed_rows(
                    i, conv, self._relations[relation], reads[node_type])
            else:
                computed = self._layer_rows(
                    rows, lambda chunk: self._prepare(i, chunk, rows,
                                                      relations, reads),
                    compute)
            name, desc = f'layer{i + 1}', f'layer {i + 1}/{layers.num_layers}'
            if node_type is not None:
                name, desc = f'{name}.{node_type}', f'{desc} {node_type}'
            output: Optional[LayerOutput] = None
            with self._bar(desc, rows) as bar:
                for start, y in computed:
                    y = self._stored(i, y)
                    if output is None:
                        output = self._place(name, y,
                                             last and not layers.head_pass,
                                             rows)
                    output.write(start, y)
                    bar.update(y.size(0))
            output.seal()
            out[node_type] = output
        return out

    def _prepare(self, layer: int, chunk: int, rows: int,
                 relations: List[Tuple[Relation, Any]],
                 reads: Dict[NodeType, Rows]) -> Chunk:
        r"""The blocks of chunk :obj:`chunk` of a type of :obj:`rows`
        nodes, one per relation into it, with their rows: the sources', and
        the chunk's own where a relation comes from another type."""
        start = chunk * self.chunk_size
        end = min(start + self.chunk_size, rows)
        fanout = self.fanouts[layer]
        dst_rows: Optional[Tensor] = None
        parts = []
        for r, (relation, conv) in enumerate(relations):
            src, dst = _ends(relation)
            same = src == dst
            generator = chunk_generator(self.seed, layer, chunk * len(
                relations) + r) if fanout >= 0 else None
            block = chunk_block(self._relations[relation], start, end,
                                fanout, generator,
                                self._scale(relation, conv), own_first=same)
            x_src = reads[src](block.sources).to(self.device,
                                                 non_blocking=True)
            if same:
                x_dst = None
            else:
                if dst_rows is None:
                    dst_rows = reads[dst](torch.arange(start, end)).to(
                        self.device)
                x_dst = dst_rows
            parts.append((conv, block, x_src, x_dst))
        return parts

    def _stored(self, i: int, y: Tensor) -> Tensor:
        r"""What is stored of layer :obj:`i`'s rows :obj:`y` (``i ==
        depth``: the head's): :attr:`reduce`'s rows where they are the
        returned ones."""
        if self.reduce is None or i != self._returned:
            return y
        out = self.reduce(y)
        if not isinstance(out, Tensor) or out.dim() == 0 or \
                out.size(0) != y.size(0):
            got = type(out).__name__ if not isinstance(out, Tensor) else \
                f'shape {list(out.shape)}'
            raise ValueError(f"'reduce' must return one row per row it is "
                             f"given ({y.size(0)} here), got {got}")
        return out

    def _finish(self, i: int, y: Tensor) -> Tensor:
        r"""What follows layer :obj:`i`'s convolution: the model's
        ``between`` and, after the last layer, a head that reads it
        alone."""
        layers = self.layers
        if layers.after[i]:
            y = layers.between(i, y)
        fused_head = i == layers.num_layers - 1 and layers.fused_head
        return layers.head([y]) if fused_head else y

    def _streams(self, i: int, conv: Any) -> bool:
        r"""Whether layer :obj:`i` aggregates by streaming its input
        (:attr:`stream`, a mean or sum over every in-neighbour, one
        rank)."""
        return self.stream and streamable(conv) and self.fanouts[i] < 0 \
            and (self.collectives is None or
                 self.collectives.world_size == 1)

    def _streamed_rows(self, i: int, conv: Any, topology: CSCTopology,
                       read: Rows) -> Iterator[Tuple[int, Tensor]]:
        r"""``(first row, outputs)`` of every chunk of layer :obj:`i` over
        relation :obj:`topology`, its aggregation streamed range by range
        (:mod:`~pyg_fastload.inference.streamed`)."""
        first = read(torch.arange(1))
        row_bytes = first[0].numel() * first.element_size()
        held = sum(o.nbytes for o in self.outputs if o.in_memory)
        ranges = list(stream_ranges(topology, row_bytes,
                                    max(0, self.budget - held),
                                    self.chunk_size))
        # the passes over the input, block by block (a range's aggregation
        # reads it all before the layer's bar moves)
        with self._bar(f'layer {i + 1}/{self.layers.num_layers} input, '
                       f'{len(ranges)} passes',
                       -(-topology.num_nodes // BLOCK_ROWS) *
                       len(ranges), unit='block') as bar:

            def counted(ids: Tensor) -> Tensor:
                rows = read(ids)
                bar.update(1)
                return rows

            for start, end in ranges:
                aggregated = aggregate_range(topology, counted, start,
                                             end, is_mean(conv))
                for at in range(start, end, self.chunk_size):
                    stop = min(end, at + self.chunk_size)
                    y = apply_virtual(
                        conv, aggregated[at - start:stop - start].to(
                            self.device),
                        read(torch.arange(at, stop)).to(self.device))
                    yield at, self._finish(i, y).cpu()

    def _layer_rows(self, rows: int, prepare: Callable[[int], Chunk],
                    compute: Callable[[Chunk], Tensor]
                    ) -> Iterator[Tuple[int, Tensor]]:
        r"""``(first row, outputs)`` on the CPU of every chunk of a layer
        over :obj:`rows` destination nodes: each computed here, or, with
        :attr:`collectives`, every ``world_size``-th here (chunks ``rank,
        rank + world_size, ...``) and the others received from the ranks
        that computed them, one exchange per round of ``world_size``
        chunks (every rank gets every row: the next layer reads any)."""
        count = -(-rows // self.chunk_size)
        coll = self.collectives
        if coll is None or coll.world_size == 1:
            for chunk, prepared in enumerate(self._chunks(range(count),
                                                          prepare)):
                yield chunk * self.chunk_size, compute(prepared).cpu()
            return
        world, rank = coll.world_size, coll.rank
        mine = (compute(prepared).cpu() for prepared in self._chunks(
            range(rank, count, world), prepare))
        dtype: Optional[torch.dtype] = None
        for first in range(0, count, world):
            y = next(mine) if first + rank < count else None
            if y is not None:
                dtype = y.dtype
            # flat rows travel: a rank without a chunk this round sends none
            flat = torch.empty(0, dtype=dtype or torch.float32) \
                if y is None else y.reshape(-1)
            got = coll.exchange([flat] * world, 'features',
                                f'layer-wise inference: chunks {first} to '
                                f'{min(first + world, count) - 1}')
            for source, values in enumerate(got):
                chunk = first + source
                if chunk < count:
                    start = chunk * self.chunk_size
                    size = min(self.chunk_size, rows - start)
                    yield start, values.view(size, -1)

    def _chunks(self, chunks: range, prepare: Callable[[int], Chunk]
                ) -> Iterator[Chunk]:
        r"""``prepare(chunk)`` for :obj:`chunks` in turn, the next one
        prepared in a background thread while the current one is used
        (:attr:`prefetch`)."""
        if not self.prefetch or len(chunks) <= 1:
            for chunk in chunks:
                yield prepare(chunk)
            return
        with ThreadPoolExecutor(1, thread_name_prefix='layerwise') as pool:
            ahead: Future = pool.submit(prepare, chunks[0])
            try:
                for k in range(len(chunks)):
                    current = ahead.result()
                    if k + 1 < len(chunks):
                        ahead = pool.submit(prepare, chunks[k + 1])
                    yield current
            finally:
                ahead.cancel()

    # The head (jumping knowledge) ############################################

    def _head(self, node_type: NodeType) -> LayerOutput:
        r"""The head's rows of :obj:`node_type`, from the layers it
        reads."""
        layers = self.layers
        reads = [self.kept[j][node_type] for j in layers.head_reads]
        output: Optional[LayerOutput] = None
        num_nodes = self._num_nodes(node_type)
        with self._bar('head', num_nodes) as bar:
            for start in range(0, num_nodes, self.chunk_size):
                ids = torch.arange(start, min(start + self.chunk_size,
                                              num_nodes))
                y = self._stored(self.depth, layers.head(
                    [r.rows(ids).to(self.device) for r in reads]))
                if output is None:
                    output = self._place('head', y, True, num_nodes)
                output.write(start, y.cpu())
                bar.update(ids.numel())
        output.seal()
        for read in reads:
            self._drop(read)
        return output

    # Where outputs go ########################################################

    def _place(self, name: str, y: Tensor, final: bool,
               rows: int) -> LayerOutput:
        r"""Where :obj:`rows` outputs shaped as :obj:`y`'s rows go: memory
        within the budget, else a file in :attr:`work`."""
        shape = (rows, *y.shape[1:])
        size = rows * y[0].numel() * y.element_size()
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

    def _bar(self, desc: str, total: int, unit: str = 'node') -> Any:
        return tqdm(total=total, desc=desc, unit=unit,
                    disable=not self.progress, dynamic_ncols=True)


def apply_layer(conv: Any, x: Tensor, block: Block, device: torch.device,
                pair: bool, x_dst: Optional[Tensor] = None) -> Tensor:
    r"""Layer :obj:`conv` on one block: bipartite where it takes a
    :obj:`pair` of inputs, as PyG's layers do, and always across two node
    types, with the destination rows :obj:`x_dst` (as ``HeteroConv`` calls
    it); ``GCNConv`` as its ``forward`` computes, with the block's
    weights."""
    # A layer that aggregates with one sparse-dense product where it has
    # one (PyG's 'fuse': SAGEConv, GCNConv, GINConv, ...) gets the block
    # as a sparse matrix: no message per edge is made. On the CPU, where
    # torch's sparse products take every reduction.
    fused = getattr(conv, 'fuse', False) and device.type == 'cpu'
    gcn = is_gcn(conv)
    pair = pair or x_dst is not None
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
        return conv((x, x[:block.num_dst] if x_dst is None else x_dst),
                    edges)
    # A layer of one node set: the block as a graph of its sources, whose
    # first rows (the chunk's nodes) hold every in-edge they have
    return conv(x, edges)[:block.num_dst]
