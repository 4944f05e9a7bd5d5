r"""Callbacks that make one rank fail, die or freeze mid-epoch, and one
that records a run's batches and final weights (for the fault tests)."""
import hashlib
import os
import signal

import torch
from pytorch_lightning.callbacks import Callback


class FailOnRank(Callback):
    def __init__(self, rank: int = 1, step: int = 3, kill: bool = False,
                 freeze: bool = False):
        self.rank, self.step, self.kill = rank, step, kill
        self.freeze = freeze

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if trainer.global_rank == self.rank and batch_idx == self.step:
            if self.freeze:  # every thread stops, heartbeats included
                os.kill(os.getpid(), signal.SIGSTOP)
            if self.kill:
                os.kill(os.getpid(), signal.SIGKILL)
            raise ValueError(f'injected failure at batch {batch_idx}')


class KillOnce(Callback):
    r"""Kills rank :obj:`rank` (SIGKILL) as global step :obj:`step` starts,
    unless :obj:`marker` exists, which it creates first: a run restarted
    from a checkpoint before that step trains on."""
    def __init__(self, marker: str, rank: int = 1, step: int = 7):
        self.marker, self.rank, self.step = marker, rank, step

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if trainer.global_rank == self.rank and \
                trainer.global_step == self.step and \
                not os.path.exists(self.marker):
            open(self.marker, 'w').close()
            os.kill(os.getpid(), signal.SIGKILL)


def batch_digest(batch) -> str:
    r"""A training batch's sampled nodes, edges, features and labels,
    hashed."""
    digest = hashlib.sha256()
    for key in ('n_id', 'edge_index', 'x', 'y'):
        digest.update(batch[key].contiguous().cpu().numpy().tobytes())
    return digest.hexdigest()


class RecordRun(Callback):
    r"""Appends ``ATTEMPT STEP DIGEST`` per training batch to
    ``PREFIX.RANK.batches`` (``ATTEMPT``: torchrun's restart count), and
    rank 0 writes the final weights to ``PREFIX.pt``."""
    def __init__(self, prefix: str):
        self.prefix = prefix

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        attempt = os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')
        with open(f'{self.prefix}.{trainer.global_rank}.batches', 'a') as out:
            out.write(f'{attempt} {trainer.global_step} '
                      f'{batch_digest(batch)}\n')

    def on_train_end(self, trainer, pl_module):
        if trainer.global_rank == 0:
            torch.save(pl_module.state_dict(), f'{self.prefix}.pt')
