r"""``partition --features source``: parts that keep the dataset's row ids
instead of copies of its feature rows, read from the dataset's files."""
import json
import shutil

import numpy as np
import pytest
import torch

from pyg_fastload.config import FeatureCache
from pyg_fastload.io import DatasetFormatError, open_dataset_dir
from pyg_fastload.partition import open_partition, partition_dataset
from pyg_fastload.storage import MappedRows, MemoryStorage

from ..helpers import usage_exit


@pytest.fixture(scope='module')
def source_parts(tmp_path_factory, tiny_dir):
    r"""``(dataset_dir, {(method, features): parts_dir})``: the ``tiny``
    preset in 2 parts by METIS and by PaGraph, copying the rows and not."""
    dataset_dir, _ = tiny_dir
    root = tmp_path_factory.mktemp('source')
    out = {}
    for method in ('metis', 'pagraph'):
        for features in ('copy', 'source'):
            out[method, features] = root / f'{method}-{features}'
            partition_dataset(dataset_dir, out[method, features], 2, method,
                              progress=False, features=features)
    return dataset_dir, out


def _rows(store, num_rows):
    return store.get_tensor(group_name=None, attr_name='x',
                            index=torch.arange(num_rows))


@pytest.mark.parametrize('method', ['metis', 'pagraph'])
@pytest.mark.parametrize('cache', [None, FeatureCache(host_budget=0.3,
                                                      policy='out_degree')])
def test_source_parts_serve_the_rows_copied_parts_hold(source_parts, method,
                                                       cache):
    dataset_dir, paths = source_parts
    x = open_dataset_dir(dataset_dir).arrays['x']
    for part in range(2):
        copied, _, _ = open_partition(paths[method, 'copy'], part, cache,
                                      local=True)
        kept, _, _ = open_partition(paths[method, 'source'], part, cache,
                                    local=True)
        rows = copied.get_tensor_size(group_name=None, attr_name='x')[0]
        assert kept.get_tensor_size(group_name=None, attr_name='x') == \
            copied.get_tensor_size(group_name=None, attr_name='x')
        assert torch.equal(_rows(kept, rows), _rows(copied, rows))
        # every row is the dataset's row of the node it stands for
        source = torch.from_numpy(np.load(
            paths[method, 'source'] / f'part-{part}' / 'source_id.npy'))
        assert torch.equal(_rows(kept, rows), x[source])
        assert list(kept.tiers('x')) == list(copied.tiers('x'))
        if cache is not None:  # the host buffer holds the same rows
            assert torch.equal(kept.cached_ids('x'), copied.cached_ids('x'))
        # labels and masks are the part's own (small) arrays
        for name in ('y', 'train_mask'):
            got = kept.get_tensor(group_name=None, attr_name=name, index=None)
            assert torch.equal(got, copied.get_tensor(
                group_name=None, attr_name=name, index=None))


def test_source_parts_hold_no_feature_rows(source_parts):
    _, paths = source_parts
    for part in range(2):
        copied = open_dataset_dir(paths['metis', 'copy'] / f'part-{part}')
        kept = open_dataset_dir(paths['metis', 'source'] / f'part-{part}')
        assert 'x' in copied.arrays and 'x' not in kept.arrays
        assert set(kept.arrays) == set(copied.arrays) - {'x'}
        assert torch.equal(kept.topology.indices, copied.topology.indices)
    meta = json.loads((paths['metis', 'source'] /
                       'partition.json').read_text())
    assert meta['features'] == 'source'
    assert 'part-1/source_id.npy' in meta['files']



@pytest.mark.reliability(
    fault="the dataset a `--features source` partition reads its rows from "
          "moved away or prepared again; a part's source_id.npy replaced by "
          "another part's",
    behaviour="refused when the part is opened, naming the path and the fix "
              "(put the dataset back or partition again)")
def test_a_source_part_needs_its_dataset(source_parts, tmp_path):
    dataset_dir, paths = source_parts
    parts = tmp_path / 'parts'
    shutil.copytree(paths['metis', 'source'], parts)
    meta_file = parts / 'partition.json'
    meta = json.loads(meta_file.read_text())
    # the dataset moved away
    meta['dataset']['path'] = str(tmp_path / 'moved')
    meta_file.write_text(json.dumps(meta))
    with pytest.raises(DatasetFormatError, match="'.*moved': no dataset "
                       "there; .*put it back at"):
        open_partition(parts, 0)
    # another dataset there now (prepared again)
    other = tmp_path / 'other'
    shutil.copytree(dataset_dir, other)
    (other / 'meta.json').write_text((other / 'meta.json').read_text()
                                     .replace('"name"', '"source": "x", '
                                              '"name"', 1))
    meta['dataset']['path'] = str(other)
    meta_file.write_text(json.dumps(meta))
    with pytest.raises(DatasetFormatError, match='is not the dataset that '
                       'was partitioned'):
        open_partition(parts, 0)
    # a source_id.npy of another part
    meta['dataset']['path'] = str(dataset_dir)
    meta_file.write_text(json.dumps(meta))
    shutil.copy(parts / 'part-1' / 'source_id.npy',
                parts / 'part-0' / 'source_id.npy')
    with pytest.raises(DatasetFormatError, match='source_id.npy: missing, or '
                       'not the one partition.json lists'):
        open_partition(parts, 0)


def test_features_setting_is_checked(tiny_dir, tmp_path, capsys):
    from pyg_fastload.datasets import prepare_hetero_preset
    from pyg_fastload.lightning.command import main
    dataset_dir, _ = tiny_dir
    with pytest.raises(ValueError, match="'features' = 'none' is not one of "
                       "copy, source"):
        partition_dataset(dataset_dir, tmp_path / 'p', 2, features='none')
    hetero = prepare_hetero_preset('hetero-tiny', tmp_path / 'h',
                                   progress=False).path
    with pytest.raises(ValueError, match="features='source'.*homogeneous"):
        partition_dataset(hetero, tmp_path / 'p', 2, features='source',
                          progress=False)
    with usage_exit(capsys, "--features: invalid choice: 'both'"):
        main(['partition', str(dataset_dir), '--num-parts', '2', '--out',
              str(tmp_path / 'q'), '--features', 'both'])
    main(['partition', str(dataset_dir), '--num-parts', '2', '--out',
          str(tmp_path / 'q'), '--features', 'source', '--no-progress'])
    assert not (tmp_path / 'q' / 'part-0' / 'x.bin').exists()
    assert (tmp_path / 'q' / 'part-0' / 'source_id.npy').is_file()


def test_mapped_rows_pass_reads_on_in_the_source_ids():
    base = MemoryStorage(torch.arange(20.).view(10, 2))
    mapped = MappedRows(base, torch.tensor([7, 2, 9]))
    assert mapped.shape == (3, 2)
    out = torch.empty(4, 2)
    mapped.gather(torch.tensor([2, 0, 0, 1]), out)
    assert torch.equal(out, base.tensor[[9, 7, 7, 2]])
    assert torch.equal(mapped.full(), base.tensor[[7, 2, 9]])
    assert mapped.counters is base.counters
    with pytest.raises(ValueError, match=r"'rows' must be in \[0, 10\)"):
        MappedRows(base, torch.tensor([10]))


def test_a_data_module_trains_on_parts_without_feature_rows(tiny_dir,
                                                            tmp_path):
    from pyg_fastload.lightning import FastLoadDataModule
    dataset_dir, _ = tiny_dir
    parts = tmp_path / 'one'
    partition_dataset(dataset_dir, parts, 1, 'metis', features='source',
                      progress=False)
    dm = FastLoadDataModule(partitions=str(parts), mode='dsp',
                            num_neighbors=[3], batch_size=64, progress=False)
    # the width comes from the dataset (the parts hold no feature rows)
    assert (dm.num_features, dm.num_classes) == (16, 4)
    dm.setup('fit')
    batch = next(iter(dm.train_dataloader()))
    x = open_dataset_dir(dataset_dir).arrays['x']
    order = torch.argsort(torch.from_numpy(np.load(parts / 'new_id.npy')))
    assert torch.equal(batch.x, x[order[batch.n_id]])



def test_rows_from_another_count_of_rows_is_refused(source_parts):
    from pyg_fastload import open_dataset
    dataset_dir, paths = source_parts
    dataset = open_dataset_dir(dataset_dir)
    with pytest.raises(ValueError, match="'rows_from' gives 3 rows"):
        open_dataset(paths['metis', 'source'] / 'part-0',
                     rows_from=(dataset, torch.arange(3)),
                     topology=open_dataset_dir(
                         paths['metis', 'source'] / 'part-0').topology)


@pytest.mark.reliability(
    fault="the dataset of a `--features source` partition edited in place "
          "(its `x.bin` rewritten, same size), opened with "
          "`open_partition(..., verify='checksum')`",
    behaviour="`DatasetFormatError` naming the file and its checksum, with "
              "the fix (was: every row served wrong, nothing said)")
def test_a_source_edited_in_place_fails_its_checksum(source_parts, tmp_path):
    dataset_dir, paths = source_parts
    source = tmp_path / 'ds'
    shutil.copytree(dataset_dir, source)
    parts = tmp_path / 'parts'
    partition_dataset(source, parts, 2, 'metis', progress=False,
                      features='source')
    x_file = source / open_dataset_dir(source).meta['arrays']['x']['file']
    before = open_partition(parts, 0, verify='checksum')[0]
    rows = before.get_tensor_size(group_name=None, attr_name='x')[0]
    kept = _rows(before, rows)
    edited = np.fromfile(x_file, dtype=np.uint8)
    (255 - edited).tofile(x_file)  # same size, every byte other
    for part in range(2):
        with pytest.raises(DatasetFormatError, match=r"x\.bin: sha256 .* "
                           r"does not match .*partition again"):
            open_partition(parts, part, verify='checksum')
    # by size alone it opens (and reads the edited rows)
    served = _rows(open_partition(parts, 0)[0], rows)
    assert not torch.equal(served, kept)
