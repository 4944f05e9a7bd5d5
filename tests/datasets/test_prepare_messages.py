import gzip
import shutil

import pytest
import torch
from torch_geometric.data import Data

from pyg_fastload.datasets import prepare_ogb, prepare_pyg
from pyg_fastload.io.format import DatasetFormatError

from .fakes import fake_mag, fake_ogb_csv, write_gz


@pytest.mark.reliability(
    fault='`prepare --pyg-data` of a Data whose `x` is a sparse '
          '(`torch.sparse_coo`) tensor',
    behaviour="one line naming the file and 'x' and the fix "
              "(`.to_dense()`) (was: NotImplementedError: Could not run "
              "'aten::as_strided' with arguments from the 'SparseCPU' "
              "backend, and 60 lines of backends)")
def test_a_sparse_feature_tensor_is_named_with_the_fix(tmp_path):
    file = tmp_path / 'graph.pt'
    torch.save(Data(x=torch.eye(4).to_sparse(),
                    edge_index=torch.tensor([[0, 1, 2], [1, 2, 3]]),
                    y=torch.tensor([0, 1, 0, 1])), file)
    with pytest.raises(DatasetFormatError) as info:
        prepare_pyg(file, tmp_path / 'out', progress=False)
    message = str(info.value)
    assert '\n' not in message and str(file) in message
    assert "'x' is a sparse tensor" in message and '.to_dense()' in message
    assert not (tmp_path / 'out').exists()


def _empty_gz(file):
    with gzip.open(file, 'wt'):
        pass


@pytest.mark.parametrize('write, match', [
    (lambda f: write_gz(f, [-3]),
     r'num-node-list\.csv\.gz: holds -3, expected a count >= 0'),
    (_empty_gz, r'num-node-list\.csv\.gz: empty, expected one count'),
], ids=['negative', 'empty'])
@pytest.mark.reliability(
    fault='an OGB `num-node-list.csv.gz` holding a negative count, or '
          'nothing',
    behaviour='DatasetFormatError naming `num-node-list.csv.gz` and what is '
              'wrong with it (was: a negative count blamed on '
              '`edge.csv.gz`; "need at least one array to concatenate" for '
              'an empty one)')
def test_a_bad_node_count_file_is_named(tmp_path, write, match):
    root = tmp_path / 'arxiv'
    fake_ogb_csv(root)
    write(root / 'raw' / 'num-node-list.csv.gz')
    with pytest.raises(DatasetFormatError, match=match) as info:
        prepare_ogb(root, 'ogbn-arxiv', tmp_path / 'ds', progress=False)
    assert 'edge.csv.gz' not in str(info.value)
    assert not (tmp_path / 'ds').exists()


@pytest.mark.parametrize('hetero', [False, True], ids=['arxiv', 'mag'])
@pytest.mark.reliability(
    fault='an OGB folder whose `split/` holds no split folder (e.g. '
          '`split/time/` deleted or never unzipped)',
    behaviour="DatasetFormatError naming the `split/` folder, that it is "
              "empty, and the fix (was: a warning \"no split/ folder\" and a "
              "dataset prepared without masks)")
def test_an_empty_split_folder_is_named(tmp_path, hetero):
    root = tmp_path / 'ogb'
    if hetero:
        fake_mag(root)
    else:
        fake_ogb_csv(root)
    shutil.rmtree(root / 'split' / 'time')
    with pytest.raises(DatasetFormatError,
                       match=r"split: holds no split folder \(such as "
                             r"split/time/\)"):
        prepare_ogb(root, 'ogbn-mag' if hetero else 'ogbn-arxiv',
                    tmp_path / 'ds', progress=False)
    assert not (tmp_path / 'ds').exists()


@pytest.mark.reliability(
    fault='an ogbn-mag `split/time/paper/` missing `train.csv.gz`',
    behaviour='DatasetFormatError naming the missing file (was: prepared '
              'with no training nodes, silently)')
def test_a_missing_hetero_split_file_is_named(tmp_path):
    root = tmp_path / 'mag'
    fake_mag(root)
    (root / 'split' / 'time' / 'paper' / 'train.csv.gz').unlink()
    with pytest.raises(DatasetFormatError,
                       match=r'paper/train\.csv\.gz: missing'):
        prepare_ogb(root, 'ogbn-mag', tmp_path / 'ds', progress=False)


def _fake(root, hetero):
    r"""A fake OGB folder of either kind and its ``split/time`` train
    file."""
    if hetero:
        fake_mag(root)
        return root / 'split' / 'time' / 'paper' / 'train.csv.gz'
    fake_ogb_csv(root)
    return root / 'split' / 'time' / 'train.csv.gz'


@pytest.mark.parametrize('hetero', [False, True], ids=['arxiv', 'mag'])
def test_both_kinds_choose_and_check_the_split_alike(tmp_path, hetero):
    name = 'ogbn-mag' if hetero else 'ogbn-arxiv'
    root = tmp_path / 'ogb'
    train = _fake(root, hetero)
    with pytest.raises(DatasetFormatError, match=r"split/random: missing; "
                       r"invalid 'split' = 'random': pass one of the "
                       r"folders in .*split$"):
        prepare_ogb(root, name, tmp_path / 'ds', progress=False,
                    split='random')
    write_gz(train, [0, 9])  # 9: no such node
    with pytest.raises(DatasetFormatError, match=r"train\.csv\.gz: node id 9 "
                       r"outside \[0, 6\); the split does not belong"):
        prepare_ogb(root, name, tmp_path / 'ds', progress=False)
    shutil.copytree(root / 'split' / 'time', root / 'split' / 'other')
    shutil.move(root / 'split' / 'time', root / 'split' / 'first')
    with pytest.raises(DatasetFormatError, match=r"holds several splits "
                       r"\(first, other\); pass one as 'split'"):
        prepare_ogb(root, name, tmp_path / 'ds', progress=False)
    assert not (tmp_path / 'ds').exists()
