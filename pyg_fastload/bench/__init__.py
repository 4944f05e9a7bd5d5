r"""Benchmarks behind ``pyg-fastload bench ...``: each prints ratios against
a named baseline measured in the same run."""
