r"""The sampler seam: which algorithm draws a loader's or a mode's batches,
chosen by name (``neighbor_sampler='labor'`` on a loader, ``data.sampler:
labor`` in a config) or by class, and built for the graph at hand.

A sampler here is PyG's ``BaseSampler`` shape (:class:`GraphSampler`):
``sample_from_nodes`` / ``sample_from_edges``, plus the hops its batches
span and the device it samples on. A **hop-wise** sampler is a
:class:`~pyg_fastload.sampling.FastNeighborSampler` subclass that
overrides :meth:`~pyg_fastload.sampling.FastNeighborSampler.pick` (what
one hop draws for every frontier node): one such class samples ``Data``
and ``HeteroData`` alike, in time, for links, and the partitioned modes put
their own hops in front of it (DSP's collective sampling pushes frontiers
to their owners, which draw with its ``pick``; HopGNN's routing samples
micrographs with it). A **subgraph** sampler (GraphSAINT's) draws a batch
as a whole: the loaders and ``replicated`` run it, and it may estimate
what it needs from a loader's seeds (``prepare``). Adding one is one
module, its tests and one line in :data:`SAMPLERS`.
"""
from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass, field
from typing import (Any, Dict, Mapping, Optional, Protocol, Set, Type,
                    Union)

import torch
from torch_geometric.sampler import BaseSampler

from . import saint
from .labor import LaborSampler
from .neighbor_sampler import FastNeighborSampler
from .random_walk import RandomWalkSampler

__all__ = ['SAMPLERS', 'GraphSampler', 'SamplerChoice']

#: The samplers known by name: hop-wise ones (each class serves
#: homogeneous and heterogeneous graphs, random walks homogeneous ones),
#: then GraphSAINT's subgraph samplers (homogeneous, as PyG's).
SAMPLERS: Dict[str, Type[BaseSampler]] = {
    'neighbor': FastNeighborSampler,
    'labor': LaborSampler,
    'random_walk': RandomWalkSampler,
    'saint_node': saint.SaintNodeSampler,
    'saint_edge': saint.SaintEdgeSampler,
    'saint_rw': saint.SaintRandomWalkSampler,
}


class GraphSampler(Protocol):
    r"""What the loaders, the data module and the modes take as a sampler
    (PyG's ``BaseSampler`` shape)."""
    #: Hops a batch spans from its seeds.
    num_hops: int

    @property
    def device(self) -> torch.device:
        r"""Where it samples (its batches' ids are there)."""

    def sample_from_nodes(self, inputs: Any, **kwargs: Any) -> Any:
        r"""A batch around seed nodes (``NodeSamplerInput``)."""

    def sample_from_edges(self, inputs: Any, neg_sampling: Any = None,
                          **kwargs: Any) -> Any:
        r"""A batch around label edges (``EdgeSamplerInput``)."""

    # Optional: ``prepare(inputs, batch_size, drop_last=...)``, which a
    # loader calls once with all its seeds (its ``input_data``), its batch
    # size and whether it drops a last, smaller batch, before its first
    # batch, for a sampler that estimates something from them
    # (GraphSAINT's normalisation).


@dataclass(frozen=True)
class SamplerChoice:
    r"""Which sampler to build, before there is a graph: a class and its
    own options (beyond the loader's arguments).

    Args:
        kind (type): the sampler class (a hop-wise one:
            ``FastNeighborSampler`` or a subclass).
        options (dict): its own keyword arguments (e.g. LABOR's
            ``importance_sampling``).

    Example:
        >>> from pyg_fastload.sampling import SamplerChoice
        >>> SamplerChoice.of('labor').kind.__name__
        'LaborSampler'
        >>> SamplerChoice.of({'class_path': 'labor',
        ...                   'init_args': {'layer_dependency': True}}
        ...                  ).options
        {'layer_dependency': True}
    """
    kind: Type[Any]
    options: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, value: Union[str, Mapping[str, Any], type, 'SamplerChoice',
                             None], key: str = 'neighbor_sampler'
           ) -> 'SamplerChoice':
        r"""The choice :obj:`value` names: a name in :data:`SAMPLERS`, a
        sampler class, ``{'class_path': name or 'module.Class',
        'init_args': {...}}`` (as configs write it), or :obj:`None` (node-
        wise neighbour sampling). A bad value is a ``ValueError`` naming
        :obj:`key`."""
        if value is None:
            return cls(FastNeighborSampler)
        if isinstance(value, SamplerChoice):
            return value
        if isinstance(value, str):
            return cls(_named(value, key))
        if isinstance(value, type):
            return cls(_checked_class(value, key))
        if isinstance(value, Mapping):
            unknown = sorted(set(value) - {'class_path', 'init_args'})
            path = value.get('class_path')
            args = value.get('init_args', {}) or {}
            if unknown or not isinstance(path, str) or \
                    not isinstance(args, Mapping):
                raise ValueError(
                    f"'{key}' = {dict(value)!r}: give a sampler's name "
                    f"({', '.join(SAMPLERS)}) or {{class_path: NAME or "
                    f"module.Class, init_args: {{...}}}}")
            return cls(_named(path, key), dict(args))
        raise ValueError(f"'{key}' = {value!r}: give a sampler's name "
                         f"({', '.join(SAMPLERS)}), a sampler object or "
                         f"{{class_path: ..., init_args: {{...}}}}")

    @property
    def name(self) -> str:
        r"""Its registered name, else its class's path."""
        for name, kind in SAMPLERS.items():
            if kind is self.kind:
                return name
        return f'{self.kind.__module__}.{self.kind.__qualname__}'

    @property
    def hop_wise(self) -> bool:
        r"""Whether it draws hop by hop through ``pick`` (so DSP's
        collective sampling and HopGNN's routing can run it)."""
        return issubclass(self.kind, FastNeighborSampler)

    @property
    def gives_edge_weight(self) -> bool:
        r"""Whether its batches carry estimator weights on their edges
        (LABOR-*'s ``edge_weight``, GraphSAINT's ``edge_norm``), which the
        model must aggregate with."""
        weighs = getattr(self.kind, 'gives_edge_weight', None)
        return weighs is not None and weighs(**self.options)

    @property
    def homogeneous_only(self) -> bool:
        r"""Whether it refuses heterogeneous graphs (a sampler class whose
        ``typed_class`` is :obj:`None`: random walks, GraphSAINT)."""
        return getattr(self.kind, 'typed_class', FastNeighborSampler) is None

    def reach(self, num_hops: int) -> Optional[int]:
        r"""How many hops of in-edges from its seeds a batch reads, drawn
        with :obj:`num_hops` fan-outs (:obj:`None`: anywhere in the graph,
        e.g. GraphSAINT's node sampler)."""
        reach = getattr(self.kind, 'reach', None)
        return num_hops if reach is None else reach(num_hops,
                                                    **self.options)

    def with_defaults(self, **values: Any) -> 'SamplerChoice':
        r"""This choice with :obj:`values` for the options its class takes
        by name and that were not given (a run's ``progress`` and ``seed``
        for GraphSAINT's normalisation)."""
        takes = _parameters(self.kind)
        extra = {k: v for k, v in values.items()
                 if k in takes and k not in self.options}
        return SamplerChoice(self.kind, {**self.options, **extra}) \
            if extra else self

    def build(self, data: Any, num_neighbors: Any, **common: Any) -> Any:
        r"""The sampler of :obj:`data`: ``kind(data, num_neighbors,
        **common, **options)``."""
        return self.kind(data, num_neighbors, **common, **self.options)

    def compose(self, front: type, typed: bool) -> type:
        r"""A class of the mode's :obj:`front` (DSP's collective hops,
        HopGNN's routing: a class listed before a sampler class, e.g.
        ``CollectiveSampler``) drawing with this choice's ``pick``, for a
        heterogeneous (:obj:`typed`) or homogeneous graph."""
        kind = self.kind.typed_class if typed and \
            self.kind.typed_class is not None else self.kind
        if issubclass(front, kind):
            return front
        return type(f'{front.__name__}[{kind.__name__}]', (front, kind),
                    {'__module__': front.__module__})

    def describe(self) -> str:
        r"""``name`` or ``name(option=value, ...)``."""
        if not self.options:
            return self.name
        args = ', '.join(f'{k}={v!r}' for k, v in self.options.items())
        return f'{self.name}({args})'


def _parameters(kind: type) -> Set[str]:
    r"""The names of the keyword arguments :obj:`kind` takes: its
    ``__init__``'s, and its bases' while each passes ``**options`` on."""
    names: Set[str] = set()
    for klass in kind.__mro__:
        init = klass.__dict__.get('__init__')
        if init is None:
            continue
        params = inspect.signature(init).parameters.values()
        names.update(p.name for p in params)
        if all(p.kind is not p.VAR_KEYWORD for p in params):
            break
    return names


def _named(name: str, key: str) -> type:
    if name in SAMPLERS:
        return SAMPLERS[name]
    module, _, attr = name.rpartition('.')
    if not module:
        raise ValueError(f"'{key}' = {name!r} is not a sampler: give one of "
                         f"{', '.join(SAMPLERS)} or a class's path "
                         f"(module.Class)")
    try:
        found = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as error:
        raise ValueError(f"'{key}' = {name!r}: {error}") from None
    return _checked_class(found, key, name)


def _checked_class(kind: Any, key: str, name: Optional[str] = None) -> type:
    if not (isinstance(kind, type) and issubclass(kind, BaseSampler)):
        raise ValueError(f"'{key}' = {repr(name or kind)} is not a sampler "
                         f"class (a torch_geometric BaseSampler, e.g. a "
                         f"FastNeighborSampler subclass)")
    return kind

