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

    from .bench import cache, loader, model, train
    from .datasets import ondisk
    for parent, name, module, text in (
        (benchmarks, 'loader', loader,
         'FastNeighborLoader vs PyG NeighborLoader throughput'),
        (benchmarks, 'cache', cache,
         'hit ratio per hotness policy; features on disk'),
        (benchmarks, 'train',
         train, 'training loop fed by PyG vs pyg_fastload loaders'),
        (benchmarks, 'model', model,
         'edge_index scatter vs sorted sparse adjacency in the model'),
        (commands, 'prepare', ondisk,
         'write a dataset directory (features on disk)'),
    ):
        command = parent.add_parser(name, help=text)
        module.add_arguments(command)
        command.set_defaults(run=module.run)

    args = parser.parse_args(argv)
    args.run(args)


if __name__ == '__main__':
    main()
