import json

import pytest
import torch
from torch_geometric.data import Data

from pyg_fastload.config import SettingError
from pyg_fastload.modes import DatasetSource


def _saved(tmp_path, **attrs):
    data = Data(x=torch.randn(10, 4), y=torch.randint(0, 3, (10, )),
                edge_index=torch.tensor([[0, 1], [1, 2]]))
    for key, value in attrs.items():
        setattr(data, key, value)
    path = tmp_path / 'graph.pt'
    torch.save(data, path)
    return path


@pytest.mark.reliability(
    fault="a 1 KB `.pt` claiming `num_nodes=2e9`; a label of 1e12, a "
          "negative or a float label; `num_classes` in `meta.json` of 1e11, "
          "-1, a string, a float or smaller than the labels",
    behaviour="`ConfigError` on `dataset` naming the value, before anything "
              "is allocated by it (was: a 16 GB topology or a 4 TB output "
              "layer, silent truncation, or a failure mid-training)")
@pytest.mark.parametrize('attrs, match', [
    ({'num_nodes': int(2e9)}, "has 10 rows but the graph has num_nodes = "
                              "2000000000"),
    ({'y': torch.tensor([0, 1, 2, 10**12, 0, 0, 0, 0, 0, 0])},
     r'1,000,000,000,001 classes \(label 1,000,000,000,000\) for 10 nodes'),
    ({'y': torch.tensor([0, 1, -2, 0, 0, 0, 0, 0, 0, 0])},
     'label -2 is negative'),
    ({'y': torch.rand(10)}, "labels 'y' are torch.float32"),
])
def test_a_data_file_is_checked_before_it_sizes_anything(tmp_path, attrs,
                                                         match):
    file = _saved(tmp_path, **attrs)
    with pytest.raises(SettingError, match=match) as info:
        DatasetSource(file).metadata()
    assert info.value.key == 'dataset'


@pytest.mark.parametrize('num_classes, match', [
    (10**11, r"100,000,000,000 classes \(label \d+\) for 2,000 nodes"),
    (-1, "'num_classes' is -1, expected a positive int"),
    ('5', "'num_classes' is '5', expected a positive int"),
    (3.5, "'num_classes' is 3.5, expected a positive int"),
    (2, r"label \d+ is not below 'num_classes' = 2"),
])
def test_num_classes_in_meta_json_is_checked(tiny_dir, tmp_path, num_classes,
                                             match):
    import shutil
    path = tmp_path / 'ds'
    shutil.copytree(tiny_dir[0], path)
    meta = json.loads((path / 'meta.json').read_text())
    meta['num_classes'] = num_classes
    (path / 'meta.json').write_text(json.dumps(meta))
    with pytest.raises(SettingError, match=match):
        DatasetSource(path).metadata()
