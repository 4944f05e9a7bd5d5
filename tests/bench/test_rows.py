import argparse

import pytest
import torch

from pyg_fastload.bench import rows

from ..helpers import usage_exit


def _args(*extra):
    parser = argparse.ArgumentParser()
    rows.add_arguments(parser)
    return parser.parse_args(['--nodes', '50', '--rows', '20', '--repeats',
                              '2', *extra])


def test_both_sides_gather_the_same_rows_on_one_thread(monkeypatch,
                                                       two_threads):
    shapes = []

    def timed(sides, repeats):
        assert repeats == 2 and torch.get_num_threads() == 1
        first, second = (side().clone() for side in sides)
        assert torch.equal(first, second)
        shapes.append(tuple(first.shape))
        return [6.0, 2.0]

    monkeypatch.setattr(rows, '_interleaved_ms', timed)
    assert rows.run(_args('--columns', '1', '3')) == {1: 3.0, 3: 3.0}
    assert shapes == [(20, 1), (20, 3)]
    assert torch.get_num_threads() == 2  # restored


def test_the_table_names_each_width_and_its_ratio(monkeypatch, capsys):
    monkeypatch.setattr(rows, '_interleaved_ms',
                        lambda sides, repeats: [9.0, 2.0])
    rows.run(_args('--columns', '1', '2'))
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith('# row gathers: 20 random rows of 50')
    assert lines[2].split() == ['1', '4', '9', '2', '4.50x']
    assert lines[3].split() == ['2', '8', '9', '2', '4.50x']


def test_interleaved_timing_calls_every_side_once_per_repeat():
    calls = []
    out = rows._interleaved_ms([lambda: calls.append('a'),
                                lambda: calls.append('b')], 3)
    assert calls == ['a', 'b'] * 4  # one untimed turn first
    assert len(out) == 2


@pytest.mark.reliability(
    fault='`bench rows` asked for matrices larger than the memory available',
    behaviour='`ValueError` naming `--nodes`, `--rows`, `--columns` and the '
              'GiB needed, before anything is allocated')
def test_a_sweep_larger_than_memory_is_refused_before_allocating(
        monkeypatch):
    monkeypatch.setattr(rows, 'available_memory', lambda: 2**30)
    with pytest.raises(ValueError, match="'--nodes 50 --rows 20 --columns "
                       "10000000' need 2.6 GiB, over half of the 1.0 GiB"):
        rows.run(_args('--columns', '1', '10000000'))


@pytest.mark.reliability(
    fault='`pyg-fastload bench rows` with a sweep larger than memory',
    behaviour='the command exits with one line naming the benchmark and '
              'the arguments, no traceback')
def test_the_command_reports_a_bad_value_in_one_line(capsys):
    from pyg_fastload.lightning.command import main
    with usage_exit(capsys, "^pyg-fastload bench rows: error: "
                    "'--nodes 100000000000 --rows 450000"):
        main(['bench', 'rows', '--nodes', '100000000000'])
