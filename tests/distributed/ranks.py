r"""Runs a function on several gloo (or NCCL, one GPU per rank) ranks on
127.0.0.1 (spawned processes), every wait bounded."""
import os
import queue
import socket
import time
from datetime import timedelta
from typing import Any, Callable, Dict, Tuple

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


def _entry(target: Callable, rank: int, world_size: int, port: int,
           results: Any, args: Tuple, backend: str = 'gloo') -> None:
    os.environ.update(MASTER_ADDR='127.0.0.1', MASTER_PORT=str(port),
                      RANK=str(rank), WORLD_SIZE=str(world_size),
                      LOCAL_RANK=str(rank))
    if backend == 'nccl':
        torch.cuda.set_device(rank)
    dist.init_process_group(backend, rank=rank, world_size=world_size,
                            timeout=timedelta(seconds=30))
    try:
        results.put((rank, 'ok', target(rank, world_size, *args)))
    except BaseException as exc:  # reported to the test
        results.put((rank, type(exc).__name__, str(exc)))


def run_ranks(target: Callable, world_size: int, *args: Any,
              timeout: float = 90, backend: str = 'gloo'
              ) -> Dict[int, Tuple]:
    r"""``{rank: ('ok', value) or (exception name, message)}``; ranks that
    report nothing within :obj:`timeout` are killed and missing. With
    :obj:`backend` ``'nccl'`` rank ``r`` uses GPU ``r``."""
    ctx = mp.get_context('spawn')
    results = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=_entry, args=(target, rank, world_size, port,
                                              results, args, backend))
             for rank in range(world_size)]
    for proc in procs:
        proc.start()
    out: Dict[int, Tuple] = {}
    deadline = time.monotonic() + timeout
    try:
        while len(out) < world_size and time.monotonic() < deadline:
            try:
                rank, *rest = results.get(timeout=0.2)
                out[rank] = tuple(rest)
                continue
            except queue.Empty:
                pass
            # a rank that exited without reporting (killed) reports nothing
            if all(rank in out or not procs[rank].is_alive()
                   for rank in range(world_size)):
                try:  # a last report in flight
                    rank, *rest = results.get(timeout=1)
                    out[rank] = tuple(rest)
                except queue.Empty:
                    break
    finally:
        for proc in procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.kill()
                proc.join(timeout=5)
    return out
