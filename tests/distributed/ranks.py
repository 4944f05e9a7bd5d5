r"""Runs a function on several gloo (or NCCL, one GPU per rank) ranks on
127.0.0.1, every wait bounded.

The ranks are forked by a forkserver that imported :data:`PRELOAD` once
per test session: a spawned rank would import torch, PyG and Lightning
again, for every call (``python -c "import torch_geometric,
pytorch_lightning, pyg_fastload.lightning"``: 10.3 s wall, 8.2 s user on
the 2-core machine). The forkserver runs no
torch op, so each rank starts as fresh as a spawned one, and gets the
caller's environment as it is at the call."""
import contextlib
import multiprocessing.forkserver
import os
import queue
import signal
import socket
import subprocess
import tempfile
import time
from datetime import timedelta
from typing import Any, Callable, Dict, Optional, Sequence, Tuple

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


#: What the forkserver imports before forking ranks: the command's lazy
#: imports too (the CLI, jsonargparse: 2-7 s per forked command or rank on
#: the shared 2-core machine); importing them runs no torch op.
PRELOAD = ['torch', 'torch.distributed', 'torch_geometric',
           'pytorch_lightning', 'pyg_fastload', 'pyg_fastload.lightning',
           'pyg_fastload.lightning.cli', 'pyg_fastload.lightning.cli_errors',
           'pyg_fastload.lightning.errors', 'pyg_fastload.distributed.startup',
           'tests.distributed.ranks']


def _context() -> Any:
    ctx = mp.get_context('forkserver')
    ctx.set_forkserver_preload(PRELOAD)
    return ctx


def start_server() -> None:
    r"""Starts the warm server now, without waiting for its imports: they
    run beside what the caller does next instead of delaying the first
    fork."""
    _context()
    multiprocessing.forkserver.ensure_running()


def _entry(target: Callable, rank: int, world_size: int, port: int,
           results: Any, args: Tuple, backend: str,
           env: Dict[str, str]) -> None:
    os.environ.clear()  # the caller's, not the forkserver's
    os.environ.update(env)
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
    ctx = _context()
    results = ctx.Queue()
    port = free_port()
    env = dict(os.environ)
    procs = [ctx.Process(target=_entry, args=(target, rank, world_size, port,
                                              results, args, backend, env))
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


def _command_entry(args: Tuple[str, ...], cwd: str, env: Dict[str, str],
                   out: str, rank: int, script: Optional[str] = None,
                   module: Optional[str] = None) -> None:
    r"""Rank :obj:`rank` of ``pyg-fastload ARGS`` (or of ``python SCRIPT
    ARGS``, ``python -m MODULE ARGS``) in this process, its output in
    ``OUT.RANK.out`` and ``.err``; exits with the command's status."""
    import runpy
    import sys
    import traceback
    os.setsid()  # a session of its own: a timeout ends what it started
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    # what a fresh interpreter reads from its environment once
    tempfile.tempdir = None  # TMPDIR
    if env.get('OMP_NUM_THREADS'):
        torch.set_num_threads(int(env['OMP_NUM_THREADS']))
    for fd, suffix in ((1, 'out'), (2, 'err')):
        file = os.open(f'{out}.{rank}.{suffix}',
                       os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(file, fd)
        os.close(file)
    code: Any = 1
    try:
        if script is not None:
            sys.argv = [script, *args]
            sys.path.insert(0, os.path.dirname(script))
            runpy.run_path(script, run_name='__main__')
            code = 0
        elif module is not None:
            sys.argv = [module, *args]
            runpy.run_module(module, run_name='__main__', alter_sys=True)
            code = 0
        else:
            from pyg_fastload.lightning.command import main
            code = main(list(args))
    except SystemExit as exit:
        code = exit.code
    except BaseException:  # as the interpreter would print it
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    if code is not None and not isinstance(code, int):  # as sys.exit does
        print(code, file=sys.stderr, flush=True)
        code = 1
    os._exit(code or 0)


class Forked:
    r"""``pyg-fastload ARGS`` (or ``python SCRIPT ARGS``, ``python -m MODULE
    ARGS``) in a process forked
    from the warm server, in :obj:`cwd` with :obj:`env` (default: this
    process's environment), used as a :class:`subprocess.Popen` started
    with ``text=True`` and both outputs piped: a process (and session) of
    its own, its exit status and output, without importing torch, PyG and
    Lightning again. For what a fresh interpreter does (imports, the
    ``python -m`` entry, a launcher), start one."""

    def __init__(self, args: Sequence[str], cwd: Any = '.',
                 env: Optional[Dict[str, str]] = None,
                 script: Optional[str] = None,
                 module: Optional[str] = None) -> None:
        self.args = [script or module or 'pyg-fastload', *args]
        self._outputs = tempfile.TemporaryDirectory()
        self._out = os.path.join(self._outputs.name, 'command')
        self._proc = _context().Process(target=_command_entry, args=(
            tuple(args), str(cwd), dict(os.environ if env is None else env),
            self._out, 0, script, module))
        self._proc.start()
        self.pid = self._proc.pid
        self.returncode: Optional[int] = None

    def poll(self) -> Optional[int]:
        if self.returncode is None and not self._proc.is_alive():
            self.returncode = self._proc.exitcode
        return self.returncode

    def wait(self, timeout: Optional[float] = None) -> int:
        self._proc.join(timeout)
        if self.poll() is None:
            raise subprocess.TimeoutExpired(self.args, timeout)
        return self.returncode

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, signum)

    def kill(self) -> None:
        r"""Kills the process and every process it started."""
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, signal.SIGKILL)
            self._proc.join(timeout=5)

    def communicate(self, timeout: Optional[float] = None
                    ) -> Tuple[str, str]:
        self.wait(timeout)
        with self._outputs:
            return tuple(open(f'{self._out}.0.{suffix}').read()
                         for suffix in ('out', 'err'))


def run_command(args: Sequence[str], cwd: Any = '.',
                env: Optional[Dict[str, str]] = None, timeout: float = 300,
                script: Optional[str] = None, module: Optional[str] = None
                ) -> subprocess.CompletedProcess:
    r"""A :class:`Forked` command run to its end, as ``subprocess.run(...,
    text=True, capture_output=True, timeout=TIMEOUT)`` reports it (past
    :obj:`timeout` seconds, killed with what it started)."""
    command = Forked(args, cwd, env, script, module)
    try:
        out, err = command.communicate(timeout)
    finally:
        command.kill()
    return subprocess.CompletedProcess(command.args, command.returncode,
                                       out, err)


def run_code(code: str, cwd: Any = '.', env: Optional[Dict[str, str]] = None,
             timeout: float = 120) -> subprocess.CompletedProcess:
    r"""``python -c CODE`` as :func:`run_command` runs a command: in a
    process forked from the warm server."""
    with tempfile.TemporaryDirectory() as scratch:
        script = os.path.join(scratch, 'code.py')
        with open(script, 'w') as file:
            file.write(code)
        return run_command([], cwd, env, timeout, script=script)


def command_ranks(args: Tuple[str, ...], cwd: Any, env: Dict[str, str],
                  world_size: int = 2, timeout: float = 300
                  ) -> subprocess.CompletedProcess:
    r"""``pyg-fastload ARGS`` (``fit ...``, ``predict ...``) on
    :obj:`world_size` ranks forked with
    :obj:`env` (what a launcher sets: ``LOCAL_RANK``, ``MASTER_PORT``,
    ..., so Lightning starts no process of its own), as
    ``subprocess.run`` would report it: the first failing rank's status,
    the ranks' outputs one after another. Raises
    ``subprocess.TimeoutExpired`` (the ranks killed) past
    :obj:`timeout` seconds. What launching itself does is tested through
    the command (``python -m pyg_fastload fit``)."""
    ctx = _context()
    outputs = tempfile.TemporaryDirectory()
    out = os.path.join(outputs.name, 'rank')
    procs = []
    for rank in range(world_size):
        rank_env = dict(env, MASTER_ADDR='127.0.0.1', RANK=str(rank),
                        LOCAL_RANK=str(rank), WORLD_SIZE=str(world_size),
                        NODE_RANK='0')
        procs.append(ctx.Process(target=_command_entry, args=(
            tuple(args), str(cwd), rank_env, out, rank)))
    for proc in procs:
        proc.start()
    deadline = time.monotonic() + timeout
    try:
        for proc in procs:
            proc.join(max(0.0, deadline - time.monotonic()))
        if any(proc.is_alive() for proc in procs):
            raise subprocess.TimeoutExpired(['pyg-fastload', *args],
                                            timeout)
    finally:
        for proc in procs:
            if proc.is_alive():
                proc.kill()
                proc.join(timeout=5)
    codes = [proc.exitcode for proc in procs]
    with outputs:
        stdout, stderr = (''.join(open(f'{out}.{rank}.{suffix}').read()
                                  for rank in range(world_size))
                          for suffix in ('out', 'err'))
    return subprocess.CompletedProcess(
        ['pyg-fastload', *args],
        next((c for c in codes if c != 0), 0), stdout, stderr)
