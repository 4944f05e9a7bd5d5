r"""The whole graph as one evaluation batch (:class:`WholeGraph`): what a
loader gives a model that evaluates or predicts layer-wise
(``data.evaluation.method: layerwise``) instead of on sampled
neighbourhoods. The model asks it for its outputs
(:meth:`WholeGraph.outputs`: :func:`layerwise_inference` over every node,
then the seeds' rows) and the seeds' labels."""
from __future__ import annotations

import contextlib
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, Optional, Tuple, Union

import torch
from torch import Tensor

from ..config import SettingError, parse_budget
from ..graph.view import GraphView
from ..io.staging import file_in_the_way
from .layerwise import layerwise_inference

__all__ = ['WholeGraph', 'WholeGraphLoader', 'InferenceOptions']


@dataclass(frozen=True)
class InferenceOptions:
    r"""How a run's layer-wise evaluation and prediction compute
    (``data.evaluation.inference``, with ``data.evaluation.method:
    layerwise``): the options of :func:`~pyg_fastload.layerwise_inference`
    of the same names.

    Args:
        chunk_size (int): destination nodes per chunk.
        memory_budget (int, float or str): bytes of layer outputs held in
            memory at once (``'8GiB'``, a fraction of the memory available,
            ``'auto'``: half of it).
        work_dir (str, optional): where layers over the budget go (a
            graph whose layers do not fit memory needs one).
        stream (bool): stream the mean and sum aggregations over their
            input in order (for inputs on storage larger than memory).

    Example (a YAML config)::

        data:
          evaluation:
            method: layerwise
            inference:
              memory_budget: 12GiB
              work_dir: /scratch/layers
              stream: true
    """
    chunk_size: int = 4096
    memory_budget: Union[int, float, str] = 'auto'
    work_dir: Optional[str] = None
    stream: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.chunk_size, bool) or not isinstance(
                self.chunk_size, int) or self.chunk_size < 1:
            raise SettingError('inference.chunk_size', f"{self.chunk_size!r} "
                               f"must be a positive int")
        try:
            budget = parse_budget(self.memory_budget,
                                  'inference.memory_budget', allow_auto=True)
        except (TypeError, ValueError) as error:
            raise SettingError('inference.memory_budget', str(error)) \
                from None
        if self.work_dir is not None and (
                not isinstance(self.work_dir, str) or not self.work_dir):
            raise SettingError('inference.work_dir', f"{self.work_dir!r} "
                               f"must be a directory path")
        if budget == 0 and self.work_dir is None:  # refused now, not when
            # the first layer is computed
            raise SettingError('inference.memory_budget', f"{budget} holds "
                               f"no layer in memory, and no work_dir is "
                               f"given for the layers to go to files: give "
                               f"inference.work_dir, or a budget above 0")
        if self.work_dir is not None:
            work_dir = Path(self.work_dir).expanduser()
            blocker = file_in_the_way(work_dir)
            if blocker is not None:
                where = 'is a file' if blocker == work_dir else \
                    f"lies under '{blocker}', a file"
                raise SettingError('inference.work_dir', f"'{self.work_dir}' "
                                   f"{where}, not a directory: name a "
                                   f"directory (made if missing)")
        if not isinstance(self.stream, bool):
            raise SettingError('inference.stream', f"{self.stream!r} must "
                               f"be true or false")

    def kwargs(self) -> Dict[str, Any]:
        r"""The :func:`~pyg_fastload.layerwise_inference` arguments."""
        return asdict(self)


class WholeGraph:
    r"""The outputs a model gives :obj:`seeds` (:obj:`None`: every node)
    computed layer-wise over the whole of :obj:`data` (a ``Data``, a
    ``HeteroData`` or a ``(FeatureStore, GraphStore)`` pair), and their
    labels ``y``. The evaluated nodes' rows are returned in memory (the
    layers' files, with a ``work_dir``, are in a directory of each
    inference's own, removed at its end): for outputs larger than memory,
    ask for what each chunk reduces to (``reduce``, e.g. the classes).

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

    def outputs(self, model: torch.nn.Module, hidden: bool = False,
                reduce: Optional[Callable[[Tensor], Tensor]] = None
                ) -> Tensor:
        r""":obj:`model`'s outputs (with :obj:`hidden`: its last hidden
        layer's) for the evaluated nodes, in the order of :meth:`node_ids`
        (:func:`layerwise_inference`, every in-neighbour: the full-batch
        forward's); with :obj:`reduce`, what it makes of every chunk of
        them (e.g. the predicted classes, without storing the outputs)."""
        with self._options() as options:
            return self._evaluated(layerwise_inference(
                model, self.data, hidden=hidden, reduce=reduce, **options),
                options)

    def outputs_and_hidden(self, model: torch.nn.Module,
                           reduce: Optional[Callable[[Tensor], Tensor]] = None
                           ) -> Tuple[Tensor, Tensor]:
        r"""As :meth:`outputs`, with the last hidden layer's rows too, both
        from one layer-wise pass (:obj:`reduce` applies to the outputs)."""
        with self._options() as options:
            out, hidden = layerwise_inference(
                model, self.data, with_hidden=True, reduce=reduce, **options)
            return self._evaluated(out, options), \
                self._evaluated(hidden, options)

    @contextlib.contextmanager
    def _options(self) -> Iterator[Dict[str, Any]]:
        r"""The options of one inference: with a ``work_dir``, a directory
        of its own in it, removed when the inference's rows are read."""
        work_dir = self.options.get('work_dir')
        if work_dir is None:
            yield self.options
            return
        parent = Path(work_dir).expanduser()
        parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix='layerwise-',
                                         dir=parent) as own:
            yield {**self.options, 'work_dir': own}

    def _evaluated(self, out: Any, options: Dict[str, Any]) -> Tensor:
        r"""The evaluated nodes' rows of :obj:`out`, in memory (copied
        from a file in the inference's ``work_dir``, removed after it)."""
        if self.node_type is not None:
            out = out[self.node_type]
        if self.seeds is not None:
            return out[self.seeds.to(out.device)]
        return out if options.get('work_dir') is None else out.clone()

    def labels(self) -> Optional[Tensor]:
        r"""The evaluated nodes' labels ``y`` (:obj:`None` without any)."""
        y = self.view.node_attr('y', self.node_type, index=self.node_ids())
        return None if y is None else y.view(-1).long()


class WholeGraphLoader:
    r"""A loader of one batch, the :class:`WholeGraph`.

    Args:
        graph (WholeGraph): the batch it yields.
    """
    def __init__(self, graph: WholeGraph):
        self.graph = graph

    def __iter__(self) -> Iterator[WholeGraph]:
        yield self.graph

    def __len__(self) -> int:
        return 1
