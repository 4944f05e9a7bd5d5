r"""The base class of the errors pyg-fastload raises for bad input, so one
``except FastLoadError`` catches them all."""

__all__ = ['FastLoadError', 'HETERO_UNSUPPORTED']


class FastLoadError(Exception):
    r"""An error in what the user passed or pointed at (an argument, a file,
    a dataset directory).  Its message names the argument or file, the
    value, and how to fix it."""


#: The message of every error raised for heterogeneous input.
HETERO_UNSUPPORTED = (
    "pyg_fastload supports homogeneous graphs for now: pass a "
    "torch_geometric.data.Data or a (FeatureStore, GraphStore) tuple whose "
    "tensors have group_name=None and edge_type=None. For a HeteroData "
    "graph, use torch_geometric.loader.NeighborLoader or convert it with "
    "'data.to_homogeneous()'.")
