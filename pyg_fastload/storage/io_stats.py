r"""Measured I/O and memory: the bytes this process had read from storage
devices (``read_bytes`` of ``/proc/self/io``: page-cache hits are not in it,
direct reads and page faults that went to the device are), the bytes a block
device read (``/sys/dev/block/MAJOR:MINOR/stat``), and this process's
resident memory split into what it allocated and what maps files."""
from __future__ import annotations

import os
import threading
from typing import Dict, Optional

__all__ = ['process_read_bytes', 'device_read_bytes', 'block_device_file',
           'process_memory', 'reset_peak_rss', 'MemoryWatch']

SECTOR_BYTES = 512  # the unit of /sys/block/*/stat, whatever the device


def process_read_bytes() -> Optional[int]:
    r"""Bytes this process has caused to be read from storage so far, or
    :obj:`None` where the kernel does not say (not Linux, or no
    ``/proc/self/io``)."""
    try:
        with open('/proc/self/io', 'rb') as handle:
            for line in handle:
                if line.startswith(b'read_bytes:'):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def device_read_bytes(path: str) -> Optional[int]:
    r"""Bytes the block device holding :obj:`path` has read since boot (all
    processes), or :obj:`None` where it is not known (no sysfs, or a file
    system without a block device, such as tmpfs).

    Args:
        path (str): a file or directory on the device.
    """
    fields = block_device_file(path, 'stat')
    try:
        return int(fields.split()[2]) * SECTOR_BYTES  # sectors read
    except (AttributeError, IndexError, ValueError):
        return None


def block_device_file(path: str, name: str) -> Optional[str]:
    r"""The contents of file :obj:`name` (e.g. ``'stat'``,
    ``'queue/read_ahead_kb'``) of the block device holding :obj:`path` in
    sysfs, or :obj:`None` where there is none."""
    try:
        dev = os.stat(path).st_dev
        with open(f'/sys/dev/block/{os.major(dev)}:{os.minor(dev)}/'
                  f'{name}') as handle:
            return handle.read()
    except OSError:
        return None


def process_memory() -> Dict[str, int]:
    r"""This process's resident bytes (Linux ``/proc/self/status``):
    ``'rss'`` (all of it), ``'anon'`` (memory it allocated: caches,
    buffers, tensors), ``'file'`` (mapped file pages, which the kernel can
    drop and re-read) and ``'peak'`` (the high-water mark of ``'rss'``);
    empty where unknown."""
    keys = {'VmRSS': 'rss', 'RssAnon': 'anon', 'RssFile': 'file',
            'VmHWM': 'peak'}
    out: Dict[str, int] = {}
    try:
        with open('/proc/self/status') as handle:
            for line in handle:
                name, _, value = line.partition(':')
                if name in keys:
                    out[keys[name]] = int(value.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        return {}
    return out


def reset_peak_rss() -> bool:
    r"""Resets this process's resident-memory high-water mark (``'peak'``
    of :func:`process_memory`) to its current size (Linux:
    ``/proc/self/clear_refs``); :obj:`False` where that is not possible
    (the mark then counts from the process's start)."""
    try:
        with open('/proc/self/clear_refs', 'w') as handle:
            handle.write('5')
    except OSError:
        return False
    return True


class MemoryWatch:
    r"""The peaks of this process's resident memory while it runs (between
    :meth:`start` and :meth:`stop`), read every :obj:`interval` seconds by
    a daemon thread: ``'anon'`` (what the process allocated) and ``'rss'``
    (with mapped file pages, which the kernel drops and re-reads under
    pressure). The kernel's own high-water mark (``'peak'`` of
    :func:`process_memory`) counts mapped file pages too; the anonymous peak
    is what a memory bound is about.

    Args:
        interval (float, optional): seconds between two reads.
            (default: :obj:`0.2`)

    Example:
        >>> from pyg_fastload.storage.io_stats import MemoryWatch
        >>> watch = MemoryWatch(0.01).start()
        >>> rows = bytearray(64 << 20)  # the work watched
        >>> sorted(watch.stop())  # Linux: both peaks, in bytes
        ['anon', 'rss']
    """
    def __init__(self, interval: float = 0.2):
        if isinstance(interval, bool) or not isinstance(
                interval, (int, float)) or not interval > 0:
            raise ValueError(f"'interval' must be a positive number of "
                             f"seconds, got {interval!r}")
        self.interval = float(interval)
        self.peaks: Dict[str, int] = {}
        self._done = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def _sample(self) -> None:
        for key, value in process_memory().items():
            if key in ('anon', 'rss'):
                self.peaks[key] = max(self.peaks.get(key, 0), value)

    def _run(self) -> None:
        while not self._done.wait(self.interval):
            self._sample()

    def start(self) -> 'MemoryWatch':
        self._sample()
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name='memory-watch')
        self._thread.start()
        return self

    def stop(self) -> Dict[str, int]:
        r"""Stops watching; the peaks (empty where unknown)."""
        self._done.set()
        if self._thread is not None:
            self._thread.join()
        self._sample()
        return dict(self.peaks)
