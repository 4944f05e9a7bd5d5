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
        DatasetSource.of(file).metadata()
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
        DatasetSource.of(path).metadata()


def test_each_kind_of_dataset_is_one_source_class(tiny_dir, tmp_path,
                                                  hetero_graph):
    from pyg_fastload.datasets import prepare_hetero_preset
    from pyg_fastload.modes import (DirectorySource, GraphSource,
                                    HeteroDirectorySource, HeteroGraphSource,
                                    PresetSource)
    hetero_dir = tmp_path / 'hetero'
    prepare_hetero_preset('hetero-tiny', hetero_dir, progress=False)
    hetero_file = tmp_path / 'hetero.pt'
    torch.save(hetero_graph, hetero_file)
    expected = [('tiny', PresetSource, False),
                ('hetero-tiny', HeteroGraphSource, True),
                (tiny_dir[0], DirectorySource, False),
                (hetero_dir, HeteroDirectorySource, True),
                (_saved(tmp_path), GraphSource, False),
                (hetero_file, HeteroGraphSource, True),
                (hetero_graph, HeteroGraphSource, True)]
    for dataset, cls, hetero in expected:
        source = DatasetSource.of(dataset, progress=False)
        assert type(source) is cls, dataset
        assert source.is_hetero is hetero
        # a schema exactly for the heterogeneous ones
        assert (source.schema(labelled=False) is not None) is hetero
        # a partition's origin is checked against directories only
        assert (source.meta_file() is not None) is isinstance(
            source, DirectorySource)
    with pytest.raises(SettingError, match='got int') as info:
        DatasetSource.of(3)
    assert info.value.key == 'dataset'


def test_cache_settings_a_source_cannot_take_are_refused(tmp_path,
                                                         hetero_graph):
    from pyg_fastload.modes import LoadingSpec
    in_memory = LoadingSpec(feature_cache={'in_memory': True})
    with pytest.raises(SettingError) as info:
        DatasetSource.of(_saved(tmp_path)).check(in_memory)
    assert info.value.key == 'feature_cache.in_memory'
    read_ahead = LoadingSpec(feature_cache={'read_ahead': 2})
    with pytest.raises(SettingError, match='needs a dataset directory') as \
            info:
        DatasetSource.of(hetero_graph).check(read_ahead)
    assert info.value.key == 'feature_cache.read_ahead'
    DatasetSource.of(_saved(tmp_path)).check(read_ahead)  # homogeneous: ok
