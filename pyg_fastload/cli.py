r"""The ``pyg-fastload`` command."""
from __future__ import annotations

import argparse
from typing import List, Optional

__all__ = ['main']


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(
        prog='pyg-fastload',
        description='Fast mini-batch loading for PyTorch Geometric.')
    commands = parser.add_subparsers(dest='command', required=True)
    bench = commands.add_parser('bench', help='run a benchmark')
    benchmarks = bench.add_subparsers(dest='benchmark', required=True)

    from .bench import cache, loader, train
    loader_parser = benchmarks.add_parser(
        'loader', help='FastNeighborLoader vs PyG NeighborLoader throughput')
    loader.add_arguments(loader_parser)
    loader_parser.set_defaults(run=loader.run)
    cache_parser = benchmarks.add_parser(
        'cache', help='hit ratio per hotness policy; features on disk')
    cache.add_arguments(cache_parser)
    cache_parser.set_defaults(run=cache.run)
    train_parser = benchmarks.add_parser(
        'train', help='training loop fed by PyG vs pyg_fastload loaders')
    train.add_arguments(train_parser)
    train_parser.set_defaults(run=train.run)

    from .datasets import ondisk
    prepare = commands.add_parser(
        'prepare', help='write a dataset directory (features on disk)')
    ondisk.add_arguments(prepare)
    prepare.set_defaults(run=ondisk.run)

    args = parser.parse_args(argv)
    args.run(args)


if __name__ == '__main__':
    main()
