r"""Layer-wise inference of a heterogeneous graph: the typed case of
:func:`~pyg_fastload.inference.layerwise_inference`, one layer at a time
for every node type a relation leads into, each relation of a
``HeteroConv`` layer over a block of its in-edges, the relations' outputs
grouped per node type as ``HeteroConv`` groups them."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch
from torch import Tensor
from torch_geometric.nn import HeteroConv
from torch_geometric.nn.conv.hetero_conv import group

from ..graph import EdgeType, HeteroTopology
from ..graph.view import GraphView
from .blocks import Block, GcnScale, chunk_block, chunk_generator, gcn_scale
from .layers import AUTO, check_conv, is_gcn, takes_pair
from .layer_run import LayerRun, Rows, apply_layer
from .outputs import LayerOutput

__all__ = ['TypedLayers', 'typed_layers', 'typed_output_file']

#: ``node_inputs(node_type, n_id, x)``: the first layer's rows of nodes
#: :obj:`n_id` of a type (:obj:`x`: their features, :obj:`None` if the type
#: has none).
NodeInputs = Callable[[str, Tensor, Optional[Tensor]], Tensor]


def typed_output_file(index: int, kind: str = 'output') -> str:
    r"""The file of the :obj:`index`-th node type's outputs (or, with
    :obj:`kind` ``'hidden'``, its last hidden layer's rows) in ``work_dir``
    (types are numbered, as their names may not be file names)."""
    return f'{kind}-{index}.bin'


@dataclass
class TypedLayers:
    r"""A heterogeneous model as layer-wise inference walks it.

    Attributes:
        convs (list): ``HeteroConv`` layers, first to last.
        node_inputs (callable): the first layer's rows of a node type
            (see :data:`NodeInputs`).
        between (callable): ``between(i, x)``, what follows layer ``i`` on
            every node type's rows, after every layer but the last.
    """
    convs: List[HeteroConv]
    node_inputs: NodeInputs
    between: Callable[[int, Tensor], Tensor]

    @property
    def num_layers(self) -> int:
        return len(self.convs)

    def relations(self, layer: int) -> Dict[EdgeType, Any]:
        r"""Layer :obj:`layer`'s convolution of every relation."""
        convs = self.convs[layer].convs
        return {_edge_type(key): conv for key, conv in convs.items()}


def _edge_type(key: Any) -> EdgeType:
    r"""``HeteroConv`` keys its relations by ``'src__rel__dst'``."""
    return tuple(key.split('__')) if isinstance(key, str) else tuple(key)


def _features_only(node_type: str, n_id: Tensor,
                   x: Optional[Tensor]) -> Tensor:
    if x is None:
        raise ValueError(
            f"node type {node_type!r} has no features 'x' and the model has "
            f"no node_inputs(node_type, n_id, x) saying what its nodes enter "
            f"the first layer with (an embedding, zeros)")
    return x


def typed_layers(model: Any, between: Any = AUTO) -> TypedLayers:
    r"""The layers of a heterogeneous :obj:`model`, or an error naming what
    is missing. The contract: ``model.convs`` is a list of ``HeteroConv``
    layers whose relations' convolutions each read one hop (as for
    homogeneous models); ``model.node_inputs(node_type, n_id, x)``, if
    defined, gives the first layer's rows (default: the type's features
    ``x`` as they are); what comes between layers is :obj:`between`
    (``'auto'``: the model's ``between(i, x)`` method)."""
    name = type(model).__name__
    convs = getattr(model, 'convs', None)
    if not isinstance(model, torch.nn.Module) or convs is None or \
            not len(convs) or not all(isinstance(c, HeteroConv)
                                      for c in convs):
        raise TypeError(
            f"layer-wise inference of a heterogeneous graph walks a model's "
            f"layers one at a time and needs them as 'model.convs', a list "
            f"of torch_geometric.nn.HeteroConv layers; {name} has none "
            f"(a to_hetero model's layers are rewritten by torch.fx and "
            f"cannot be walked: build it with HeteroConv)")
    for i, layer in enumerate(convs):
        if layer.aggr not in ('sum', 'mean', 'max', 'min', 'cat'):
            raise NotImplementedError(
                f"{name}.convs[{i}] groups its relations with "
                f"aggr={layer.aggr!r}: layer-wise inference takes 'sum', "
                f"'mean', 'max', 'min' or 'cat'")
        for key, conv in layer.convs.items():
            check_conv(conv, f"{name}.convs[{i}]['{key}']")
    if isinstance(between, str) and between == AUTO:
        between = getattr(model, 'between', None)
        if not callable(between):
            raise TypeError(
                f"{name} has 'convs' but layer-wise inference cannot tell "
                f"what its forward does between them: give it a method "
                f"between(i, x), or pass between=f, where f(i, x) returns "
                f"what follows layer i's output x on a node type's rows "
                f"(e.g. lambda i, x: x.relu()), or between=None")
    if between is None:
        def between(_: int, x: Tensor) -> Tensor:
            return x
    if not callable(between):
        raise TypeError(f"'between' must be a callable f(i, x), None or "
                        f"'auto', got {type(between).__name__}")
    inputs = getattr(model, 'node_inputs', None)
    return TypedLayers(list(convs),
                       inputs if callable(inputs) else _features_only,
                       between)


class TypedRun(LayerRun):
    r"""One inference of a heterogeneous graph: the layers in turn, each
    for every node type a relation leads into (types no relation leads into
    keep their rows, as ``HeteroConv`` leaves them out and the models carry
    them on)."""
    def __init__(self, layers: TypedLayers, topology: HeteroTopology,
                 view: GraphView, *options: Any, **kwargs: Any):
        super().__init__(layers, topology, *options,  # type: ignore
                         **kwargs)
        self.typed = layers
        self.view = view
        self._relations = {e: topology.relation_topology(e)
                           for e in topology.edge_types}
        self._typed_scales: Dict[Tuple[EdgeType, bool], GcnScale] = {}

    def run(self) -> Any:
        reads: Dict[str, Rows] = {t: self._input_rows(t)
                                  for t in self.topology.node_types}
        held: Dict[str, LayerOutput] = {}
        hidden: Dict[str, LayerOutput] = {}  # the last layer's input
        computed: Dict[str, LayerOutput] = {}
        try:
            for i in range(self.depth):
                if self.keep_hidden and i == self.typed.num_layers - 1:
                    hidden = {t: held[t] for t in computed}
                computed = self._typed_layer(i, reads)
                for node_type, output in computed.items():
                    if node_type in held and node_type not in hidden:
                        self._drop(held[node_type])
                    held[node_type] = output
                    reads[node_type] = output.rows
            # the types into which a relation of the last layer leads
            out = self._keep({t: held[t] for t in computed}, 'output')
            return (out, self._keep(hidden, 'hidden')) if hidden else out
        finally:
            for output in list(self.outputs):
                self._drop(output)  # (a kept one is the caller's now)

    def _keep(self, outputs: Dict[str, LayerOutput],
              kind: str) -> Dict[str, Tensor]:
        types = self.topology.node_types
        return {t: output.keep_as(self._kept_file(
                    typed_output_file(types.index(t), kind)))
                for t, output in outputs.items()}

    def _input_rows(self, node_type: str) -> Rows:
        view, inputs = self.view, self.typed.node_inputs
        if view.node_attr('x', node_type, torch.zeros(0, dtype=torch.long)) \
                is None:
            def read(ids: Tensor) -> Tensor:
                return inputs(node_type, ids.to(self.device), None)
        else:
            def read(ids: Tensor) -> Tensor:
                x = view.node_attr('x', node_type, ids)
                return inputs(node_type, ids.to(self.device),
                              x.to(self.device))
        return read

    def _typed_layer(self, i: int, reads: Dict[str, Rows]
                     ) -> Dict[str, LayerOutput]:
        layers = self.typed
        by_type: Dict[str, List[Tuple[EdgeType, Any]]] = {}
        for edge_type, conv in layers.relations(i).items():
            if edge_type not in self._relations:
                raise ValueError(f"the model's convs[{i}] has relation "
                                 f"{list(edge_type)}, which the graph does "
                                 f"not have; its relations: "
                                 f"{[list(e) for e in self._relations]}")
            by_type.setdefault(edge_type[2], []).append((edge_type, conv))
        last = i == layers.num_layers - 1
        aggr = layers.convs[i].aggr
        out: Dict[str, LayerOutput] = {}
        def compute(parts: List) -> Tensor:
            y = group([self._typed_apply(conv, block, x_src, x_dst)
                       for conv, block, x_src, x_dst in parts], aggr)
            return y if last else layers.between(i, y)

        for node_type, relations in by_type.items():
            rows = self.topology.num_nodes_of(node_type)
            output: Optional[LayerOutput] = None
            desc = f'layer {i + 1}/{layers.num_layers} {node_type}'
            with self._bar(desc, rows) as bar:
                for start, y in self._layer_rows(
                        rows, lambda chunk: self._typed_prepare(
                            i, chunk, rows, relations, reads), compute):
                    y = self._stored(i, y)
                    if output is None:
                        output = self._place(f'layer{i + 1}.{node_type}', y,
                                             last, rows)
                    output.write(start, y)
                    bar.update(y.size(0))
            output.seal()
            out[node_type] = output
        return out

    def _typed_prepare(self, layer: int, chunk: int, rows: int,
                       relations: List[Tuple[EdgeType, Any]],
                       reads: Dict[str, Rows]) -> List:
        start = chunk * self.chunk_size
        end = min(start + self.chunk_size, rows)
        fanout = self.fanouts[layer]
        dst_rows: Optional[Tensor] = None
        parts = []
        for r, (edge_type, conv) in enumerate(relations):
            src, _, dst = edge_type
            same = src == dst
            generator = chunk_generator(self.seed, layer, chunk * len(
                relations) + r) if fanout >= 0 else None
            block = chunk_block(self._relations[edge_type], start, end,
                                fanout, generator,
                                self._relation_scale(edge_type, conv),
                                own_first=same)
            x_src = reads[src](block.sources).to(self.device)
            if same:
                x_dst = None
            else:
                if dst_rows is None:
                    dst_rows = reads[dst](torch.arange(start, end)).to(
                        self.device)
                x_dst = dst_rows
            parts.append((conv, block, x_src, x_dst))
        return parts

    def _relation_scale(self, edge_type: EdgeType,
                        conv: Any) -> Optional[GcnScale]:
        if not (is_gcn(conv) and conv.normalize):
            return None
        key = (edge_type, bool(conv.add_self_loops))
        if key not in self._typed_scales:
            self._typed_scales[key] = gcn_scale(self._relations[edge_type],
                                                key[1])
        return self._typed_scales[key]

    def _typed_apply(self, conv: Any, block: Block, x_src: Tensor,
                     x_dst: Optional[Tensor]) -> Tensor:
        r"""One relation's convolution on its block: as ``HeteroConv``
        calls it, on one node set within a type, on a pair across two."""
        if x_dst is None:
            return apply_layer(conv, x_src, block, self.device,
                               takes_pair(conv))
        fused = getattr(conv, 'fuse', False) and self.device.type == 'cpu'
        edges = block.adjacency(self.device, x_src.dtype) if fused else \
            block.edge_index.to(self.device, non_blocking=True)
        return conv((x_src, x_dst), edges)
