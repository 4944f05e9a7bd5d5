r"""Several processes and machines (ranks exchanging frontiers and rows):
room for the distributed issues; nothing here yet."""
