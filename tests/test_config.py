import pytest

from pyg_fastload.config import available_memory, budget_rows, format_bytes


@pytest.mark.parametrize('num, text', [
    (5, '5 B'), (2048, '2.0 KiB'), (3 * 2**20, '3.0 MiB'),
    (200 * 2**30, '200.0 GiB'), (2**40, '1024.0 GiB')])
def test_format_bytes(num, text):
    assert format_bytes(num) == text


def test_available_memory_is_a_byte_count():
    import os
    physical = os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES')
    available = available_memory()
    assert isinstance(available, int) and 0 < available <= physical


@pytest.mark.parametrize('budget, rows', [
    (None, 0), (0.25, 25), ('10%', 10), (400, 10), ('1KiB', 25), (10**9, 100)])
def test_budget_rows(budget, rows):
    assert budget_rows(budget, 100, 40, 'host_budget') == rows


@pytest.mark.parametrize('budget', ['lots', 1.5, -1, '150%'])
def test_bad_budgets_name_the_argument(budget):
    with pytest.raises(ValueError, match='host_budget'):
        budget_rows(budget, 100, 40, 'host_budget')


def test_storage_readers_from_disk_refuse_in_memory_not_read_ahead():
    from pyg_fastload.config import FeatureCache, SettingError
    assert FeatureCache(storage='gds').storage == 'gds'
    for storage in ('direct', 'gds'):
        assert FeatureCache(storage=storage, read_ahead=2).read_ahead == 2
        with pytest.raises(SettingError, match=f"'{storage}' reads the "
                                               f"features from disk"):
            FeatureCache(storage=storage, in_memory=True)
    # the kind's name is checked against the registry where it is used
    from pyg_fastload.modes import feature_cache_from
    with pytest.raises(SettingError, match="'nvme' is not one of 'mmap', "
                                           "'direct', 'gds'") as info:
        feature_cache_from({'storage': 'nvme'})
    assert info.value.key == 'feature_cache.storage'


@pytest.mark.reliability(
    fault='a huge look-ahead (`window`, `read_ahead` > 64) or more '
          '`sampling_workers` than the cores',
    behaviour='SettingError naming the setting and the largest value '
              'allowed, before anything is sampled or allocated')
def test_look_ahead_and_sampling_threads_are_bounded():
    from pyg_fastload.config import (MAX_LOOKAHEAD, FeatureCache,
                                     PipelineSettings, SettingError,
                                     usable_cores)
    for key in ('window', 'read_ahead'):
        assert getattr(FeatureCache(**{key: MAX_LOOKAHEAD}),
                       key) == MAX_LOOKAHEAD
        with pytest.raises(SettingError, match=f"at most {MAX_LOOKAHEAD}") \
                as info:
            FeatureCache(**{key: 10**6})
        assert info.value.key == key
    cores = usable_cores()
    assert PipelineSettings(sampling_workers=cores).sampling_workers == cores
    with pytest.raises(SettingError, match=f"give at most {cores}") as info:
        PipelineSettings(sampling_workers=cores + 1)
    assert info.value.key == 'sampling_workers'


@pytest.mark.reliability(
    fault="fan-outs written as a string ('10,5'), a dict on a homogeneous "
          "graph, or PyG's NumNeighbors",
    behaviour="a string is refused naming the list to write ([10, 5]; was: "
              "\"'num_neighbors[0]' must be an int, got '1'\"), a dict "
              "names HeteroData, a NumNeighbors is read as PyG does")
def test_fan_outs_name_the_list_to_write():
    from torch_geometric.sampler import NumNeighbors

    from pyg_fastload.config import check_fanouts
    with pytest.raises(TypeError, match=r"got the string '10,5': write "
                       r"\[10, 5\]$"):
        check_fanouts('10,5')
    with pytest.raises(ValueError, match='is for a HeteroData'):
        check_fanouts({('a', 'to', 'a'): [2]})
    assert check_fanouts(NumNeighbors([4, -1])) == [4, -1]
