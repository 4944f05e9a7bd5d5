r"""The global random streams a training step draws from (dropout's:
torch's CPU generator, CUDA's where initialised, Python's ``random`` and
NumPy's legacy generator), kept per rank in a checkpoint.

Lightning writes rank 0's checkpoint only and does not keep these streams,
so a run resumed from a checkpoint drew other dropout masks than the run
never interrupted. :func:`gather` collects every rank's state (each rank's
stream is its own: batches of other sizes draw other amounts) and
:func:`restore` sets this rank's again. The states hold tensors, numbers
and ``None`` only: a checkpoint loads with ``weights_only=True``."""
from __future__ import annotations

import io
import random
from typing import Any, Dict, List

import numpy as np
import torch

from pyg_fastload.distributed import Collectives

__all__ = ['gather', 'restore']


def _mine() -> Dict[str, Any]:
    r"""This process's streams."""
    version, words, gauss = random.getstate()
    _, keys, pos, has_gauss, cached = np.random.get_state()
    state: Dict[str, Any] = {
        'torch': torch.get_rng_state(),
        'random': {'version': version, 'state': torch.tensor(words),
                   'gauss': gauss},
        'numpy': {'keys': torch.from_numpy(keys.astype(np.int64)),
                  'pos': int(pos), 'has_gauss': int(has_gauss),
                  'cached': float(cached)},
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state['cuda'] = torch.cuda.get_rng_state_all()
    return state


def gather(collectives: Collectives) -> List[Dict[str, Any]]:
    r"""Every rank's streams, in rank order (a collective: every rank
    calls it, as Lightning's checkpointing does).

    Args:
        collectives (Collectives): this rank's collectives.
    """
    buffer = io.BytesIO()
    torch.save(_mine(), buffer)
    mine = list(buffer.getvalue())
    sizes = collectives.all_gather_ints([len(mine)], 'random streams: sizes')
    longest = int(sizes.max())
    rows = collectives.all_gather_ints(mine + [0] * (longest - len(mine)),
                                       'random streams')
    return [torch.load(io.BytesIO(bytes(row[:int(size)].tolist())),
                       weights_only=True)
            for row, size in zip(rows, sizes.view(-1))]


def restore(state: Dict[str, Any]) -> None:
    r"""Sets this process's streams to :obj:`state` (one rank's entry of
    :func:`gather`); CUDA's where it holds one per device here."""
    torch.set_rng_state(state['torch'])
    kept = state['random']
    random.setstate((kept['version'], tuple(kept['state'].tolist()),
                     kept['gauss']))
    kept = state['numpy']
    np.random.set_state(('MT19937', kept['keys'].numpy().astype(np.uint32),
                         kept['pos'], kept['has_gauss'], kept['cached']))
    cuda = state.get('cuda', ())
    if cuda and torch.cuda.is_available() and (
            len(cuda) == torch.cuda.device_count()):
        torch.cuda.set_rng_state_all(cuda)  # lazy: set when CUDA starts
