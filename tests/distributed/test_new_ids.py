r"""The partition's map from the dataset's node ids to the parts' new ids
(``new_id.npy``), which link training in mode ``dsp`` reads, is checked:
a file that is not a renumbering of the nodes is an error naming it."""
import numpy as np
import pytest
import torch

from pyg_fastload.distributed.rank_part import read_new_ids
from pyg_fastload.partition import PartitionBook


def _book():
    return PartitionBook(torch.tensor([0, 3, 5]))


def test_the_map_is_read_as_written(tmp_path):
    np.save(tmp_path / 'new_id.npy', np.array([4, 0, 1, 3, 2]))
    assert read_new_ids(tmp_path, _book()).tolist() == [4, 0, 1, 3, 2]


@pytest.mark.reliability(
    fault="a partition's new_id.npy that is not a renumbering of the nodes "
          "(missing, a pickle, wrong length, an id repeated or out of range)",
    behaviour="an error naming the file and the fix (partition again); "
              "nothing unpickled")
@pytest.mark.parametrize('content, match', [
    (None, 'unreadable'),
    (np.array([object()], dtype=object), 'unreadable'),
    (np.array([0, 1, 2]), r'shape \[3\], expected 5 integers'),
    (np.array([0., 1., 2., 3., 4.]), 'float64'),
    (np.array([0, 1, 1, 3, 4]), 'not a renumbering'),
    (np.array([0, 1, 2, 3, 5]), 'not a renumbering'),
])
def test_a_bad_map_is_named(tmp_path, content, match):
    if content is not None:
        np.save(tmp_path / 'new_id.npy', content, allow_pickle=True)
    with pytest.raises(ValueError, match=match) as info:
        read_new_ids(tmp_path, _book())
    assert 'new_id.npy' in str(info.value)
    assert 'pyg-fastload partition' in str(info.value)
