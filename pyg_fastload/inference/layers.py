r"""The model contract of layer-wise inference: what it needs to walk a
model's layers one at a time, read once from the model (:func:`model_layers`)
and checked with errors that name what is missing. A homogeneous model is
the one-relation case of a heterogeneous one: its layer's convolution is
the relation ``None``, from node type ``None`` to itself."""
from __future__ import annotations

import inspect
import typing
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence

import torch
from torch import Tensor
from torch_geometric.nn import GCNConv, HeteroConv, MessagePassing
from torch_geometric.nn.conv.hetero_conv import group
from torch_geometric.nn.models.basic_gnn import BasicGNN

from ..graph import EdgeType

__all__ = ['ModelLayers', 'model_layers', 'check_conv', 'is_gcn',
           'takes_pair', 'AUTO', 'NodeInputs']

#: ``between``'s default: read it from a PyG ``BasicGNN``; any other model
#: must say what comes between its layers.
AUTO = 'auto'

#: Convolutions whose output at a node reads more than its in-edges and
#: its in-neighbours' rows (several hops, or a graph-wide operator).
_NOT_ONE_HOP = ('SGConv', 'TAGConv', 'APPNP', 'ChebConv', 'ARMAConv',
                'SSGConv', 'MixHopConv', 'DNAConv', 'GCN2Conv', 'FAConv',
                'GPRGNN', 'LGConv', 'GatedGraphConv')
#: Convolutions normalising an edge by its source's degree too (as GCN),
#: which a chunk's block does not hold.
_SOURCE_DEGREE = ('PDNConv',)
#: How ``HeteroConv`` may group its relations' outputs here.
_GROUPS = ('sum', 'mean', 'max', 'min', 'cat')

#: ``node_inputs(node_type, n_id, x)``: the first layer's rows of nodes
#: :obj:`n_id` of a type (:obj:`x`: their features, :obj:`None` if the type
#: has none).
NodeInputs = Callable[[str, Tensor, Optional[Tensor]], Tensor]


@dataclass
class ModelLayers:
    r"""A model seen as layer-wise inference walks it.

    Attributes:
        convs (list): the message-passing layers, first to last
            (``HeteroConv`` layers where :attr:`hetero`).
        between (callable): ``between(i, x)``, what follows layer ``i``
            where :attr:`after` says so (activation, norm, dropout).
        after (list): for every layer, whether :obj:`between` follows it.
        head (callable, optional): ``head(xs)`` over the rows of the layers
            :attr:`head_reads` names (row by row, e.g. jumping knowledge then
            a linear layer): the model's output; :obj:`None`: the last
            layer's rows are the output.
        head_reads (list): the layers whose outputs :attr:`head` reads.
        hetero (bool): the layers are ``HeteroConv``'s, one convolution
            per relation.
        node_inputs (callable, optional): the first layer's rows of a node
            type (see :data:`NodeInputs`; :obj:`None`: its features).
    """
    convs: List[Any]
    between: Callable[[int, Tensor], Tensor]
    after: List[bool]
    head: Optional[Callable[[List[Tensor]], Tensor]] = None
    head_reads: Sequence[int] = ()
    hetero: bool = False
    node_inputs: Optional[NodeInputs] = None

    @property
    def num_layers(self) -> int:
        return len(self.convs)

    @property
    def fused_head(self) -> bool:
        r"""Whether :attr:`head` reads the last layer only, and so runs on
        each chunk of it as it is computed."""
        return self.head is not None and \
            list(self.head_reads) == [self.num_layers - 1]

    @property
    def head_pass(self) -> bool:
        r"""Whether :attr:`head` reads several layers: a pass over every
        node's rows after the last layer."""
        return self.head is not None and not self.fused_head

    def relations(self, layer: int) -> Dict[Optional[EdgeType], Any]:
        r"""Layer :obj:`layer`'s convolution of every relation (a
        homogeneous model's: of relation :obj:`None`)."""
        conv = self.convs[layer]
        if not self.hetero:
            return {None: conv}
        return {_edge_type(key): c for key, c in conv.convs.items()}

    def group(self, layer: int, ys: List[Tensor]) -> Tensor:
        r"""The outputs :obj:`ys` of layer :obj:`layer`'s relations into
        one node type, grouped as ``HeteroConv`` groups them."""
        return group(ys, self.convs[layer].aggr) if self.hetero else ys[0]

    def keeps(self, layer: int) -> bool:
        r"""Whether layer :obj:`layer`'s outputs are read again after the
        next layer is computed (by :attr:`head`)."""
        return self.head_pass and layer in self.head_reads


def _nothing(_: int, x: Tensor) -> Tensor:
    return x


def _edge_type(key: Any) -> EdgeType:
    r"""``HeteroConv`` keys its relations by ``'src__rel__dst'``."""
    return tuple(key.split('__')) if isinstance(key, str) else tuple(key)


def _check_norm(norm: torch.nn.Module, layer: int) -> None:
    r"""Refuses a norm whose output at a row reads other rows in eval mode:
    a chunk of rows would change it."""
    inner = getattr(norm, 'module', norm)  # PyG's BatchNorm wraps torch's
    if isinstance(norm, (torch.nn.Identity, torch.nn.LayerNorm)):
        return
    if isinstance(inner, torch.nn.modules.batchnorm._BatchNorm) and \
            inner.track_running_stats:
        return
    if type(norm).__name__ == 'LayerNorm' and \
            getattr(norm, 'mode', None) == 'node':
        return
    raise NotImplementedError(
        f"the model's norms[{layer}] is {type(norm).__name__}, which "
        f"normalises over many nodes at once in eval mode: computed on "
        f"chunks of nodes it would give other results than the full-batch "
        f"forward. Layer-wise inference takes row-wise norms (BatchNorm "
        f"with running statistics, LayerNorm(mode='node'), none)")


def _basic_gnn(model: BasicGNN) -> ModelLayers:
    for layer, norm in enumerate(model.norms):
        _check_norm(norm, layer)
    act, act_first = model.act, model.act_first
    norms, dropout = model.norms, model.dropout

    def between(i: int, x: Tensor) -> Tensor:
        # BasicGNN.forward's steps after a conv, in eval mode
        if act is not None and act_first:
            x = act(x)
        x = norms[i](x)
        if act is not None and not act_first:
            x = act(x)
        return dropout(x)

    num_layers = len(model.convs)
    if model.jk_mode is None:
        return ModelLayers(list(model.convs), between,
                           [i < num_layers - 1 for i in range(num_layers)])
    jk = getattr(model, 'jk', None)  # absent for jk='last'
    lin = getattr(model, 'lin', None)

    def head(xs: List[Tensor]) -> Tensor:
        x = jk(xs) if jk is not None else xs[-1]
        return lin(x) if lin is not None else x

    reads = list(range(num_layers)) if jk is not None else [num_layers - 1]
    return ModelLayers(list(model.convs), between, [True] * num_layers,
                       head, reads)


def check_conv(conv: Any, where: str) -> None:
    r"""Refuses a layer layer-wise inference cannot compute from each
    node's in-edges and in-neighbours' rows; :obj:`where` names it."""
    kind = type(conv).__name__
    if not isinstance(conv, MessagePassing):
        raise TypeError(f"{where} is a {kind}, not a "
                        f"torch_geometric.nn.MessagePassing layer")
    if kind in _SOURCE_DEGREE:
        raise NotImplementedError(
            f"{where} is a {kind}, which normalises every edge by its "
            f"source's degree over the whole graph: only GCNConv's "
            f"normalisation is computed that way here")
    if kind in _NOT_ONE_HOP:
        raise NotImplementedError(
            f"{where} is a {kind}, which reads more than one hop (or the "
            f"whole graph) per layer: layer-wise inference computes each "
            f"layer from its nodes' in-neighbours only")
    if getattr(conv, 'flow', 'source_to_target') != 'source_to_target':
        raise NotImplementedError(
            f"{where} has flow={conv.flow!r}: layer-wise inference "
            f"aggregates over in-neighbours (flow='source_to_target')")


def model_layers(model: Any, between: Any = AUTO,
                 hetero: bool = False) -> ModelLayers:
    r"""The layers of :obj:`model` as layer-wise inference walks them (see
    :func:`~pyg_fastload.inference.layerwise_inference` for the contract),
    or an error naming what is missing.

    Args:
        model (torch.nn.Module): the model.
        between (callable, None or str): what follows each layer but the
            last; ``'auto'``: read from a ``BasicGNN``, or (:obj:`hetero`)
            the model's ``between(i, x)`` method.
        hetero (bool): the model is run on a heterogeneous graph: its
            layers are ``HeteroConv``'s, its first layer's rows
            ``model.node_inputs(node_type, n_id, x)`` if it has one.

    Example:
        >>> from torch_geometric.nn import GraphSAGE
        >>> from pyg_fastload.inference import model_layers
        >>> model_layers(GraphSAGE(8, 16, num_layers=2)).num_layers
        2
    """
    name = type(model).__name__
    convs = _hetero_convs(model) if hetero else _convs(model)
    for i, layer in enumerate(convs):
        if not hetero:
            check_conv(layer, f'{name}.convs[{i}]')
            continue
        if layer.aggr not in _GROUPS:
            raise NotImplementedError(
                f"{name}.convs[{i}] groups its relations with "
                f"aggr={layer.aggr!r}: layer-wise inference takes 'sum', "
                f"'mean', 'max', 'min' or 'cat'")
        for key, conv in layer.convs.items():
            check_conv(conv, f"{name}.convs[{i}]['{key}']")
    if isinstance(between, str) and between == AUTO:
        if not hetero and isinstance(model, BasicGNN):
            return _basic_gnn(model)
        between = getattr(model, 'between', None) if hetero else None
        if not callable(between):
            raise TypeError(
                f"{name} has 'convs' but layer-wise inference cannot tell "
                f"what its forward does between them: "
                f"{'give it a method between(i, x), or ' if hetero else ''}"
                f"pass between=f, where f(i, x) returns what follows layer "
                f"i's output x (called after every layer but the last"
                f"{' on every node type' if hetero else ''}; e.g. lambda i, "
                f"x: x.relu()), or between=None if nothing does")
    if between is None:
        between = _nothing
    if not callable(between):
        raise TypeError(f"'between' must be a callable f(i, x), None or "
                        f"'auto', got {type(between).__name__}")
    inputs = getattr(model, 'node_inputs', None) if hetero else None
    return ModelLayers(convs, between,
                       [i < len(convs) - 1 for i in range(len(convs))],
                       hetero=hetero,
                       node_inputs=inputs if callable(inputs) else None)


def _convs(model: Any) -> List[Any]:
    r"""A homogeneous model's ``convs``, or an error naming what is
    missing."""
    name = type(model).__name__
    convs = getattr(model, 'convs', None)
    if not isinstance(model, torch.nn.Module) or convs is None:
        hint = ''
        if getattr(model, 'net', None) is not None:
            hint = (f" ({name} holds its network in '.net': pass "
                    f"model.net)")
        elif type(model).__name__ == 'MLP':
            hint = (" (an MLP reads no neighbours: apply it to the feature "
                    "rows in chunks)")
        raise TypeError(
            f"layer-wise inference walks a model's message-passing layers "
            f"one at a time and needs them as 'model.convs', a list of "
            f"torch_geometric.nn.MessagePassing layers (as PyG's GraphSAGE, "
            f"GCN and GAT have); {name} has no 'convs'{hint}")
    if isinstance(convs, torch.nn.Module) and \
            not isinstance(convs, torch.nn.ModuleList):
        raise TypeError(f"{name}.convs is a {type(convs).__name__}, not a "
                        f"list of MessagePassing layers")
    convs = list(convs)
    if not convs:
        raise ValueError(f"{name}.convs is empty: there is no layer to "
                         f"compute")
    return convs


def _hetero_convs(model: Any) -> List[HeteroConv]:
    r"""A heterogeneous model's ``HeteroConv`` layers, or an error naming
    what is missing."""
    convs = getattr(model, 'convs', None)
    if not isinstance(model, torch.nn.Module) or convs is None or \
            not len(convs) or not all(isinstance(c, HeteroConv)
                                      for c in convs):
        raise TypeError(
            f"layer-wise inference of a heterogeneous graph walks a model's "
            f"layers one at a time and needs them as 'model.convs', a list "
            f"of torch_geometric.nn.HeteroConv layers; "
            f"{type(model).__name__} has none (a to_hetero model's layers "
            f"are rewritten by torch.fx and cannot be walked: build it with "
            f"HeteroConv)")
    return list(convs)


def is_gcn(conv: MessagePassing) -> bool:
    r"""Whether :obj:`conv` is a ``GCNConv`` (computed with the graph's
    full normalisation, not from a bipartite input it does not take)."""
    return isinstance(conv, GCNConv)


def takes_pair(conv: MessagePassing) -> bool:
    r"""Whether :obj:`conv` takes bipartite input, ``conv((x_src, x_dst),
    edge_index)``, by its ``forward``'s annotation of ``x`` (PyG writes
    ``Union[Tensor, PairTensor]`` there for the layers that do)."""
    try:
        params = list(inspect.signature(conv.forward).parameters.values())
    except (TypeError, ValueError):
        return True
    if not params:
        return True
    annotation = params[0].annotation
    if annotation is inspect.Parameter.empty:
        return True
    if isinstance(annotation, str):
        return 'Tuple' in annotation or 'Pair' in annotation
    return any(typing.get_origin(arg) is tuple
               for arg in typing.get_args(annotation))
