from types import SimpleNamespace

import pytest

from pyg_fastload.lightning.bench import dist
from pyg_fastload.lightning.command import main
from pyg_fastload.partition import partition_dataset

from ..distributed.ranks import command_ranks, run_command


@pytest.fixture(autouse=True)
def forked_fits(monkeypatch):
    r"""The bench's fits run as it starts them (``python -m pyg_fastload
    fit``, under ``torchrun --nproc_per_node N`` for several ranks), each
    process forked from the warm server instead (the launch itself is
    tested in ``tests/distributed``)."""
    def run(command, cwd, env, timeout, **kwargs):
        assert kwargs == {'text': True, 'capture_output': True}, kwargs
        args = command[command.index('pyg_fastload') + 1:]
        if 'torch.distributed.run' not in command:
            return run_command(args, cwd, env, timeout)
        nprocs = int(command[command.index('--nproc_per_node') + 1])
        env = dict(env, MASTER_PORT=command[command.index('--master_port')
                                            + 1])
        return command_ranks(args, cwd, env, nprocs, timeout)
    monkeypatch.setattr(dist, 'subprocess', SimpleNamespace(run=run))


@pytest.mark.timeout(400)
def test_bench_dist_compares_modes_with_one_process(pagraph_parts,
                                                    metis_parts, tmp_path,
                                                    capsys):
    _, parts = pagraph_parts
    metis = metis_parts
    main(['bench', 'dist', '--partitions', str(parts), str(metis),
          '--mode', 'pagraph', 'dsp', '--seeds', '0', '--batch-size', '128',
          '--hidden', '16', '--fanout', '5', '5', '--host-budget', '64KiB',
          '--out-dir', str(tmp_path / 'out')])
    out = capsys.readouterr().out
    assert 'met: pagraph moves 0 sampling and feature bytes' in out
    assert "dsp's collective sampling moved" in out
    lines = {line.split()[0]: line.split() for line in out.splitlines()
             if line.startswith(('1-process', 'pagraph', 'dsp'))}
    assert lines['1-process'][1] == '1' and lines['pagraph'][1] == '2'
    # dsp moves frontiers and rows; pagraph nothing but gradients
    assert float(lines['dsp'][4]) > 0 and float(lines['dsp'][5]) > 0
    assert float(lines['pagraph'][4]) == float(lines['pagraph'][5]) == 0
    # 64 KiB per rank holds half of tiny's rows on one process, but the
    # whole of a DSP part: the partitioned cache serves every row
    hits = {side: float(lines[side][7]) for side in lines}
    assert 0.3 < hits['1-process'] < 0.9
    assert hits['dsp'] > hits['1-process']
    # the dataset was found through partition.json; both sides trained
    assert float(lines['1-process'][-3]) > 20  # tiny: far above 1/classes
    assert float(lines['pagraph'][-3]) > 20
    # one process runs twice the steps of each of the two ranks (roughly)
    single = int(lines['1-process'][3])
    ranks = int(lines['pagraph'][3])
    assert ranks <= single // 2 + 1


@pytest.mark.timeout(400)
def test_bench_dist_on_a_hetero_partition_counts_every_types_rows(
        tmp_path, capsys, monkeypatch):
    from pyg_fastload.datasets import prepare_hetero_preset
    dataset = prepare_hetero_preset('hetero-tiny', tmp_path / 'ds',
                                    progress=False)
    partition_dataset(dataset.path, tmp_path / 'metis', 2, 'metis',
                      progress=False)
    monkeypatch.chdir(tmp_path)
    main(['bench', 'dist', '--partitions', str(tmp_path / 'metis'),
          '--mode', 'replicated', 'dsp', '--seeds', '0', '--batch-size',
          '32', '--hidden', '16', '--fanout', '4', '3', '--host-budget',
          '16KiB', '--limit-batches', '2', '--no-single',
          '--out-dir', 'out'])  # relative: each fit runs elsewhere
    out = capsys.readouterr().out
    lines = {line.split()[0]: line.split() for line in out.splitlines()
             if line.startswith(('replicated', 'dsp'))}
    # two batches per rank (--limit-batches), on both sides
    assert lines['replicated'][3] == lines['dsp'][3] == '2'
    # every type's x rows counted; 16 KiB per rank holds more of the
    # graph's rows when each rank caches its own part
    hits = {side: float(lines[side][7]) for side in lines}
    assert 0 < hits['replicated'] < hits['dsp']
    assert "dsp's partitioned cache hit ratio is" in out
    assert (tmp_path / 'out' / 'dsp-0' / 'config.yaml').is_file()
    assert "peak RSS: the largest rank's resident high-water mark" in out
