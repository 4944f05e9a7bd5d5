r"""The private internals behind :mod:`pyg_fastload.compat` still exist and
still mean what the package relies on: an upgrade that removes or changes
one fails here, by name, rather than deep inside a run."""
import os

import torch
import torch.distributed as dist
from torch_geometric.data import Data

from pyg_fastload.compat import (drop_entry, has_own_entry,
                                 process_group_store, storage_use_count)

from .distributed.ranks import free_port


def test_torch_counts_the_references_to_a_storage():
    assert hasattr(torch._C, '_storage_Use_Count'), \
        'torch._C._storage_Use_Count is gone: buffer pools cannot tell ' \
        'a free buffer'
    base = torch.empty(16)
    alone = storage_use_count(base)
    view = base[2:8]
    assert storage_use_count(base) == alone + 1
    del view
    assert storage_use_count(base) == alone


def test_the_default_group_has_a_store(tmp_path):
    assert hasattr(dist.distributed_c10d, '_get_default_store')
    os.environ.setdefault('MASTER_ADDR', '127.0.0.1')
    dist.init_process_group('gloo', init_method=f'tcp://127.0.0.1:'
                            f'{free_port()}', rank=0, world_size=1)
    try:
        store = process_group_store()
        store.set('compat-key', 'value')
        assert store.get('compat-key') == b'value'
        assert store.check(['compat-key'])
    finally:
        dist.destroy_process_group()


def test_a_data_s_own_entries_are_told_from_inferred_ones():
    data = Data(x=torch.zeros(3, 2))
    assert data.num_nodes == 3  # inferred from x
    assert not has_own_entry(data, 'num_nodes')
    data.num_nodes = 3
    assert has_own_entry(data, 'num_nodes')
    drop_entry(data, 'num_nodes')
    assert not has_own_entry(data, 'num_nodes') and 'num_nodes' not in \
        data.keys() and data.num_nodes == 3
    drop_entry(data, 'num_nodes')  # none left: nothing happens
