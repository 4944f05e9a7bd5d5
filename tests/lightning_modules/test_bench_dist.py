import pytest

from lightning_modules.command import main
from pyg_fastload.partition import partition_dataset


@pytest.mark.timeout(400)
def test_bench_dist_compares_modes_with_one_process(tiny_dir, tmp_path,
                                                    capsys):
    dataset_dir, _ = tiny_dir
    parts = tmp_path / 'parts'
    partition_dataset(dataset_dir, parts, 2, 'pagraph', progress=False)
    main(['bench', 'dist', '--partitions', str(parts), '--mode', 'pagraph',
          '--seeds', '0', '--batch-size', '128', '--hidden', '16',
          '--fanout', '5', '5', '--out-dir', str(tmp_path / 'out')])
    out = capsys.readouterr().out
    assert 'met: pagraph moves 0 sampling and feature bytes' in out
    lines = {line.split()[0]: line.split() for line in out.splitlines()
             if line.startswith(('1-process', 'pagraph'))}
    assert lines['1-process'][1] == '1' and lines['pagraph'][1] == '2'
    # the dataset was found through partition.json; both sides trained
    assert float(lines['1-process'][-3]) > 20  # tiny: far above 1/classes
    assert float(lines['pagraph'][-3]) > 20
    # one process runs twice the steps of each of the two ranks (roughly)
    single = int(lines['1-process'][3])
    ranks = int(lines['pagraph'][3])
    assert ranks <= single // 2 + 1
