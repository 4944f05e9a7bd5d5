r"""A rank failing before the process group forms tells the others through
the launcher's store (:class:`StartupWatch`)."""
import threading
from datetime import timedelta

import torch.distributed as dist

from pyg_fastload.distributed.startup import StartupWatch

from .ranks import free_port

TORCHRUN = {'RANK': '1', 'WORLD_SIZE': '2', 'MASTER_ADDR': '127.0.0.1',
            'MASTER_PORT': '29511', 'TORCHELASTIC_USE_AGENT_STORE': 'True',
            'TORCHELASTIC_RESTART_COUNT': '2'}


def test_only_ranks_of_a_torchrun_launch_watch():
    watch = StartupWatch.from_env(TORCHRUN)
    assert (watch.host, watch.port, watch.rank, watch.world_size) == \
        ('127.0.0.1', 29511, 1, 2)
    assert '/2/' in watch.prefix  # the attempt's own keys
    for missing in ('RANK', 'MASTER_PORT', 'TORCHELASTIC_USE_AGENT_STORE'):
        env = {k: v for k, v in TORCHRUN.items() if k != missing}
        assert StartupWatch.from_env(env) is None, missing
    assert StartupWatch.from_env({**TORCHRUN, 'WORLD_SIZE': '1'}) is None


def _watch(port, rank, attempt='0', formed=lambda: False):
    ended = threading.Event()
    codes = []

    def exit(code):
        codes.append(code)
        ended.set()
    watch = StartupWatch('127.0.0.1', port, rank, 3, attempt, formed=formed,
                         exit=exit, interval=0.05)
    return watch, ended, codes


def test_a_failure_told_ends_the_other_ranks_naming_it(capfd):
    port = free_port()
    server = dist.TCPStore('127.0.0.1', port, None, True,
                           timedelta(seconds=10), wait_for_workers=False)
    (w0, ended0, codes0), (w2, ended2, codes2) = _watch(port, 0), \
        _watch(port, 2)
    # a restarted attempt's rank does not read the attempt before
    later, ended_later, _ = _watch(port, 0, attempt='1')
    failing, _, _ = _watch(port, 1)
    for watch in (w0, w2, later, failing):
        watch.start()
    assert failing.fail("error: config key 'data.dataset': no such "
                        "directory")
    assert ended0.wait(10) and ended2.wait(10)
    assert codes0 == codes2 == [1]
    err = capfd.readouterr().err
    assert "pyg-fastload: rank 0 stopping: rank 1 failed before the ranks " \
        "connected: error: config key 'data.dataset': no such directory" \
        in err
    assert 'rank 2 stopping: rank 1 failed' in err
    assert not ended_later.wait(0.5)
    for watch in (later, failing):
        watch.stop()
    del server


def test_a_formed_group_stops_the_watch():
    port = free_port()
    server = dist.TCPStore('127.0.0.1', port, None, True,
                           timedelta(seconds=10), wait_for_workers=False)
    watch, ended, _ = _watch(port, 0, formed=lambda: True)
    watch.start()
    watch._thread.join(10)
    assert not watch._thread.is_alive()
    failing, _, _ = _watch(port, 1)
    failing.start()
    assert failing.fail('late')  # told, but nobody watches any more
    assert not ended.is_set()
    del server


def _restarted_rank(env, results):
    from pyg_fastload.compat import process_group_store
    from pyg_fastload.distributed.startup import form_restarted_group
    formed = form_restarted_group('gloo', timedelta(seconds=10), env=env)
    process_group_store().set('probe', 'attempt 1')
    dist.destroy_process_group()
    results.put(formed)


def test_a_restarted_rank_forms_its_group_on_its_attempts_keys():
    r"""torchrun's store outlives a restart: the group of attempt 1 keeps
    to keys of its own, where no address, failure or heartbeat of attempt
    0 is (the launcher's store holds them unprefixed)."""
    from pyg_fastload.distributed.startup import form_restarted_group
    from .ranks import _context
    for env in ({**TORCHRUN, 'TORCHELASTIC_RESTART_COUNT': '0'},
                {k: v for k, v in TORCHRUN.items()
                 if k != 'TORCHELASTIC_USE_AGENT_STORE'}):
        assert not form_restarted_group('gloo', timedelta(seconds=1),
                                        env=env)  # Lightning forms it
    port = free_port()
    server = dist.TCPStore('127.0.0.1', port, None, True,
                           timedelta(seconds=10), wait_for_workers=False)
    ctx = _context()
    results = ctx.Queue()
    env = {**TORCHRUN, 'RANK': '0', 'WORLD_SIZE': '1',
           'MASTER_PORT': str(port), 'TORCHELASTIC_RESTART_COUNT': '1'}
    rank = ctx.Process(target=_restarted_rank, args=(env, results))
    rank.start()
    try:
        assert results.get(timeout=60) is True
    finally:
        rank.join(timeout=10)
        if rank.is_alive():
            rank.kill()
    # the group's keys ('0/': torch's name of the default group), where
    # torch would put them unprefixed: 'default_pg/0//probe'
    assert server.get('pyg_fastload/attempt/1/0//probe') == b'attempt 1'
    assert not server.check(['default_pg/0//probe'])
