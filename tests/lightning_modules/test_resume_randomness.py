r"""A fit resumed mid-epoch from a checkpoint ends with the weights of the
uninterrupted run even with dropout: the data module's state keeps the
random streams the training step draws from (torch's, CUDA's, Python's,
NumPy's), each rank its own."""
import random

import numpy as np
import pytest
import pytorch_lightning as pl
import torch
import torch.distributed as dist
from pytorch_lightning.callbacks import ModelCheckpoint

from pyg_fastload.lightning import FastLoadDataModule, NodeClassifier

from ..distributed.ranks import run_ranks


@pytest.fixture(scope='module')
def cache_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp('synthetic'))


def _fit(cache_dir, root, ckpt_path=None, checkpoint=None):
    r"""2 epochs of 8 steps of tiny with dropout 0.5, from seed 0."""
    pl.seed_everything(0)
    data = FastLoadDataModule(dataset='tiny', cache_dir=cache_dir,
                              num_neighbors=[5, 5], batch_size=128,
                              pipeline=True, progress=False)
    model = NodeClassifier('sage', hidden_channels=16, num_layers=2,
                           dropout=0.5, lr=0.01)
    fit = pl.Trainer(max_epochs=2, accelerator='cpu', logger=False,
                     enable_progress_bar=False, enable_model_summary=False,
                     default_root_dir=root, num_sanity_val_steps=0,
                     callbacks=[checkpoint] if checkpoint else [],
                     enable_checkpointing=checkpoint is not None)
    fit.fit(model, datamodule=data, ckpt_path=ckpt_path)
    return {k: v.clone() for k, v in model.state_dict().items()}


def test_a_fit_resumed_mid_epoch_with_dropout_ends_as_uninterrupted(
        cache_dir, tmp_path):
    every = ModelCheckpoint(dirpath=tmp_path / 'ckpt', save_top_k=-1,
                            every_n_train_steps=3)
    straight = _fit(cache_dir, tmp_path, checkpoint=every)
    # step 12 of 16 lies mid-epoch 1; the resumed run starts from seed 0
    # again, its dropout masks from the checkpoint's streams
    resumed = _fit(cache_dir, tmp_path, ckpt_path=str(
        tmp_path / 'ckpt' / 'epoch=1-step=12.ckpt'))
    assert straight.keys() == resumed.keys()
    for key, value in straight.items():
        assert torch.equal(value, resumed[key]), key


def _draws():
    return (torch.rand(2).tolist(), random.random(), float(np.random.rand()))


def _resumed_streams(rank, world, cache_dir):
    r"""This rank's draws after its data module's state was taken, and
    after a new data module loaded rank 0's state (as a checkpoint holds
    it) with the streams moved on meanwhile."""

    def module():
        data = FastLoadDataModule(dataset='tiny', cache_dir=cache_dir,
                                  num_neighbors=[4], batch_size=64,
                                  progress=False, dist_timeout=60)
        data.setup('fit')
        return data

    data = module()
    for _ in range(rank + 1):  # each rank's streams its own
        _draws()
    state = [data.state_dict()]
    expected = _draws()
    dist.broadcast_object_list(state, src=0)
    resumed = module()
    resumed.load_state_dict(state[0])
    return expected, _draws()


def test_each_rank_resumes_its_own_streams(cache_dir):
    FastLoadDataModule(dataset='tiny', cache_dir=cache_dir).prepare_data()
    results = run_ranks(_resumed_streams, 2, cache_dir, timeout=120)
    draws = []
    for rank in range(2):
        status, value = results[rank]
        assert status == 'ok', value
        expected, resumed = value
        assert resumed == expected, rank
        draws.append(expected)
    assert draws[0] != draws[1]  # rank 1 did not get rank 0's streams
