r"""`bench loader` reports sampled edges per second (SEPS) beside seeds/s:
the count is the edges of exactly the batches it timed, for our loader and
for PyG's."""
import argparse

import pytest

from pyg_fastload.bench import common
from pyg_fastload.bench import loader as bench_loader

from ..helpers import requires_torch_sparse


class _Recording:
    r"""Wraps a loader; records every batch's ``edge_index`` columns in the
    order drawn, and forwards what ``stop_iterator`` calls."""
    def __init__(self, loader):
        self.loader = loader
        self.counts = []

    def __iter__(self):
        return _RecordingIterator(iter(self.loader), self.counts)


class _RecordingIterator:
    def __init__(self, iterator, counts):
        self.iterator = iterator
        self.counts = counts

    def __next__(self):
        batch = next(self.iterator)
        self.counts.append(int(batch.edge_index.size(1)))
        return batch

    def __getattr__(self, name):  # close, _shutdown_workers
        return getattr(self.iterator, name)


def test_time_loader_hands_over_the_timed_batches_only():
    seen = []
    common.time_loader(range(10), 3, 4, on_batch=seen.append)
    assert seen == [3, 4, 5, 6]  # not the 3 untimed ones, not past the 4th


#: The loaders a tiny run times, in order.
_NAMES = ['FastNeighborLoader', 'FastNeighborLoader(pipeline=False)',
          'PyG NeighborLoader(num_workers=0)']


def _run_tiny(tmp_path, rounds):
    r"""``bench loader`` on the tiny preset: 2 warm-up and 3 timed batches
    of 64 seeds per loader, :obj:`rounds` rounds."""
    parser = argparse.ArgumentParser()
    bench_loader.add_arguments(parser)
    return bench_loader.run(parser.parse_args([
        '--preset', 'tiny', '--batches', '3', '--warmup', '2', '--rounds',
        str(rounds), '--batch-size', '64', '--cache-dir', str(tmp_path),
        '--pyg-workers', '0']))


@requires_torch_sparse
def test_the_edge_count_is_the_edges_of_the_timed_batches(tmp_path,
                                                          monkeypatch,
                                                          capsys):
    real = bench_loader.time_loader
    expected = []

    def spy(loader, warmup, num_batches, **kwargs):
        recording = _Recording(loader)
        out = real(recording, warmup, num_batches, **kwargs)
        assert len(recording.counts) == warmup + num_batches
        expected.append(sum(recording.counts[warmup:]))
        return out

    monkeypatch.setattr(bench_loader, 'time_loader', spy)
    result = _run_tiny(tmp_path, rounds=2)
    names = _NAMES
    # rounds interleave the loaders: round 0's three, then round 1's
    counted = [result[f'{name} sampled_edges'][round_]
               for round_ in range(2) for name in names]
    assert counted == expected
    assert all(count > 3 * 64 for count in counted)  # more than the seeds
    assert result['fast_edges_per_s'] == \
        result['FastNeighborLoader edges/s']
    assert result['pyg_best_edges_per_s'] == \
        result['PyG NeighborLoader(num_workers=0) edges/s']
    assert result['pyg_sampled_edges_per_s'] > 0
    out = capsys.readouterr().out
    assert 'edges/s: sampled edges per second (SEPS)' in out


@requires_torch_sparse
def test_seps_is_the_count_over_the_timed_seconds(tmp_path, monkeypatch):
    real = bench_loader.time_loader
    seconds = iter([2.0, 4.0, 8.0])  # steady seconds of the three loaders
    counts = []

    def fake(loader, warmup, num_batches, on_batch):
        def both(batch):
            counts.append(int(batch.edge_index.size(1)))
            on_batch(batch)
        real(loader, warmup, num_batches, on_batch=both)
        return 0.1, next(seconds)

    monkeypatch.setattr(bench_loader, 'time_loader', fake)
    monkeypatch.setattr(bench_loader, '_breakdown', lambda *a: {})
    result = _run_tiny(tmp_path, rounds=1)
    names = _NAMES
    for i, (name, secs) in enumerate(zip(names, [2.0, 4.0, 8.0])):
        edges = sum(counts[3 * i:3 * i + 3])
        assert result[f'{name} sampled_edges'] == [edges]
        assert result[f'{name} edges/s'] == pytest.approx(edges / secs)
