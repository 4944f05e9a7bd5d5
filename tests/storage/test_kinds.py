r"""Storage kinds by registration: the feature store, the run's spec and
the dataset opener read :data:`~pyg_fastload.storage.STORAGE_KINDS`, so a
new kind is one entry there."""
import pytest
import torch

from pyg_fastload.config import SettingError
from pyg_fastload.caching import open_dataset
from pyg_fastload.modes import LoadingSpec
from pyg_fastload.storage import (STORAGE_KINDS, DirectStorage,
                                  GpuDirectStorage, MmapStorage, StorageKind,
                                  TieredFeatureStore)


class CountingStorage(MmapStorage):
    r"""A stand-in for a new kind: memory-mapped reads, counted."""
    opened = 0

    def __init__(self, *args, **kwargs):
        CountingStorage.opened += 1
        super().__init__(*args, **kwargs)


def test_the_registry_names_each_kind_s_reader():
    assert {name: kind.reader for name, kind in STORAGE_KINDS.items()} == {
        'mmap': MmapStorage, 'direct': DirectStorage,
        'gds': GpuDirectStorage}
    assert [n for n, k in STORAGE_KINDS.items() if k.needs_cuda] == ['gds']


def test_a_registered_kind_is_read_through_the_store(tmp_path, monkeypatch):
    x = torch.arange(20, dtype=torch.float32).reshape(10, 2)
    path = tmp_path / 'x.bin'
    x.numpy().tofile(path)
    monkeypatch.setitem(STORAGE_KINDS, 'counted',
                        StorageKind(CountingStorage))
    store = TieredFeatureStore()
    store.put_mmap_tensor(str(path), x.dtype, x.shape, 'x',
                          storage='counted')
    assert CountingStorage.opened == 1
    assert torch.equal(store.gather('x', torch.tensor([7, 2])), x[[7, 2]])
    assert LoadingSpec(feature_cache={'storage': 'counted'}).feature_cache \
        .storage == 'counted'  # the spec takes it too


def test_an_unknown_kind_is_refused_before_a_file_opens(tmp_path):
    with pytest.raises(SettingError, match="'storage': 'nvme' is not one "
                       "of 'mmap', 'direct', 'gds'"):
        open_dataset(tmp_path / 'no-such-dir', storage='nvme')
    with pytest.raises(SettingError) as info:
        LoadingSpec(feature_cache={'storage': 'nvme'})
    assert info.value.key == 'feature_cache.storage'
