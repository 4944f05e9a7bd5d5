r"""The base class of the errors pyg-fastload raises for bad input, so one
``except FastLoadError`` catches them all."""

__all__ = ['FastLoadError', 'HETERO_UNSUPPORTED']


class FastLoadError(Exception):
    r"""An error in what the user passed or pointed at (an argument, a file,
    a dataset directory).  Its message names the argument or file, the
    value, and how to fix it."""


#: The message of every error raised for heterogeneous input where only
#: homogeneous graphs are supported yet.
HETERO_UNSUPPORTED = (
    "pyg_fastload's stores, caches and dataset directories hold homogeneous "
    "graphs for now (group_name=None, edge_type=None); FastNeighborLoader "
    "samples an in-memory HeteroData directly: pass the HeteroData itself, "
    "or convert it with 'data.to_homogeneous()'.")
