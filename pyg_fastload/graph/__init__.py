r"""The graph at the bottom of every layer: CSC topology, conversions from
``edge_index`` / ``Data`` / stores, and range operations."""
from .convert import topology_of
from .hetero_topology import EdgeType, HeteroTopology
from .kind import (GraphInput, graph_input, is_data, is_hetero,
                   is_sampler_output, is_topology, stores_of)
from .local import local_topology
from .ranges import expand_ranges
from .topology import CSCTopology, index_dtype_for
from .view import GraphView

__all__ = ['CSCTopology', 'HeteroTopology', 'EdgeType', 'index_dtype_for',
           'topology_of', 'expand_ranges', 'local_topology', 'GraphInput',
           'graph_input', 'stores_of', 'is_hetero', 'is_data', 'is_topology',
           'is_sampler_output', 'GraphView']
