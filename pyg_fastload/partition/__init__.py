r"""Graph partitioning (who owns which nodes): room for the partitioning
issue; nothing here yet."""
