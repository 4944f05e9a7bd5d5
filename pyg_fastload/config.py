r"""Settings validated once and passed as one object: fan-outs, memory
budgets, the cache settings and the pipeline settings."""
from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass
from typing import Any, Dict, List, Literal, Optional, Sequence, Union

import torch

from .errors import FastLoadError

__all__ = [
    'ADAPTIVE_RUN_AHEAD',
    'FeatureCache',
    'PipelineSettings',
    'PIPELINE_KEYS',
    'SettingError',
    'check_one_of',
    'nested_setting',
    'folded_setting',
    'Budget',
    'POLICIES',
    'DEVICE_CACHE_MODES',
    'parse_budget',
    'budget_rows',
    'check_fanouts',
    'check_hops',
    'check_sampling_workers',
    'available_memory',
    'free_cuda_memory',
    'usable_cores',
    'format_bytes',
    'MAX_LOOKAHEAD',
]


Budget = Optional[Union[int, float, str]]

#: The hotness policies that can choose the cached rows.
POLICIES = ('out_degree', 'reverse_pagerank', 'expected_access', 'presample',
            'random')
#: How the device cache is filled: hottest rows, or GIDS window buffering.
DEVICE_CACHE_MODES = ('static', 'window')
#: The most batches a loader holds ahead of the model: a cache's window, the
#: storage read-ahead, the pipeline's queues (each batch is held in memory
#: until it is gathered or trained on).
MAX_LOOKAHEAD = 64

_UNITS = {'': 1, 'b': 1, 'kb': 10**3, 'mb': 10**6, 'gb': 10**9, 'tb': 10**12,
          'kib': 2**10, 'mib': 2**20, 'gib': 2**30, 'tib': 2**40}


class SettingError(FastLoadError, ValueError):
    r"""A bad value of one setting; :attr:`key` names it (``'window'``) and
    :attr:`detail` says what is wrong and what to give instead.

    Args:
        key (str): the setting's name, dotted where nested
            (``'evaluation.batch_size'``).
        detail (str): what is wrong with the value and what to give.
    """
    def __init__(self, key: str, detail: str):
        super().__init__(f"'{key}': {detail}")
        self.key = key
        self.detail = detail


def check_one_of(key: str, value: Any, allowed: Sequence[str]) -> None:
    r"""Refuses a setting :obj:`key` whose :obj:`value` is not one of
    :obj:`allowed`, listing them.

    Args:
        key (str): the setting's name, for the error.
        value: the value given.
        allowed (Sequence[str]): the values accepted.
    """
    if value not in allowed:
        raise SettingError(key, f"{value!r} is not one of "
                           f"{', '.join(map(repr, allowed))}")


def parse_budget(budget: Budget, name: str,
                 allow_auto: bool = False) -> Union[None, int, float, str]:
    r"""A memory budget in normal form: :obj:`None` (none), an ``int``
    number of bytes, a ``float`` fraction of the rows in ``[0, 1]``, or
    ``'auto'`` where :obj:`allow_auto`.

    Args:
        budget: :obj:`None`, bytes, a fraction, or a string such as
            ``'512MiB'``, ``'2GB'`` or ``'20%'``.
        name (str): the argument's name, for error messages.
        allow_auto (bool): accept ``'auto'``.
    """
    if budget is None:
        return None
    if isinstance(budget, bool):
        raise TypeError(f"'{name}' must be bytes, a fraction or a size "
                        f"string, got {budget!r}")
    if isinstance(budget, str):
        text = budget.strip().lower()
        if text == 'auto' and allow_auto:
            return 'auto'
        if text.endswith('%'):
            try:
                budget = float(text[:-1]) / 100
            except ValueError:
                budget = None
        else:
            match = re.fullmatch(r'([0-9.]+)\s*([a-z]*)', text)
            if match is None or match.group(2) not in _UNITS:
                budget = None
            else:
                budget = int(float(match.group(1)) * _UNITS[match.group(2)])
        if budget is None:
            raise ValueError(f"'{name}={text!r}' is not a size: use bytes "
                             f"(e.g. '512MiB', '2GB') or a percentage "
                             f"('20%')" + (" or 'auto'" if allow_auto else ''))
    if isinstance(budget, float):
        if not 0.0 <= budget <= 1.0:
            raise ValueError(f"'{name}={budget}' as a fraction must lie in "
                             f"[0, 1]; give bytes as an int or a string")
        return budget
    if isinstance(budget, int):
        if budget < 0:
            raise ValueError(f"'{name}={budget}' must be >= 0 bytes")
        return budget
    raise TypeError(f"'{name}' must be bytes, a fraction or a size string, "
                    f"got {type(budget).__name__}")


def budget_rows(budget: Budget, num_rows: int, row_bytes: int,
                name: str) -> int:
    r"""How many rows of :obj:`row_bytes` bytes fit in :obj:`budget` (see
    :func:`parse_budget`); never more than :obj:`num_rows`.

    Args:
        budget: :obj:`None` (no rows), bytes, a fraction of the rows or a
            size string such as ``'2GiB'``.
        num_rows (int): rows there are.
        row_bytes (int): bytes of one row.
        name (str): the argument's name, for error messages.
    """
    value = parse_budget(budget, name)
    if value is None:
        return 0
    if isinstance(value, float):
        return min(num_rows, int(round(value * num_rows)))
    return min(num_rows, value // max(row_bytes, 1))


@dataclass(frozen=True)
class FeatureCache:
    r"""Where feature rows live: the host buffer and device cache in front
    of storage, validated once when made.

    Args:
        host_budget: host buffer of hot rows: bytes, a fraction of the rows
            or a string such as ``'2GiB'`` / ``'10%'``.
        device_budget: device cache (GPU memory on CUDA, a separate tensor
            on CPU), the same units, or ``'auto'`` (after the first
            training step: free memory minus the step's transient memory
            minus a reserve).
        policy (str): hotness policy choosing the cached rows.
        device_cache (str): ``'static'`` (hottest rows) or ``'window'``
            (GIDS window buffering over the loader's look-ahead).
        window (int): look-ahead batches for ``device_cache='window'`` (at
            most :data:`MAX_LOOKAHEAD`).
        read_ahead (int): batches whose storage reads may merge, for
            features on disk (0: off; at most :data:`MAX_LOOKAHEAD`):
            GIDS's accumulator for direct reads, a page-cache read-ahead
            for memory-mapped ones.
        in_memory (bool): load a dataset directory's features into memory
            instead of reading them from disk.
        exceed_memory (bool): allow caches larger than the memory the
            machine has (refused by default).
        storage (str): how a dataset directory's feature matrices are read,
            a name of :data:`~pyg_fastload.storage.STORAGE_KINDS` (checked
            where the run's spec is made or the dataset opened):
            ``'mmap'`` (memory-mapped: the page cache keeps what was read)
            or ``'direct'`` (``O_DIRECT`` reads, many in flight: the host
            buffer is the only host cache;
            :class:`~pyg_fastload.storage.DirectStorage`) or ``'gds'``
            (CUDA: rows that miss every cache read by kvikio straight into
            GPU memory, GPUDirect Storage where available;
            :class:`~pyg_fastload.storage.GpuDirectStorage`).
        reads_in_flight (int or str): direct reads issued at once, or
            ``'auto'`` (doubled from 4 while the measured throughput gains
            at least 5%; :class:`~pyg_fastload.storage.direct.InFlightTuner`).

    Example:
        >>> from pyg_fastload.config import FeatureCache
        >>> cache = FeatureCache(host_budget='10%', device_cache='window')
        >>> cache.enabled, cache.window
        (True, 4)
        >>> FeatureCache(window=0)
        Traceback (most recent call last):
        ...
        pyg_fastload.config.SettingError: 'window': 0 must be an int >= 1 ...
    """
    host_budget: Optional[Union[int, float, str]] = None
    device_budget: Optional[Union[int, float, str]] = None
    policy: Literal['out_degree', 'reverse_pagerank', 'expected_access',
                    'presample',
                    'random'] = 'out_degree'
    device_cache: Literal['static', 'window'] = 'static'
    window: int = 4
    read_ahead: int = 0
    in_memory: bool = False
    exceed_memory: bool = False
    storage: str = 'mmap'
    reads_in_flight: Union[int, Literal['auto']] = 'auto'

    def __post_init__(self) -> None:
        for key in ('host_budget', 'device_budget'):
            value = getattr(self, key)
            try:
                parsed = parse_budget(value, key, key == 'device_budget')
            except (TypeError, ValueError) as exc:
                raise SettingError(key, str(exc)) from None
            if isinstance(parsed, int) and not self.exceed_memory:
                available = available_memory()
                if available and parsed > available:
                    raise SettingError(
                        key, f"{value!r} ({format_bytes(parsed)}) is more "
                        f"than the {format_bytes(available)} of memory "
                        f"available; give a smaller size or a fraction such "
                        f"as '10%', or set exceed_memory=True")
        check_one_of('policy', self.policy, POLICIES)
        check_one_of('device_cache', self.device_cache, DEVICE_CACHE_MODES)
        if self.storage != 'mmap' and self.in_memory:
            raise SettingError('storage', f"{self.storage!r} reads the "
                               f"features from disk, which 'in_memory' "
                               f"loads into memory instead; drop one of "
                               f"them")
        _check_batches('window', self.window, 1)
        _check_batches('read_ahead', self.read_ahead, 0)
        reads = self.reads_in_flight
        if reads != 'auto' and (isinstance(reads, bool) or
                                not isinstance(reads, int) or reads < 1):
            raise SettingError('reads_in_flight', f"{reads!r} must be an int "
                               f">= 1 (reads) or 'auto'")

    @property
    def enabled(self) -> bool:
        r"""Whether any cache tier is asked for."""
        return self.host_budget is not None or self.device_budget is not None


#: ``run_ahead`` values that launch batches by ByteGNN's launch score.
ADAPTIVE_RUN_AHEAD = ('adaptive', 'trainer_first')


@dataclass(frozen=True)
class PipelineSettings:
    r"""How a loader samples and overlaps its work with the model: the
    options :class:`~pyg_fastload.FastNeighborLoader`,
    :class:`~pyg_fastload.FastLinkNeighborLoader` and the Lightning data
    module take as one object (``pipeline_settings``; config key
    ``data.pipeline_settings``). In Python they also take each field as a
    keyword of its own (``pipeline=False``), which :meth:`of` folds in.

    Args:
        pipeline (bool or str): ``True`` (sampling and loading threads),
            ``False`` (sequential) or ``'auto'`` (decided in the first
            epoch by measuring both).
        queue_capacity (int): batches each queue holds (at most
            :data:`MAX_LOOKAHEAD`).
        run_ahead (str or int): ``'adaptive'`` (batches launched by
            ByteGNN's launch score), ``'trainer_first'`` (the same, but
            while the trainer works only on the cores it leaves idle) or a
            fixed number of batches in flight.
        sampling_workers (int): threads sampling batches at once when
            pipelined (ByteGNN's pool; ``1``: the sampling thread alone; at
            most the cores this process may run on).
        sampling_device (str, int or torch.device, optional): where the
            topology lives and sampling runs: :obj:`None` (the CPU) or a
            CUDA device, for a loader; for a run (the data module)
            ``'cpu'`` (default) or ``'cuda'``: the trainer's GPU, which gets
            a copy of the graph's topology (4-8 bytes per edge with 32-bit
            ids: 0.48 GiB for products-like, as ``pyg-fastload bench loader
            --preset products-like`` prints) and samples there (DSP's and
            GIDS's GPU sampling; mode ``'replicated'``, ``num_workers:
            0``); a heterogeneous graph is still sampled on the CPU, its
            batches sent to the GPU. Checked where it is resolved
            (:class:`~pyg_fastload.placement.Placement`).

    Example:
        >>> from pyg_fastload.config import PipelineSettings
        >>> settings = PipelineSettings(pipeline=True, sampling_workers=1)
        >>> flat = {'queue_capacity': 4, 'batch_size': 8}
        >>> PipelineSettings.of(settings, flat).queue_capacity, flat
        (4, {'batch_size': 8})
    """
    pipeline: Union[bool, Literal['auto']] = 'auto'
    queue_capacity: int = 2
    run_ahead: Union[int, Literal['adaptive', 'trainer_first']] = 'adaptive'
    sampling_workers: int = 1
    sampling_device: Optional[Union[str, int, torch.device]] = None

    def __post_init__(self) -> None:
        _check_batches('queue_capacity', self.queue_capacity, 1)
        if self.pipeline not in (True, False, 'auto'):
            raise SettingError('pipeline', f"must be True, False or 'auto', "
                               f"got {self.pipeline!r}")
        check_sampling_workers(self.sampling_workers)
        run_ahead = self.run_ahead
        if run_ahead not in ADAPTIVE_RUN_AHEAD and (
                isinstance(run_ahead, bool) or not isinstance(run_ahead, int)
                or run_ahead < 1):
            raise SettingError('run_ahead', f"must be 'adaptive', "
                               f"'trainer_first' or an int >= 1 (batches "
                               f"in flight), got {run_ahead!r}")

    @classmethod
    def of(cls, settings: Any = None, flat: Optional[Dict[str, Any]] = None,
           key: str = 'pipeline_settings') -> PipelineSettings:
        r"""The settings a loader or data module was given: :obj:`settings`
        (:obj:`None`, a :class:`PipelineSettings` or a dict of its fields)
        with the fields given as keywords of their own, popped from
        :obj:`flat` (a caller's ``**kwargs``), replacing its values.

        Args:
            settings: the ``pipeline_settings`` argument.
            flat (dict, optional): keyword arguments, of which the names of
                this class's fields are taken out.
            key (str): the argument's name, for errors in a dict.
        """
        return folded_setting(key, cls, settings, flat,
                              {name: name for name in PIPELINE_KEYS})


#: The fields of :class:`PipelineSettings`, which the loaders and the data
#: module also take as keywords of their own.
PIPELINE_KEYS = tuple(PipelineSettings.__dataclass_fields__)


def nested_setting(key: str, cls: type, value: Any) -> Any:
    r"""The nested setting :obj:`key`: :obj:`value` if :obj:`None` or a
    :obj:`cls` (a dataclass), else one made from a dict of its fields; a
    bad value is named by its key (``key.field``).

    Args:
        key (str): the setting's name, for errors.
        cls (type): the setting's class (a frozen dataclass).
        value: :obj:`None`, a :obj:`cls` or a dict of its fields.
    """
    if value is None or isinstance(value, cls):
        return value
    if not isinstance(value, dict):
        raise SettingError(key, f"must be {cls.__name__} or a dict, got "
                           f"{type(value).__name__}")
    known = sorted(cls.__dataclass_fields__)
    unknown = sorted(set(value) - set(known))
    if unknown:
        raise SettingError(key, f"unknown keys {unknown}; known: {known}")
    try:
        return cls(**value)
    except SettingError as error:
        if error.key.startswith(f'{key}.'):
            raise
        raise SettingError(f'{key}.{error.key}', error.detail) from None


def folded_setting(key: str, cls: type, value: Any,
                   flat: Optional[Dict[str, Any]],
                   aliases: Dict[str, str]) -> Any:
    r"""The nested setting :obj:`key` (:func:`nested_setting`; its
    defaults if :obj:`None`) with the fields a caller also takes as
    keywords of their own, popped from :obj:`flat` (its ``**kwargs``),
    replacing the setting's values: one code path for an option object
    and its Python aliases.

    Args:
        key (str): the argument's name, for errors.
        cls (type): the option object's class (a frozen dataclass).
        value: the argument: :obj:`None`, a :obj:`cls` or a dict.
        flat (dict, optional): the caller's other keyword arguments.
        aliases (dict): keyword name -> field name.

    Example:
        >>> from pyg_fastload.config import PipelineSettings, folded_setting
        >>> flat = {'sampling_threads': 2, 'batch_size': 8}
        >>> folded_setting('pipeline_settings', PipelineSettings, None, flat,
        ...                {'sampling_threads': 'sampling_workers'}
        ...                ).sampling_workers, flat
        (2, {'batch_size': 8})
    """
    given = nested_setting(key, cls, value) or cls()
    found = {} if flat is None else {
        name: flat.pop(alias) for alias, name in aliases.items()
        if alias in flat}
    return dataclasses.replace(given, **found) if found else given


def _check_batches(key: str, value: Any, low: int) -> None:
    r"""Validates a number of batches held ahead of the model: an int from
    :obj:`low` to :data:`MAX_LOOKAHEAD`."""
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise SettingError(key, f"{value!r} must be an int >= {low} "
                           f"(batches)")
    if value > MAX_LOOKAHEAD:
        raise SettingError(key, f"{value} batches: the loader holds every "
                           f"batch it keeps ahead of the model in memory; "
                           f"give at most {MAX_LOOKAHEAD}")


def check_sampling_workers(workers: Any) -> int:
    r"""Validates a number of sampling threads: an int from 1 to the cores
    this process may run on.

    Args:
        workers: the ``sampling_workers`` value given.
    """
    if isinstance(workers, bool) or not isinstance(workers, int) or \
            workers < 1:
        raise SettingError('sampling_workers', f"must be an int >= 1 "
                           f"(threads), got {workers!r}")
    cores = usable_cores()
    if workers > cores:
        raise SettingError(
            'sampling_workers', f"{workers} is more than the {cores} cores "
            f"this process may run on: more threads than cores sample no "
            f"faster and each holds 4 bytes per node; give at most {cores}")
    return workers


def check_hops(num_hops: int) -> None:
    r"""At least one hop, where the seeds alone are a mistake (node
    loading, presampling; PyG's link loader takes zero hops).

    Args:
        num_hops (int): hops asked for (the length of ``num_neighbors``).
    """
    if num_hops == 0:
        raise ValueError("'num_neighbors' is empty: give one fan-out per hop, "
                         "e.g. [15, 10, 5] (-1 takes every neighbour)")


def check_fanouts(num_neighbors: Any, zero_hops: bool = False) -> List[int]:
    r"""Validates a per-hop fan-out list (``-1`` = all neighbours; an empty
    one, zero hops, only where :obj:`zero_hops`).

    Args:
        num_neighbors: the fan-outs, a list of ints or PyG's
            ``NumNeighbors`` holding one.
        zero_hops (bool): accept an empty list.
    """
    values = num_neighbors  # or PyG's NumNeighbors, holding them
    if not isinstance(values, (dict, Sequence)):
        values = getattr(values, 'values', values)
    if isinstance(values, str):
        hint = re.findall(r'-?\d+', values)
        raise TypeError(f"'num_neighbors' must be a list with one fan-out "
                        f"per hop, got the string {values!r}: write "
                        f"[{', '.join(hint) or '15, 10, 5'}]")
    if isinstance(values, dict):
        raise ValueError(
            "'num_neighbors' given per edge type (a dict) is for a "
            "HeteroData; this graph is homogeneous: give one list, e.g. "
            "[15, 10, 5]")
    if isinstance(values, int) or not isinstance(values, Sequence):
        raise TypeError(f"'num_neighbors' must be a list with one fan-out "
                        f"per hop, e.g. [15, 10, 5], got {num_neighbors!r}")
    if not zero_hops:
        check_hops(len(values))
    out = []
    for hop, value in enumerate(values):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"'num_neighbors[{hop}]' must be an int, got "
                            f"{value!r}")
        if value < -1:
            raise ValueError(
                f"'num_neighbors[{hop}]' is {value}: a fan-out must be >= 0, "
                f"or -1 to take every neighbour")
        out.append(int(value))
    return out


def available_memory() -> int:
    r"""Bytes of host memory available to new allocations (``MemAvailable``
    of ``/proc/meminfo``; :obj:`0` where it cannot be read)."""
    try:
        with open('/proc/meminfo') as f:
            for line in f:
                if line.startswith('MemAvailable:'):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def free_cuda_memory(device: torch.device) -> int:
    r"""Bytes a new allocation on CUDA :obj:`device` can take: the driver's
    free memory plus the blocks PyTorch's caching allocator holds unused
    (``mem_get_info`` counts those as taken, yet the allocator hands them
    out, e.g. a finished training step's activations).

    Args:
        device (torch.device): a CUDA device.
    """
    free = torch.cuda.mem_get_info(device)[0]
    return (free + torch.cuda.memory_reserved(device)
            - torch.cuda.memory_allocated(device))


def usable_cores() -> int:
    r"""Cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def format_bytes(num: float) -> str:
    r"""``num`` bytes as ``'12 B'``, ``'3.4 MiB'``, ... (GiB at most).

    Args:
        num (float): a number of bytes.
    """
    if num < 1024:
        return f'{num:.0f} B'
    for unit in ('KiB', 'MiB'):
        num /= 1024
        if num < 1024:
            return f'{num:.1f} {unit}'
    return f'{num / 1024:.1f} GiB'
