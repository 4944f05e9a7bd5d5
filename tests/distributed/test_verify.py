r"""``verify`` reaches every rank's part in the partitioned modes."""
import shutil

import pytest

from .ranks import run_ranks

pytestmark = pytest.mark.timeout(300)

MODES = ('pagraph', 'dsp', 'hopgnn')


def _setup_each(rank, world, runs):
    r"""Sets up a data module per ``(parts_dir, mode, verify)`` in turn (one
    process group for all: spawning ranks is the slow part)."""
    from pyg_fastload.lightning import FastLoadDataModule
    out = []
    for parts_dir, mode, verify in runs:
        dm = FastLoadDataModule(partitions=str(parts_dir), mode=mode,
                                num_neighbors=[3, 3], batch_size=32,
                                verify=verify, progress=False,
                                dist_timeout=30)
        try:
            dm.setup('fit')
            out.append('opened')
        except Exception as error:  # reported to the test
            out.append(f'{type(error).__name__}: {error}')
        finally:
            dm.loading.close()
            if dm.collectives is not None:
                dm.collectives.stop_heartbeat()
    return out


def _corrupt_copy(parts_dir, out):
    r"""A copy whose part 1 has one flipped byte inside its features
    (sizes and ids intact: only checksums see it)."""
    shutil.copytree(parts_dir, out)
    path = out / 'part-1' / 'x.bin'
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    path.write_bytes(bytes(raw))
    return out


@pytest.mark.reliability(
    fault="an in-range flipped byte in one rank's part, with "
          "`--data.verify checksum`, in each partitioned mode",
    behaviour="every rank stops at start-up; the part's rank names the file "
              "(was: the setting never reached the parts and the run trained "
              "on the corrupted rows)")
def test_checksums_reach_the_parts_in_every_partitioned_mode(
        pagraph_parts, metis_parts, tmp_path):
    pagraph = _corrupt_copy(pagraph_parts[1], tmp_path / 'pagraph')
    metis = _corrupt_copy(metis_parts, tmp_path / 'metis')
    runs = [(pagraph if mode == 'pagraph' else metis, mode, 'checksum')
            for mode in MODES]
    runs.append((metis, 'dsp', 'size'))  # the default cannot see it
    results = run_ranks(_setup_each, 2, runs, timeout=240)
    for rank in range(2):
        status, messages = results[rank]
        assert status == 'ok', messages
        for mode, message in zip(MODES, messages):
            assert message.startswith('ConfigError'), (mode, message)
            assert 'rank(s) [1] could not open their part' in message
            if rank == 1:
                assert 'x.bin' in message, (mode, message)
        assert messages[-1] == 'opened'
