r"""A callback that makes one rank fail, die or freeze mid-epoch (for the
fault tests)."""
import os
import signal

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
