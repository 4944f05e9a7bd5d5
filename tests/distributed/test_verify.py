r"""``verify`` reaches every rank's part in the partitioned modes."""
import shutil

import pytest

from .ranks import run_ranks

pytestmark = pytest.mark.timeout(300)


def _setup(rank, world, parts_dir, mode, verify):
    from lightning_modules import FastLoadDataModule
    dm = FastLoadDataModule(partitions=str(parts_dir), mode=mode,
                            num_neighbors=[3, 3], batch_size=32,
                            verify=verify, progress=False, dist_timeout=30)
    try:
        dm.setup('fit')
    except Exception as error:  # reported to the test
        return f'{type(error).__name__}: {error}'
    finally:
        dm.loading.close()
    return 'opened'


def _corrupt_copy(parts_dir, out):
    r"""A copy whose part 1 has one flipped byte inside its features
    (sizes and ids intact: only checksums see it)."""
    shutil.copytree(parts_dir, out)
    path = out / 'part-1' / 'x.bin'
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    path.write_bytes(bytes(raw))
    return out


@pytest.mark.parametrize('mode', ['pagraph', 'dsp', 'hopgnn'])
@pytest.mark.reliability(
    fault="an in-range flipped byte in one rank's part, with "
          "`--data.verify checksum`, in each partitioned mode",
    behaviour="every rank stops at start-up; the part's rank names the file "
              "(was: the setting never reached the parts and the run trained "
              "on the corrupted rows)")
def test_checksums_reach_the_parts_in_every_partitioned_mode(
        pagraph_parts, metis_parts, tmp_path, mode):
    parts = pagraph_parts[1] if mode == 'pagraph' else metis_parts
    broken = _corrupt_copy(parts, tmp_path / 'broken')
    results = run_ranks(_setup, 2, broken, mode, 'checksum', timeout=240)
    for rank in range(2):
        assert results[rank][0] == 'ok'
        message = results[rank][1]
        assert message.startswith('ConfigError'), message
        assert 'rank(s) [1] could not open their part' in message
    assert 'x.bin' in results[1][1]
    if mode == 'dsp':  # the default check (sizes, id ranges) cannot
        results = run_ranks(_setup, 2, broken, mode, 'size', timeout=240)
        assert [results[r] for r in range(2)] == [('ok', 'opened')] * 2
