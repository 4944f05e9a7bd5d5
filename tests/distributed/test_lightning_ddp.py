import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from pyg_fastload.io import open_dataset_dir

from .ranks import command_ranks, free_port

pytestmark = pytest.mark.timeout(420)


def _config(tmp_path: Path, data: dict, devices: int = 2) -> Path:
    config = {
        'seed_everything': 0,
        'trainer': {
            'accelerator': 'cpu', 'devices': devices, 'max_epochs': 1,
            'strategy': {
                'class_path': 'pytorch_lightning.strategies.DDPStrategy',
                'init_args': {'process_group_backend': 'gloo',
                              'timeout': '0:01:00'}},
            'enable_progress_bar': False, 'enable_model_summary': False,
            'logger': [{'class_path': 'pytorch_lightning.loggers.CSVLogger',
                        'init_args': {'save_dir': str(tmp_path / 'logs'),
                                      'name': 'run'}}],
        },
        'model': {'model': 'sage', 'hidden_channels': 16, 'num_layers': 2},
        'data': dict({'num_neighbors': [5, 5], 'batch_size': 64,
                      'progress': False, 'dist_timeout': 60}, **data),
    }
    path = tmp_path / 'config.yaml'
    path.write_text(yaml.safe_dump(config))
    return path


def _fit(args, tmp_path, env=None, timeout=300, launch=False):
    r"""A 2-rank ``pyg-fastload fit ARGS`` run in :obj:`tmp_path`: ranks
    forked as a launcher starts them (:func:`command_ranks`: torch, PyG and
    Lightning imported once per session), or with :obj:`launch` the
    command as users run it (``python -m pyg_fastload fit``: Lightning
    starts the second rank), for what launching itself does."""
    env = dict(os.environ, **(env or {}))
    env['MASTER_PORT'] = str(free_port())
    if not launch:
        return command_ranks(['fit', *args], tmp_path, env,
                             timeout=timeout)
    return subprocess.run([sys.executable, '-m', 'pyg_fastload', 'fit',
                           *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=timeout)


def _link_fit(tmp_path, data: dict, env=None):
    r"""A 2-rank fit of a small ``LinkPredictor`` on :obj:`data` (its
    result, checked to have succeeded)."""
    config = _config(tmp_path, data)
    spec = yaml.safe_load(config.read_text())
    spec['model'] = {'class_path': 'LinkPredictor',
                     'init_args': {'hidden_channels': 16}}
    config.write_text(yaml.safe_dump(spec))
    result = _fit(['--config', str(config)], tmp_path, env)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def _torchrun_machines(config: Path, tmp_path: Path, second: tuple = (),
                       timeout: float = 300) -> tuple:
    r"""``(processes, [(stdout, stderr)])`` of ``pyg-fastload fit
    --config CONFIG`` on two torchrun "machines" of one rank each
    (``--nnodes 2``), the second given :obj:`second` too; each bounded by
    :obj:`timeout` seconds."""
    port = str(free_port())
    machines = [subprocess.Popen(
        [sys.executable, '-m', 'torch.distributed.run', '--nnodes', '2',
         '--node_rank', str(node), '--nproc_per_node', '1',
         '--master_addr', '127.0.0.1', '--master_port', port,
         '-m', 'pyg_fastload', 'fit', '--config', str(config),
         '--trainer.num_nodes', '2', *(second if node else ())],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True) for node in (0, 1)]
    try:
        outputs = [m.communicate(timeout=timeout) for m in machines]
    finally:
        for machine in machines:
            machine.kill()
    return machines, outputs


def _stats(tmp_path):
    files = list((tmp_path / 'logs').rglob('dist_stats.json'))
    assert len(files) == 1, files
    return json.loads(files[0].read_text())


def assert_training_loop_timed(stdout: str) -> None:
    r"""The summary's training loop: the model's time and the time it
    waited for batches, both measured (the steps ran), adding up to the
    epoch."""
    print(stdout[stdout.find('LoaderMonitor'):])
    [line] = re.findall(r'training loop \(.*', stdout)
    seconds = {key: (float(s), float(pct)) for key, s, pct in re.findall(
        r'(model|waiting) ([\d.e+-]+) s \(([\d.]+)%\)', line)}
    assert seconds.keys() == {'model', 'waiting'}, line
    assert seconds['model'][0] > 0 and seconds['model'][1] >= 5, line
    assert seconds['waiting'][1] <= 95, line
    assert abs(seconds['model'][1] + seconds['waiting'][1] - 100) < 0.2, line


@pytest.mark.parametrize('mode', ['replicated', 'pagraph', 'dsp',
                                  'dsp-sequential', 'dsp-coordinator', 'hopgnn',
                                  'hopgnn-search'])
def test_ddp_fit_runs_equal_steps_and_counts_traffic(pagraph_parts,
                                                     metis_parts, tmp_path,
                                                     mode):
    dataset_dir, parts = pagraph_parts
    mode, _, variant = mode.partition('-')
    data = {'dataset': str(dataset_dir), 'mode': mode}
    epochs = 1
    if variant == 'coordinator':  # both stages on one group, in the
        # the leader's launch order, with layer-wise sampling and the
        # seeds drawn globally
        data['mode_options'] = {'sampling': 'layer', 'seeds': 'global',
                                'cold_rows': 'owner',
                                'launch_order': variant}
        data['num_neighbors'] = [256, 256]
    elif variant == 'search':  # HopGNN's examination period
        data['mode_options'] = {'merge_search': True, 'cold_rows': 'owner'}
        epochs = 2
    # no feature cache: every remote row is cold, read from the owner's
    # files (one machine) unless cold_rows is 'owner'
    through_owner = variant in ('coordinator', 'search')
    if mode != 'replicated':
        data['partitions'] = str(parts if mode == 'pagraph' else metis_parts)
    if mode in ('dsp', 'hopgnn') and variant != 'sequential':
        # stages with collectives concurrently
        data['pipeline_settings'] = {'pipeline': True}
    # the command as users run it once, the other modes' ranks forked
    result = _fit(['--config', str(_config(tmp_path, data)),
                   '--trainer.max_epochs', str(epochs)], tmp_path,
                  launch=mode == 'replicated')
    assert result.returncode == 0, result.stderr[-3000:]
    assert 'validation accuracy' in result.stdout
    # no warning from this package's use of Lightning (nor Lightning's own
    # deprecated LeafSpec under torch 2.13)
    assert 'Warning' not in result.stderr, result.stderr[-3000:]
    assert 'deprecated' not in result.stderr, result.stderr[-3000:]
    assert_training_loop_timed(result.stdout)
    stats = _stats(tmp_path)
    assert stats['world_size'] == 2
    ranks = stats['epochs'][0]['ranks']
    assert ranks[0]['steps'] == ranks[1]['steps'] > 0
    for rank in ranks:
        if mode in ('dsp', 'hopgnn'):  # frontiers/roots and rows move
            assert (rank['features']['bytes_received'] > 0) == through_owner
            assert rank['sampling']['bytes_received'] > 0
        else:  # only gradients cross ranks
            assert rank['features']['bytes_received'] == 0
            assert rank['sampling']['bytes_received'] == 0
        assert rank['gradients']['bytes_sent'] > 0
    assert ranks[0]['gradients'] == ranks[1]['gradients']
    [own] = (tmp_path / 'logs').rglob('fastload_stats.json')  # rank 0's
    written = json.loads(own.read_text())  # all ranks, and each rank
    rows = written['summary']['rows_by_tier']['x']
    assert written['summary']['ranks'] == len(written['ranks']) == 2
    per_rank = [r['summary']['rows_by_tier']['x'] for r in written['ranks']]
    for tier, served in rows.items():  # summed over the ranks
        assert served['rows'] == sum(r[tier]['rows'] for r in per_rank)
        assert served['bytes'] == sum(r[tier]['bytes'] for r in per_rank)
    assert written['epochs'][0]['seeds'] == sum(
        r['epochs'][0]['seeds'] for r in written['ranks'])
    if mode in ('dsp', 'hopgnn'):  # other ranks' rows, counted, printed
        tier, label = ('remote', r'other ranks \(sent by their owners\)'
                       ) if through_owner else (
            'remote_disk', r"owners' part files \(read here\)")
        assert all(r[tier]['rows'] > 0 and r[tier]['bytes'] > 0
                   for r in per_rank)
        assert re.search(r'\n(rows served \(bytes\)\s.*' + label +
                         r'.*)\nx \(all ranks\)\s', result.stdout)
        # and the cold-row path said in words
        assert ("read here from their owners' part files" in
                result.stdout) != through_owner
    else:
        assert 'remote' not in rows or rows['remote']['rows'] == 0
    # 2 ranks: a ring all-reduce sends and receives each bucket once per
    # step, the same buckets every step
    grads = ranks[0]['gradients']
    assert grads['bytes_sent'] == grads['bytes_received']
    assert grads['bytes_sent'] % ranks[0]['steps'] == 0
    assert grads['messages'] % (2 * ranks[0]['steps']) == 0
    load = stats['epochs'][0].get('root_load')
    if mode == 'hopgnn':  # every drawn root trained once, somewhere
        assert load['roots'] == ranks[0]['steps'] * 64 * 2
        assert 1.0 <= load['max_over_mean'] <= 2.0
        local = load['micrographs']
        assert local['rows'] == local['local'] + local['remote']
        assert local['remote_per_step'] >= local['remote'] > 0
        assert load['time_steps'] == 2
        if variant == 'search':  # epoch 0 timed at 2 steps, epoch 1 at 1
            last = stats['epochs'][1]['root_load']
            assert [h['time_steps'] for h in last['merge_search']] == [2]
            assert last['time_steps'] == 1
            assert last['roots'] == load['roots']  # every root, again
    else:
        assert load is None
    train = int(open_dataset_dir(dataset_dir).arrays['train_mask'].sum())
    if mode in ('replicated', 'hopgnn') or variant == 'coordinator':
        # all seeds split in two
        assert ranks[0]['steps'] == -(-(-(-train // 2)) // 64)
    elif mode == 'pagraph':  # each part's own (balanced within 1)
        assert ranks[0]['steps'] == -(-(train // 2 + 1) // 64)
    else:  # the larger part's seeds (METIS balances within 5%)
        assert -(-train // 128) <= ranks[0]['steps'] <= \
            -(-int(train * 0.53) // 64)


@pytest.mark.skipif(torch.cuda.device_count() < 2,
                    reason='NCCL needs a GPU per rank: 2 GPUs')
@pytest.mark.parametrize('mode', ['replicated', 'dsp'])
def test_ddp_fit_on_two_gpus_over_nccl(pagraph_parts, metis_parts, tmp_path,
                                       mode):
    dataset_dir, _ = pagraph_parts
    data = {'dataset': str(dataset_dir), 'mode': mode}
    if mode == 'dsp':  # collective sampling and rows over NCCL
        data.update(partitions=str(metis_parts),
                    pipeline_settings={'pipeline': True})
    else:  # each rank samples on its own GPU
        data['pipeline_settings'] = {'sampling_device': 'cuda'}
    config = _config(tmp_path, data)
    settings = yaml.safe_load(config.read_text())
    settings['trainer']['accelerator'] = 'gpu'
    settings['trainer']['strategy']['init_args'][
        'process_group_backend'] = 'nccl'
    config.write_text(yaml.safe_dump(settings))
    result = _fit(['--config', str(config)], tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert 'validation accuracy' in result.stdout
    ranks = _stats(tmp_path)['epochs'][0]['ranks']
    assert ranks[0]['steps'] == ranks[1]['steps'] > 0
    assert ranks[0]['gradients'] == ranks[1]['gradients']
    if mode == 'dsp':
        assert all(r['sampling']['bytes_received'] > 0 for r in ranks)


@pytest.mark.parametrize('mode', ['replicated', 'pagraph', 'dsp',
                                  'hopgnn'])
def test_every_mode_trains_on_labor_batches(pagraph_parts, metis_parts,
                                            tmp_path, mode):
    r"""The sampler seam in every mode: ``data.sampler: labor`` draws every
    rank's batches (DSP's collective hops and HopGNN's micrographs with
    LABOR's draw), equal steps, fewer nodes per batch than neighbour
    sampling's on the same seeds."""
    dataset_dir, parts = pagraph_parts
    data = {'dataset': str(dataset_dir), 'mode': mode,
            'num_neighbors': [8, 8]}
    if mode != 'replicated':
        data['partitions'] = str(parts if mode == 'pagraph' else metis_parts)
    nodes = {}
    for sampler in ('neighbor', 'labor'):
        run = tmp_path / sampler
        run.mkdir()
        result = _fit(['--config', str(_config(run, dict(
            data, sampler=sampler)))], run)
        assert result.returncode == 0, result.stderr[-3000:]
        [own] = (run / 'logs').rglob('fastload_stats.json')
        written = json.loads(own.read_text())
        for rank in written['ranks']:
            epoch = rank['epochs'][0]
            assert (epoch['sampler'] == 'LaborSampler' if mode in (
                'replicated', 'pagraph') else 'LaborSampler' in
                epoch['sampler']) == (sampler == 'labor'), epoch['sampler']
        epoch = written['epochs'][0]
        nodes[sampler] = epoch['sampled_nodes'] / epoch['batches']
        ranks = _stats(run)['epochs'][0]['ranks']
        assert ranks[0]['steps'] == ranks[1]['steps'] > 0
    assert nodes['labor'] < nodes['neighbor'], nodes


@pytest.mark.parametrize('mode,sampler', [('replicated', 'saint_rw'),
                                          ('dsp', 'random_walk')])
def test_graphsaint_and_random_walks_train_on_two_ranks(
        pagraph_parts, metis_parts, tmp_path, mode, sampler):
    r"""GraphSAINT's random-walk subgraphs in mode replicated (each rank
    walks from its share of the roots) and random walks through DSP's
    collective sampling, in a 2-rank fit."""
    dataset_dir, _ = pagraph_parts
    data = {'dataset': str(dataset_dir), 'mode': mode, 'sampler': sampler,
            'num_neighbors': [1, 1]}
    if mode == 'dsp':
        data['partitions'] = str(metis_parts)
    result = _fit(['--config', str(_config(tmp_path, data))], tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    [own] = (tmp_path / 'logs').rglob('fastload_stats.json')
    name = 'SaintRandomWalkSampler' if mode == 'replicated' else \
        'CollectiveSampler[RandomWalkSampler]'
    for rank in json.loads(own.read_text())['ranks']:
        assert rank['epochs'][0]['sampler'] == name, rank['epochs'][0]
    ranks = _stats(tmp_path)['epochs'][0]['ranks']
    assert ranks[0]['steps'] == ranks[1]['steps'] > 0
    assert 'validation accuracy' in result.stdout


@pytest.mark.reliability(
    fault='a rank raises or is killed mid-epoch (Lightning DDP)',
    behaviour='every rank stops; the others name the failed rank (its error, '
              'or when it was last heard from); no stray processes')
@pytest.mark.parametrize('kill', [False, True])
def test_a_failing_rank_ends_the_run(pagraph_parts, tmp_path, kill):
    dataset_dir, parts = pagraph_parts
    config = _config(tmp_path, {'dataset': str(dataset_dir)})
    text = config.read_text().replace('trainer:\n', (
        'trainer:\n  callbacks:\n  - class_path: '
        'tests.distributed.faults.FailOnRank\n    init_args:\n'
        f'      kill: {str(kill).lower()}\n'), 1)
    config.write_text(text)
    root = str(Path(__file__).resolve().parents[2])
    # killed: Lightning's launcher starts the rank (the stray it may leave)
    result = _fit(['--config', str(config)], tmp_path,
                  env={'PYTHONPATH': root, 'PYG_FASTLOAD_ALLOW_IMPORTS':
                       'tests.distributed.faults'}, timeout=200,
                  launch=kill)
    assert result.returncode != 0
    if kill:  # the survivor names the silent rank
        assert re.search(r'pyg-fastload: rank 0 stopped: no rank reported '
                         r'a failure \(killed\?\); rank 1: last heard '
                         r'[0-9.]+s ago at step [0-9]+', result.stderr), \
            result.stderr[-3000:]
    else:
        assert 'pyg-fastload: rank 1 failed (ValueError: injected failure ' \
            'at batch 3); told the others' in result.stderr
        assert 'pyg-fastload: rank 0 stopped: failed: rank 1: ValueError: ' \
            'injected failure at batch 3' in result.stderr
    # no stray rank left behind
    left = subprocess.run(['pgrep', '-f', str(config)], capture_output=True,
                          text=True).stdout.split()
    assert left == []


@pytest.mark.reliability(
    fault='a rank frozen mid-epoch (SIGSTOP: every thread stops) in a 2-rank '
          'fit whose collective timeout is 60 s',
    behaviour="the other rank names it ('rank 1: last heard N s ago') within "
              "a fifth of the timeout, kills it and stops; no stray process "
              "(was: held for the full timeout, the frozen rank left behind)")
def test_a_frozen_rank_is_named_and_ended_early(pagraph_parts, tmp_path):
    dataset_dir, _ = pagraph_parts
    config = _config(tmp_path, {'dataset': str(dataset_dir)})  # timeout 60 s
    text = config.read_text().replace('trainer:\n', (
        'trainer:\n  callbacks:\n  - class_path: '
        'tests.distributed.faults.FailOnRank\n    init_args:\n'
        '      freeze: true\n'), 1)
    config.write_text(text)
    # forked ranks (the heartbeat is the same under any launcher; what a
    # launcher leaves behind is test_a_failing_rank_ends_the_run's): both
    # must end, the frozen one killed by rank 0, or this raises
    # TimeoutExpired (its ranks killed)
    result = _fit(['--config', str(config)], tmp_path,
                  env={'PYG_FASTLOAD_ALLOW_IMPORTS':
                       'tests.distributed.faults'}, timeout=200)
    assert result.returncode != 0
    found = re.search(r'pyg-fastload: rank 0 stopping: rank 1: last heard '
                      r'([0-9]+)s ago at step [0-9]+ \(frozen\?\)',
                      result.stderr)
    assert found, result.stderr[-3000:]
    assert int(found.group(1)) < 30  # a fifth of the timeout: 12 s
    # ended by the heartbeat, not by the collective's 60 s timeout
    assert 'did not complete within' not in result.stderr, \
        result.stderr[-3000:]


@pytest.mark.parametrize('mode', ['pagraph', 'dsp-hetero'])
def test_two_torchrun_machines_train_an_epoch(pagraph_parts, hetero_parts,
                                              tmp_path, mode):
    r"""Two machines (torchrun --nnodes 2), one rank each: PaGraph's parts
    of a homogeneous graph, or DSP's of a heterogeneous one."""
    dataset_dir, parts = {'pagraph': pagraph_parts,
                          'dsp-hetero': hetero_parts}[mode]
    config = _config(tmp_path, {'dataset': str(dataset_dir),
                                'mode': mode.split('-')[0],
                                'partitions': str(parts)}, devices=1)
    machines, outputs = _torchrun_machines(config, tmp_path)
    for machine, (_, err) in zip(machines, outputs):
        assert machine.returncode == 0, err[-3000:]
    assert_training_loop_timed(outputs[0][0])
    stats = _stats(tmp_path)
    assert stats['world_size'] == 2
    ranks = stats['epochs'][0]['ranks']
    assert ranks[0]['steps'] == ranks[1]['steps'] > 0
    assert ranks[0]['gradients']['bytes_sent'] > 0
    # PaGraph samples inside its part; DSP pushes frontiers across
    pushed = [rank.get('sampling', {}).get('bytes_received', 0)
              for rank in ranks]
    assert all(pushed) == (mode == 'dsp-hetero'), pushed


@pytest.mark.reliability(
    fault='two torchrun machines where one rank\'s `--data.dataset` does '
          'not exist (it fails before the process group forms)',
    behaviour='that rank exits with its one-line error, and tells the '
              'others through the launcher\'s store: rank 0 stops within '
              'seconds naming rank 1 and its error (was: it waited at '
              '"Initializing distributed" for the whole timeout, naming '
              'nobody)')
def test_a_rank_failing_before_the_group_forms_stops_the_others(
        pagraph_parts, tmp_path):
    dataset_dir, _ = pagraph_parts
    config = _config(tmp_path, {'dataset': str(dataset_dir)}, devices=1)
    # a timeout far longer than the wait below: only being told ends rank 0
    config.write_text(config.read_text().replace("'0:01:00'", "'0:10:00'"))
    machines, outputs = _torchrun_machines(
        config, tmp_path, ['--data.dataset', str(tmp_path / 'missing')],
        timeout=150)
    assert machines[1].returncode != 0
    assert "error: config key 'data.dataset'" in outputs[1][1], \
        outputs[1][1][-3000:]
    assert machines[0].returncode != 0
    found = re.search(r"pyg-fastload: rank 0 stopping: rank 1 failed before "
                      r"the ranks connected: error: config key "
                      r"'data.dataset': .*missing", outputs[0][1])
    assert found, outputs[0][1][-3000:]


def test_a_hetero_directory_trains_on_two_replicated_ranks(tmp_path):
    from pyg_fastload.datasets import prepare_hetero_preset
    prepare_hetero_preset('hetero-tiny', tmp_path / 'tiny', progress=False)
    config = _config(tmp_path, {'dataset': str(tmp_path / 'tiny'),
                                'num_neighbors': [4, 3],
                                'feature_cache': {'host_budget': 0.3}})
    result = _fit(['--config', str(config)], tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert 'sync_dist' not in result.stderr  # no per-metric DDP warnings
    ranks = _stats(tmp_path)['epochs'][0]['ranks']
    # 240 paper seeds split in two, batches of 64
    assert ranks[0]['steps'] == ranks[1]['steps'] == 2
    assert ranks[0]['gradients'] == ranks[1]['gradients']
    [own] = (tmp_path / 'logs').rglob('fastload_stats.json')  # rank 0's
    paper = json.loads(own.read_text())['epochs'][0]['cache']['paper.x']
    assert 0 < paper['host']['hits'] < paper['host']['requests']


@pytest.mark.reliability(
    fault='a 2-rank dsp fit given a dataset its partition was not made from',
    behaviour='one line per rank naming the config key, exit status 2 (was: '
              'a 91-line traceback per rank, the message buried in it)')
def test_a_dataset_mismatch_is_one_line_per_rank(metis_parts, tiny_dir,
                                                 tmp_path):
    from pyg_fastload.datasets import prepare_synthetic
    other = prepare_synthetic('tiny', tmp_path / 'other', seed=1,
                              cache_root=tmp_path / 'cache', progress=False)
    config = _config(tmp_path, {'dataset': str(other.path), 'mode': 'dsp',
                                'partitions': str(metis_parts)})
    result = _fit(['--config', str(config)], tmp_path, timeout=200)
    assert result.returncode == 2, result.stderr[-3000:]
    assert 'Traceback' not in result.stderr, result.stderr[-3000:]
    ours = sorted(line for line in result.stderr.splitlines()
                  if line.startswith('pyg-fastload'))
    assert ours == [
        f"pyg-fastload: rank {rank}: error: config key 'data.dataset': "
        f"'{other.path}' is not the dataset '{metis_parts}' was "
        f"partitioned from ({tiny_dir[0]})"
        for rank in (0, 1)], result.stderr[-3000:]


@pytest.mark.reliability(
    fault='Ctrl-C in the launcher of a 2-rank fit',
    behaviour='every rank ends; no stray process is left')
def test_ctrl_c_in_the_launcher_ends_every_rank(pagraph_parts, tmp_path):
    import signal
    import time
    dataset_dir, _ = pagraph_parts
    config = _config(tmp_path, {'dataset': str(dataset_dir),
                                'batch_size': 8})
    text = config.read_text().replace('max_epochs: 1', 'max_epochs: 1000')
    config.write_text(text)
    env = dict(os.environ, MASTER_PORT=str(free_port()))
    launcher = subprocess.Popen(
        [sys.executable, '-m', 'pyg_fastload', 'fit', '--config',
         str(config)], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # both ranks are training
            time.sleep(0.2)
            ranks = subprocess.run(['pgrep', '-f', str(config)],
                                   capture_output=True, text=True)
            if len(ranks.stdout.split()) >= 2 and \
                    list(tmp_path.rglob('metrics.csv')):
                break
        assert len(ranks.stdout.split()) >= 2, 'the ranks did not start'
        launcher.send_signal(signal.SIGINT)
        launcher.communicate(timeout=90)
        for _ in range(150):  # the other rank follows (30 s)
            left = subprocess.run(['pgrep', '-f', str(config)],
                                  capture_output=True, text=True).stdout
            if not left.split():
                break
            time.sleep(0.2)
        assert left.split() == []
    finally:
        launcher.kill()
        subprocess.run(['pkill', '-9', '-f', str(config)])


@pytest.mark.reliability(
    fault='a 2-rank link fit whose ranks run different numbers of steps '
          '(a hang at the gradient sync)',
    behaviour='equal steps (half the training links each, batches of '
              '1024) and gradient syncs per rank; validation MRR logged')
def test_a_two_rank_link_fit_runs_equal_steps(tmp_path):
    from pyg_fastload.datasets import load_synthetic
    from pyg_fastload.modes.link_split import LinkOptions, LinkSplit
    result = _link_fit(tmp_path, {
        'dataset': 'tiny', 'task': 'link', 'batch_size': 1024,
        'evaluation': {'batch_size': 1100},
        'link': {'eval_edges': 110, 'eval_negatives': 10}},
        {'PYG_FASTLOAD_CACHE': str(tmp_path / 'cache')})
    assert 'sync_dist' not in result.stderr
    graph = load_synthetic('tiny', root=str(tmp_path / 'cache')).to_data()
    split = LinkSplit(graph.edge_index, graph.num_nodes,
                      LinkOptions(eval_edges=110, eval_negatives=10), 0)
    train = 2 * split.edges['train'].size(1)  # both directions
    steps = -(-(-(-train // 2)) // 1024)  # per rank, batches of 1024
    ranks = _stats(tmp_path)['epochs'][0]['ranks']
    assert ranks[0]['steps'] == ranks[1]['steps'] == steps
    assert ranks[0]['gradients'] == ranks[1]['gradients']
    [metrics] = (tmp_path / 'logs').rglob('metrics.csv')
    assert 'val_mrr' in metrics.read_text().splitlines()[0]


def test_a_two_rank_hetero_link_fit_runs_equal_steps(tmp_path):
    from pyg_fastload.datasets import generate_hetero
    from pyg_fastload.modes.link_split import LinkOptions, link_split
    link = {'edge_type': ['author', 'writes', 'paper'], 'eval_edges': 20,
            'eval_negatives': 10}
    _link_fit(tmp_path, {
        'dataset': 'hetero-tiny', 'task': 'link', 'batch_size': 128,
        'evaluation': {'batch_size': 110}, 'num_neighbors': [4, 3],
        'link': link})
    split = link_split(generate_hetero('hetero-tiny'), LinkOptions(**link),
                       0)
    train = split.edges['train'].size(1)  # author -> paper, one way
    steps = -(-(-(-train // 2)) // 128)  # per rank, batches of 128
    ranks = _stats(tmp_path)['epochs'][0]['ranks']
    assert ranks[0]['steps'] == ranks[1]['steps'] == steps
    assert ranks[0]['gradients'] == ranks[1]['gradients']
    [metrics] = (tmp_path / 'logs').rglob('metrics.csv')
    assert 'val_mrr' in metrics.read_text().splitlines()[0]


@pytest.mark.reliability(
    fault='predictions of several ranks written as several partial file '
          'sets, or some nodes twice',
    behaviour='one predictions directory written by the first rank with '
              'every node once, equal to one process\'s (layer-wise '
              'evaluation)')
def test_two_ranks_write_one_set_of_predictions(tmp_path):
    from pyg_fastload.inference import read_predictions
    env = {'PYG_FASTLOAD_CACHE': str(tmp_path / 'cache')}
    written = {}
    for devices in (2, 1):
        config = _config(tmp_path, {'dataset': 'tiny', 'evaluation': {
            'method': 'layerwise'}}, devices=devices)
        spec = yaml.safe_load(config.read_text())
        spec['model']['predict_embeddings'] = True
        config.write_text(yaml.safe_dump(spec))
        out = tmp_path / f'preds-{devices}'
        env['MASTER_PORT'] = str(free_port())
        result = command_ranks(
            ['predict', '--config', str(config), '--trainer.callbacks+='
             'pyg_fastload.lightning.PredictionWriter',
             '--trainer.callbacks.out_dir', str(out),
             '--trainer.callbacks.logits', 'true'], tmp_path,
            dict(os.environ, **env), world_size=devices)
        assert result.returncode == 0, result.stderr[-3000:]
        assert result.stdout.count('wrote the predicted classes of 2,000 '
                                   'nodes') == 1  # the first rank only
        written[devices] = read_predictions(out)
    two, one = written[2], written[1]
    assert two['node_ids'].tolist() == list(range(2000))  # each once
    assert two['manifest']['ranks'] == 2
    assert torch.equal(two['predictions'], one['predictions'])
    assert torch.allclose(two['logits'], one['logits'], atol=1e-5)
    assert two['embeddings'].shape == (2000, 16)
    assert torch.allclose(two['embeddings'], one['embeddings'], atol=1e-5)


def _training_links(dataset_dir, parts, options: dict):
    r"""``(labels, book)``: the training label edges every rank drew over
    the dataset (its link split under seed 0, :obj:`options`), in the new
    ids of the partition :obj:`parts`, and its book."""
    from pyg_fastload.distributed.rank_part import read_new_ids
    from pyg_fastload.modes.link_split import LinkOptions, LinkSplit
    from pyg_fastload.partition import load_book
    topology = open_dataset_dir(dataset_dir).topology
    split = LinkSplit(topology.to_edge_index(), topology.num_nodes,
                      LinkOptions(**options), 0)
    book = load_book(parts)
    return read_new_ids(parts, book)[split.supervision('train')[0]], book


@pytest.mark.parametrize('pipeline', [True, False])
def test_a_two_rank_dsp_link_fit_samples_collectively(tiny_dir, metis_parts,
                                                      tmp_path, pipeline):
    r"""Task 'link' in mode 'dsp': each rank trains the links whose source
    it owns, sampled collectively over the parts' training edges, features
    from the partitioned cache; evaluation ranks the held-out edges of the
    whole dataset (MRR)."""
    dataset_dir, _ = tiny_dir
    options = {'eval_edges': 110, 'eval_negatives': 10}
    _link_fit(tmp_path, {
        'dataset': str(dataset_dir), 'partitions': str(metis_parts),
        'mode': 'dsp', 'task': 'link', 'batch_size': 512,
        'evaluation': {'batch_size': 1100},
        'pipeline_settings': {'pipeline': pipeline}, 'link': options})
    # the steps: each rank's own training links (by their source's part),
    # as many batches on both (the shorter rank revisits some)
    labels, book = _training_links(dataset_dir, metis_parts, options)
    own = torch.bincount(book.owner(labels[0]), minlength=2)
    assert int(own.min()) > 0
    ranks = _stats(tmp_path)['epochs'][0]['ranks']
    assert ranks[0]['steps'] == ranks[1]['steps'] == \
        -(-int(own.max()) // 512)
    for rank in ranks:  # frontiers pushed to their owners, rows fetched
        assert rank['sampling']['bytes_received'] > 0
    assert ranks[0]['gradients'] == ranks[1]['gradients']
    [metrics] = (tmp_path / 'logs').rglob('metrics.csv')
    assert 'val_mrr' in metrics.read_text().splitlines()[0]


@pytest.mark.parametrize('hetero', [False, True],
                         ids=['homogeneous', 'hetero'])
def test_a_two_rank_pagraph_link_fit_stays_in_its_parts(
        pagraph_link_parts, hetero_pagraph_link_parts, tmp_path, hetero):
    r"""Task 'link' in mode 'pagraph': each rank trains the links into its
    own nodes inside its part (on a heterogeneous graph the relation's
    links into its own papers, every relation's (L+1)-hop
    in-neighbourhood replicated there), negatives among the nodes whose
    trees it holds; nothing but gradients crosses ranks; evaluation ranks
    the held-out edges of the whole dataset (MRR)."""
    if hetero:
        dataset_dir, parts = hetero_pagraph_link_parts
        data, batch = {'num_neighbors': [4, 3], 'link': HETERO_LINK,
                       'evaluation': {'batch_size': 110}}, 64
        labels, book = _hetero_training_links(dataset_dir, parts)
        own = book.owner(labels[1], 'paper')
    else:
        dataset_dir, parts = pagraph_link_parts
        options = {'eval_edges': 110, 'eval_negatives': 10}
        data, batch = {'link': options,
                       'evaluation': {'batch_size': 1100}}, 512
        labels, book = _training_links(dataset_dir, parts, options)
        own = book.owner(labels[1])
    _link_fit(tmp_path, dict(data, dataset=str(dataset_dir),
                             partitions=str(parts), mode='pagraph',
                             task='link', batch_size=batch))
    own = torch.bincount(own, minlength=2)
    assert int(own.min()) > 0 and int(own.sum()) == labels.size(1)
    ranks = _stats(tmp_path)['epochs'][0]['ranks']
    assert ranks[0]['steps'] == ranks[1]['steps'] == \
        -(-int(own.max()) // batch)
    for rank in ranks:  # self-reliant: no sampling nor rows from others
        assert rank['sampling']['bytes_received'] == 0
        assert rank['features']['bytes_received'] == 0
        assert rank['gradients']['bytes_received'] > 0
    [metrics] = (tmp_path / 'logs').rglob('metrics.csv')
    assert 'val_mrr' in metrics.read_text().splitlines()[0]
    # each rank's negatives: among its own nodes and their in-neighbours
    # (the nodes whose 2-hop trees its part holds), of each endpoint type
    assert _stats(tmp_path)['negative_pool'] == _negative_pools(
        dataset_dir, parts, hetero)


def _negative_pools(dataset_dir, parts, hetero: bool) -> list:
    r"""Per part of PaGraph's link parts :obj:`parts` (2 hops sampled):
    ``{'src': [pool, rows], 'dst': [pool, rows]}``, the part's own nodes
    and their in-neighbours (a breadth-first oracle on the dataset) among
    its rows of the label edges' end types (:data:`WRITES` on a
    heterogeneous graph)."""
    import numpy as np

    from pyg_fastload.io import open_dataset_dir

    from ..helpers import in_neighbourhood
    owner = torch.from_numpy(np.load(parts / 'owner.npy'))
    if hetero:
        topology = open_dataset_dir(dataset_dir).topology
        view = topology.homogeneous_view()
        first = dict(zip(topology.node_types, topology.node_offset.tolist()))
        ends = [(WRITES[0], first[WRITES[0]]), (WRITES[2], first[WRITES[2]])]
    else:
        view = open_dataset_dir(dataset_dir).topology
        ends = [(None, 0), (None, 0)]
    pools = []
    for part in range(2):
        own = (owner == part).nonzero().view(-1)
        pool = torch.cat([own, in_neighbourhood(view, own, 1)]).unique()
        held = open_dataset_dir(parts / f'part-{part}').num_nodes \
            if hetero else {None: open_dataset_dir(
                parts / f'part-{part}').topology.num_nodes}
        counts = []
        for node_type, start in ends:
            size = view.num_nodes if node_type is None else \
                topology.num_nodes_of(node_type)
            counts.append([int(((pool >= start) &
                                (pool < start + size)).sum()),
                           held[node_type]])
        pools.append(dict(zip(('src', 'dst'), counts)))
    return pools


def test_a_two_rank_pagraph_fit_on_a_hetero_partition(hetero_pagraph_parts,
                                                       tmp_path):
    r"""Mode 'pagraph' on a heterogeneous graph: each rank trains its own
    training papers inside its self-reliant part (every relation's L-hop
    in-neighbourhood replicated there); only gradients cross ranks."""
    dataset_dir, parts = hetero_pagraph_parts
    config = _config(tmp_path, {
        'dataset': str(dataset_dir), 'partitions': str(parts),
        'mode': 'pagraph', 'num_neighbors': [4, 3]})
    result = _fit(['--config', str(config)], tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    ranks = _stats(tmp_path)['epochs'][0]['ranks']
    # 120 training papers per part (PaGraph balances them), batches of 64
    assert ranks[0]['steps'] == ranks[1]['steps'] == 2
    for rank in ranks:
        assert rank['sampling']['bytes_received'] == 0
        assert rank['features']['bytes_received'] == 0
        assert rank['gradients']['bytes_received'] > 0
        # each rank's own memory: a torch process allocates 100s of MiB
        assert rank['peak_rss_bytes'] >= rank['anon_bytes'] > 50 * 2**20
    [metrics] = (tmp_path / 'logs').rglob('metrics.csv')
    assert 'val_acc' in metrics.read_text().splitlines()[0]


@pytest.mark.parametrize('pipeline', [True, False])
def test_a_two_rank_dsp_fit_on_a_hetero_partition(hetero_parts, tmp_path,
                                                   pipeline):
    r"""Mode 'dsp' on a heterogeneous partition: each rank trains the
    labelled type's seeds it owns, sampled collectively over every
    relation, every type's rows from the one partitioned cache (the part's
    hottest rows ranked on its own edges); validation reads the whole
    dataset."""
    from pyg_fastload.io import open_dataset_dir
    dataset_dir, parts = hetero_parts
    config = _config(tmp_path, {
        'dataset': str(dataset_dir), 'partitions': str(parts),
        'mode': 'dsp', 'num_neighbors': [4, 3],
        'pipeline_settings': {'pipeline': pipeline},
        'feature_cache': {'host_budget': 0.3}})
    result = _fit(['--config', str(config)], tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    own = [int(open_dataset_dir(parts / f'part-{k}')
               .arrays['paper']['train_mask'].sum()) for k in range(2)]
    assert min(own) > 0 and sum(own) == 240
    ranks = _stats(tmp_path)['epochs'][0]['ranks']
    assert ranks[0]['steps'] == ranks[1]['steps'] == -(-max(own) // 64)
    for rank in ranks:  # frontiers pushed to their owners
        assert rank['sampling']['bytes_received'] > 0
    assert ranks[0]['gradients'] == ranks[1]['gradients']
    [own_stats] = (tmp_path / 'logs').rglob('fastload_stats.json')
    cache = json.loads(own_stats.read_text())['epochs'][0]['cache']
    paper = cache['paper.x']  # rank 0's rows: its cache, others' parts
    assert 0 < paper['host']['hits'] < paper['host']['requests']
    assert paper['remote_disk']['hits'] > 0
    [metrics] = (tmp_path / 'logs').rglob('metrics.csv')
    assert 'val_acc' in metrics.read_text().splitlines()[0]


def test_a_two_rank_hopgnn_fit_on_a_hetero_partition(hetero_parts,
                                                     tmp_path):
    r"""Mode 'hopgnn' on a heterogeneous partition: both ranks draw from
    all training papers, each paper trains on the rank holding its
    features, its micrograph spanning every relation, in one time step per
    model (``HeteroNet`` with learnt embeddings for the featureless
    types)."""
    dataset_dir, parts = hetero_parts
    config = _config(tmp_path, {
        'dataset': str(dataset_dir), 'partitions': str(parts),
        'mode': 'hopgnn', 'num_neighbors': [4, 3],
        'pipeline_settings': {'pipeline': True}})
    result = _fit(['--config', str(config)], tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    stats = _stats(tmp_path)
    ranks = stats['epochs'][0]['ranks']
    # 240 training papers drawn globally: 120 per rank, batches of 64
    assert ranks[0]['steps'] == ranks[1]['steps'] == 2
    for rank in ranks:  # roots routed, remote rows read
        assert rank['sampling']['bytes_received'] > 0
    assert ranks[0]['gradients'] == ranks[1]['gradients']
    load = stats['epochs'][0]['root_load']  # every drawn root trained
    assert load['roots'] == 2 * 64 * 2 and load['time_steps'] == 2
    local = load['micrographs']
    assert local['rows'] == local['local'] + local['remote']
    assert local['remote_per_step'] >= local['remote'] > 0
    [metrics] = (tmp_path / 'logs').rglob('metrics.csv')
    assert 'val_acc' in metrics.read_text().splitlines()[0]


#: The relation the heterogeneous link fits supervise, and their options.
WRITES = ('author', 'writes', 'paper')
HETERO_LINK = {'edge_type': list(WRITES), 'eval_edges': 20,
               'eval_negatives': 10}


def _hetero_training_links(dataset_dir, parts):
    r"""``(labels, book)``: the training label edges of :data:`WRITES`
    every rank drew over the heterogeneous dataset (its link split under
    seed 0, :data:`HETERO_LINK`), in the typed new ids of the partition
    :obj:`parts`, and its book."""
    from pyg_fastload.distributed.rank_part import new_edge_ids, read_new_ids
    from pyg_fastload.io import open_dataset_dir
    from pyg_fastload.modes.link_split import LinkOptions, link_split
    from pyg_fastload.partition import load_book
    from pyg_fastload.storage import CSCGraphStore, TieredFeatureStore
    dataset = open_dataset_dir(dataset_dir)
    store = TieredFeatureStore()
    for node_type, arrays in dataset.arrays.items():
        for key, value in arrays.items():
            store.put_tensor(value, group_name=node_type, attr_name=key,
                             index=None)
    split = link_split((store, CSCGraphStore(dataset.topology)),
                       LinkOptions(**HETERO_LINK), 0)
    book = load_book(parts)
    return new_edge_ids(read_new_ids(parts, book), book,
                        split.supervision('train')[0], WRITES), book


def test_a_two_rank_dsp_link_fit_on_a_hetero_partition(hetero_parts,
                                                       tmp_path):
    r"""Task 'link' in mode 'dsp' on a heterogeneous partition: the
    relation's training links split by their source's part, sampled
    collectively (the relation and its reverse holding only training
    edges), negatives over the whole graph; MRR over the whole dataset."""
    dataset_dir, parts = hetero_parts
    _link_fit(tmp_path, {
        'dataset': str(dataset_dir), 'partitions': str(parts), 'mode': 'dsp',
        'task': 'link', 'batch_size': 64, 'evaluation': {'batch_size': 110},
        'num_neighbors': [4, 3], 'link': HETERO_LINK})
    # each rank trains the links whose source author its part owns
    labels, book = _hetero_training_links(dataset_dir, parts)
    own = torch.bincount(book.owner(labels[0], 'author'), minlength=2)
    assert int(own.min()) > 0
    ranks = _stats(tmp_path)['epochs'][0]['ranks']
    assert ranks[0]['steps'] == ranks[1]['steps'] == \
        -(-int(own.max()) // 64)
    for rank in ranks:  # frontiers pushed to their owners
        assert rank['sampling']['bytes_received'] > 0
    assert ranks[0]['gradients'] == ranks[1]['gradients']
    [metrics] = (tmp_path / 'logs').rglob('metrics.csv')
    assert 'val_mrr' in metrics.read_text().splitlines()[0]
