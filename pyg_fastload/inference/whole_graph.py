r"""The whole graph as one evaluation batch (:class:`WholeGraph`): what a
loader gives a model that evaluates or predicts layer-wise (``data.eval:
layerwise``) instead of on sampled neighbourhoods. The model asks it for
its outputs (:meth:`WholeGraph.outputs`: :func:`layerwise_inference` over
every node, then the seeds' rows) and the seeds' labels."""
from __future__ import annotations

from typing import Any, Dict, Iterator, Optional, Tuple

import torch
from torch import Tensor

from ..graph.view import GraphView
from .layerwise import layerwise_inference

__all__ = ['WholeGraph', 'WholeGraphLoader']


class WholeGraph:
    r"""The outputs a model gives :obj:`seeds` (:obj:`None`: every node)
    computed layer-wise over the whole of :obj:`data` (a ``Data``, a
    ``HeteroData`` or a ``(FeatureStore, GraphStore)`` pair), and their
    labels ``y``.

    Args:
        data: the graph.
        seeds (torch.Tensor, optional): the nodes evaluated.
        node_type (str, optional): their type (a heterogeneous graph's
            labelled type, whose outputs are the model's).
        **options: :func:`layerwise_inference` options (``chunk_size``,
            ``memory_budget``, ``work_dir``, ``progress``, ...).
    """
    def __init__(self, data: Any, seeds: Optional[Tensor] = None,
                 node_type: Optional[str] = None, **options: Any):
        self.view = GraphView.of(data)
        if self.view.kind.hetero and node_type is None:
            raise ValueError("a heterogeneous graph's evaluated nodes need "
                             "their 'node_type' (the labelled type)")
        self.data = data
        self.seeds = None if seeds is None else seeds.long()
        self.node_type = node_type
        self.options: Dict[str, Any] = options

    def node_ids(self) -> Tensor:
        r"""The evaluated nodes' ids."""
        if self.seeds is None:
            return torch.arange(self.view.num_nodes(self.node_type))
        return self.seeds

    def outputs(self, model: torch.nn.Module, hidden: bool = False
                ) -> Tensor:
        r""":obj:`model`'s outputs (with :obj:`hidden`: its last hidden
        layer's) for the evaluated nodes, in the order of :meth:`node_ids`
        (:func:`layerwise_inference`, every in-neighbour: the full-batch
        forward's)."""
        return self._evaluated(layerwise_inference(
            model, self.data, hidden=hidden, **self.options))

    def outputs_and_hidden(self, model: torch.nn.Module
                           ) -> Tuple[Tensor, Tensor]:
        r"""As :meth:`outputs`, with the last hidden layer's rows too, both
        from one layer-wise pass."""
        out, hidden = layerwise_inference(model, self.data, with_hidden=True,
                                          **self.options)
        return self._evaluated(out), self._evaluated(hidden)

    def _evaluated(self, out: Any) -> Tensor:
        if self.node_type is not None:
            out = out[self.node_type]
        return out if self.seeds is None else out[self.seeds.to(out.device)]

    def labels(self) -> Optional[Tensor]:
        r"""The evaluated nodes' labels ``y`` (:obj:`None` without any)."""
        y = self.view.node_attr('y', self.node_type, index=self.node_ids())
        return None if y is None else y.view(-1).long()


class WholeGraphLoader:
    r"""A loader of one batch, the :class:`WholeGraph`."""
    def __init__(self, graph: WholeGraph):
        self.graph = graph

    def __iter__(self) -> Iterator[WholeGraph]:
        yield self.graph

    def __len__(self) -> int:
        return 1
