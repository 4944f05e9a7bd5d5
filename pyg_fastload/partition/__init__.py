r"""Graph partitioning (who owns which nodes): METIS, hash and random
methods behind one interface, DSP's contiguous renumbering and partition
book (typed for heterogeneous graphs: a range per part and node type), and
partitioned dataset directories whose parts open on their own."""
from .book import HeteroPartitionBook, PartitionBook, renumber
from .methods import METHODS, assign_parts
from .part_dirs import (full_topology, load_book, open_partition,
                        partition_dataset)
from .report import partition_report

__all__ = [
    'METHODS',
    'assign_parts',
    'renumber',
    'PartitionBook',
    'HeteroPartitionBook',
    'load_book',
    'partition_dataset',
    'open_partition',
    'full_topology',
    'partition_report',
]
