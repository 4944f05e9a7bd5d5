r"""Raw inputs of ``pyg-fastload prepare`` written by hand, as OGB and
PyG lay them out, and the command's argument parser: shared by the
dataset tests."""
import argparse
import gzip

import numpy as np

from pyg_fastload.datasets.prepare import add_arguments

__all__ = ['write_gz', 'OGB_EDGES', 'OGB_N', 'fake_ogb_csv', 'COUNTS',
           'EDGES', 'fake_mag', 'parse']


def write_gz(file, rows):
    file.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(file, 'wt') as f:
        for row in rows:
            f.write(','.join(str(v) for v in np.atleast_1d(row)) + '\n')


OGB_EDGES = np.array([[0, 1], [2, 0], [1, 0], [3, 4], [4, 4], [5, 2],
                      [2, 3], [0, 5]])  # 1->0 duplicates 0->1 reversed
OGB_N = 6


def fake_ogb_csv(root):
    raw = root / 'raw'
    write_gz(raw / 'edge.csv.gz', OGB_EDGES)
    x = np.arange(OGB_N * 3, dtype=np.float32).reshape(OGB_N, 3) / 4 - 1
    write_gz(raw / 'node-feat.csv.gz', x)
    write_gz(raw / 'node-label.csv.gz', np.array([3, 0, 1, 2, 0, 1]))
    write_gz(raw / 'node_year.csv.gz', np.arange(2000, 2000 + OGB_N))
    write_gz(raw / 'num-node-list.csv.gz', [OGB_N])
    write_gz(raw / 'num-edge-list.csv.gz', [len(OGB_EDGES)])
    split = root / 'split' / 'time'
    write_gz(split / 'train.csv.gz', [0, 1, 2])
    write_gz(split / 'valid.csv.gz', [3])
    write_gz(split / 'test.csv.gz', [4, 5])
    return x


COUNTS = {'author': 5, 'field_of_study': 3, 'institution': 2, 'paper': 6}
EDGES = {
    ('author', 'affiliated_with', 'institution'): [[0, 1], [2, 0], [4, 1]],
    ('author', 'writes', 'paper'): [[0, 0], [1, 0], [2, 3], [4, 5], [3, 2]],
    ('paper', 'cites', 'paper'): [[0, 1], [1, 0], [2, 0], [5, 3], [4, 4]],
    ('paper', 'has_topic', 'field_of_study'): [[0, 2], [3, 1], [5, 0]],
}


def fake_mag(root, pyg_layout=False):
    r"""OGB's ogbn-mag archive layout (``root/raw``, ``root/split``), or
    PyG's ``OGB_MAG`` raw folder (everything in ``root``)."""
    raw = root if pyg_layout else root / 'raw'
    raw.mkdir(parents=True)
    with gzip.open(raw / 'num-node-dict.csv.gz', 'wt') as f:
        f.write(','.join(COUNTS) + '\n')
        f.write(','.join(str(v) for v in COUNTS.values()) + '\n')
    for edge_type, edges in EDGES.items():
        folder = raw / 'relations' / '___'.join(edge_type)
        write_gz(folder / 'edge.csv.gz', np.array(edges))
        write_gz(folder / 'num-edge-list.csv.gz', [len(edges)])
    x = np.arange(6 * 4, dtype=np.float32).reshape(6, 4) / 8
    write_gz(raw / 'node-feat' / 'paper' / 'node-feat.csv.gz', x)
    write_gz(raw / 'node-feat' / 'paper' / 'node_year.csv.gz',
             np.arange(2010, 2016))
    write_gz(raw / 'node-label' / 'paper' / 'node-label.csv.gz',
             np.array([3, 0, 1, 2, 0, 1]))
    split = (raw if pyg_layout else root) / 'split' / 'time' / 'paper'
    write_gz(split / 'train.csv.gz', [0, 1, 2])
    write_gz(split / 'valid.csv.gz', [3])
    write_gz(split / 'test.csv.gz', [4, 5])
    return x


def parse(argv):
    r"""``pyg-fastload prepare``'s arguments :obj:`argv`, parsed."""
    parser = argparse.ArgumentParser(prog='pyg-fastload prepare')
    add_arguments(parser)
    return parser.parse_args(argv)
