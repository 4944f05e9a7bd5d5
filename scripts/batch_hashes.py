r"""Hashes the first training and validation batches of every loading
combination (graph kind x task x mode x source x pipeline), so that a change
of the code's shape can show that batches did not change (issue 42).

Each combination is built the way users build it, through
``pyg_fastload.lightning.FastLoadDataModule``, on the synthetic presets
``'tiny'`` (homogeneous) and ``'hetero-tiny'`` (heterogeneous), prepared
into a temporary directory with ``pyg-fastload prepare`` and partitioned with
``pyg-fastload partition`` where a mode needs it. One-rank combinations run
in this process; two-rank ones run as two subprocesses of this script on
127.0.0.1 over gloo, each rank hashing its own batches (entries
``...@rank0`` and ``...@rank1``). Every wait is bounded.

A combination the code refuses today is recorded as ``"refused: <message>"``
(so one it supports later shows up as newly supported); one that fails
otherwise as ``"error: <message>"``.

Usage::

    python scripts/batch_hashes.py [--out FILE] [--only GLOB ...] [--list]
    python scripts/batch_hashes.py --compare BEFORE.json AFTER.json

The package is imported normally, so ``PYTHONPATH=/path/to/checkout``
hashes another checkout (run from a directory outside this one); the rank
subprocesses inherit the environment. ``--compare`` prints identical /
different / new / missing and exits 1 if any hash differs (or a combination
that had hashes now fails). Progress goes to stderr.
"""
from __future__ import annotations

import argparse
import fnmatch
import hashlib
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

#: Batches hashed per split.
NUM_BATCHES = 3
#: The seed of everything (torch, random, numpy, the data module's seed).
SEED = 0
#: The sampled fan-out and the seeds per batch.
NUM_NEIGHBORS = [5, 5]
BATCH_SIZE = 64
#: (``'hetero-tiny'`` has 400 papers: 3 batches a split on each of 2 ranks)
HETERO_BATCH_SIZE = 16
#: The relation a heterogeneous link task predicts.
HETERO_LINK_EDGE = ['author', 'writes', 'paper']
#: Seconds each two-rank combination may take (plus as much again for the
#: ranks' start) before the ranks of its group are killed, and the limit of
#: every collective inside.
COMBO_TIMEOUT = 60.0
DIST_TIMEOUT = 60.0

#: Modes whose ranks sample or fetch features together: their loaders run
#: whole epochs on every rank.
COLLECTIVE_MODES = ('dsp', 'hopgnn')

#: Fields hashed, in this order, when present: of a ``Data`` batch, of each
#: node type and of each edge type of a ``HeteroData`` batch.
DATA_FIELDS = ('n_id', 'edge_index', 'x', 'y', 'input_id', 'batch_size',
               'edge_label_index', 'edge_label', 'src_index',
               'dst_pos_index', 'dst_neg_index')
NODE_FIELDS = ('n_id', 'x', 'y', 'input_id', 'batch_size')
EDGE_FIELDS = ('edge_index', 'edge_label_index', 'edge_label', 'input_id',
               'src_index', 'dst_pos_index', 'dst_neg_index')


def log(message: str) -> None:
    print(f'[batch_hashes {time.strftime("%H:%M:%S")}] {message}',
          file=sys.stderr, flush=True)


# Combinations ###############################################################

@dataclass(frozen=True)
class Combo:
    r"""One loading combination: ``graph`` ``'homo'``/``'hetero'``,
    ``task`` ``'node'``/``'link'``, a mode, where the data comes from
    (``source``: ``'mem'`` a preset in memory, ``'dir'`` a prepared
    directory read through the feature store, ``'dir-cache'`` the same with
    a host buffer and a device cache, ``'dir-window'`` with a window cache
    and read-ahead, ``'parts'`` the partitions alone), ``ranks`` and
    ``pipeline``."""
    graph: str
    task: str
    mode: str
    source: str
    ranks: int
    pipeline: bool

    @property
    def name(self) -> str:
        return (f'{self.graph}-{self.task}-{self.mode}-{self.source}-'
                f'{self.ranks}rank-pipeline_{"on" if self.pipeline else "off"}')

    @property
    def partition_method(self) -> Optional[str]:
        return {'pagraph': 'pagraph', 'dsp': 'metis',
                'hopgnn': 'metis'}.get(self.mode)


def combinations() -> List[Combo]:
    r"""Every combination, supported today or not (refusals are recorded)."""
    combos = []
    for graph in ('homo', 'hetero'):
        for task in ('node', 'link'):
            for pipeline in (False, True):
                for source in ('mem', 'dir', 'dir-cache', 'dir-window'):
                    combos.append(Combo(graph, task, 'replicated', source, 1,
                                        pipeline))
                combos.append(Combo(graph, task, 'replicated', 'dir', 2,
                                    pipeline))
                for mode in ('pagraph', 'dsp', 'hopgnn'):
                    for source in ('dir', 'parts'):
                        combos.append(Combo(graph, task, mode, source, 2,
                                            pipeline))
                    if mode != 'pagraph':
                        combos.append(Combo(graph, task, mode, 'dir-cache',
                                            2, pipeline))
    return combos


# Hashing ####################################################################

def _tensor_digest(value: Any) -> Tuple[str, str]:
    r"""``(description, sha256 hex)`` of a tensor (its dtype, shape and
    bytes), a number or a sparse adjacency."""
    import torch
    h = hashlib.sha256()
    if isinstance(value, torch.Tensor):
        t = value.detach().cpu().contiguous().reshape(-1)
        desc = f'{str(value.dtype).replace("torch.", "")}' \
               f'{list(value.shape)}'
        h.update(desc.encode())
        h.update(t.view(torch.uint8).numpy().tobytes())
        return desc, h.hexdigest()
    if hasattr(value, 'coo'):  # a torch_sparse SparseTensor
        row, col, val = value.coo()
        parts = [_tensor_digest(t) for t in (row, col) + (
            () if val is None else (val, ))]
        desc = f'sparse{list(value.sizes())}'
        h.update(desc.encode())
        for _, d in parts:
            h.update(d.encode())
        return desc, h.hexdigest()
    desc = f'{type(value).__name__}={value!r}'
    h.update(desc.encode())
    return desc, h.hexdigest()


def batch_fields(batch: Any) -> Dict[str, Tuple[str, str]]:
    r"""``{field: (description, digest)}`` of the hashed fields of a
    ``Data`` or ``HeteroData`` batch."""
    from torch_geometric.data import HeteroData
    out: Dict[str, Tuple[str, str]] = {}
    if isinstance(batch, HeteroData):
        for node_type in sorted(batch.node_types):
            store = batch[node_type]
            for key in NODE_FIELDS:
                value = store.get(key) if key in store else None
                if value is not None:
                    out[f'{node_type}.{key}'] = _tensor_digest(value)
        for edge_type in sorted(batch.edge_types):
            store = batch[edge_type]
            for key in EDGE_FIELDS:
                value = store.get(key) if key in store else None
                if value is not None:
                    out[f'{"__".join(edge_type)}.{key}'] = \
                        _tensor_digest(value)
        return out
    for key in DATA_FIELDS:
        value = batch.get(key) if key in batch else None
        if value is not None:
            out[key] = _tensor_digest(value)
    return out


def batch_digest(batch: Any) -> Tuple[str, Dict[str, str]]:
    r"""The batch's sha256 over its fields, and each field's short digest
    (``'dtype[shape]:hex16'``, to say which field differs)."""
    fields = batch_fields(batch)
    h = hashlib.sha256()
    for key in sorted(fields):
        desc, digest = fields[key]
        h.update(f'{key}\0{desc}\0{digest}\n'.encode())
    return h.hexdigest(), {k: f'{d}:{x[:16]}'
                           for k, (d, x) in sorted(fields.items())}


# Data preparation ###########################################################

class CommandRefused(Exception):
    r"""``pyg-fastload`` refused its arguments: it ended with its own error
    line, not a traceback (e.g. partitioning a heterogeneous dataset
    today)."""


class Workdir:
    r"""The generated datasets and partitions, made on first use with the
    package's own command line (``python -m pyg_fastload``); a command that
    failed is not run again."""
    def __init__(self, root: Path):
        self.root = root
        self.cache = root / 'cache'
        self.failed: Dict[Tuple[str, ...], Exception] = {}

    def _cli(self, *args: str) -> None:
        if args in self.failed:
            raise self.failed[args]
        cmd = [sys.executable, '-m', 'pyg_fastload', *args]
        log('  $ pyg-fastload ' + ' '.join(args))
        result = subprocess.run(cmd, capture_output=True, text=True,
                                timeout=600, cwd=self.root)
        if result.returncode != 0:
            output = result.stderr or result.stdout
            text = ' '.join(output.split())[-800:]
            refused = 'Traceback' not in output and \
                f'pyg-fastload {args[0]}: error:' in output
            error = CommandRefused(text) if refused else RuntimeError(
                f"pyg-fastload {args[0]} (exit {result.returncode}): {text}")
            self.failed[args] = error
            raise error

    def dataset(self, graph: str) -> Path:
        path = self.root / f'{graph}-ds'
        if not (path / 'meta.json').is_file():
            # (the heterogeneous presets are generated in memory: no cache)
            cache = ['--cache-dir', str(self.cache)] if graph == 'homo' \
                else []
            preset = 'tiny' if graph == 'homo' else 'hetero-tiny'
            self._cli('prepare', '--preset', preset, '--seed', str(SEED),
                      *cache, '--no-progress', str(path))
        return path

    def parts_path(self, graph: str, method: str) -> Path:
        return self.root / f'{graph}-{method}-parts'

    def parts(self, graph: str, method: str) -> Path:
        path = self.parts_path(graph, method)
        if not (path / 'partition.json').is_file():
            self._cli('partition', str(self.dataset(graph)), '--num-parts',
                      '2', '--method', method, '--seed', str(SEED),
                      '--out', str(path), '--no-progress')
        return path


# Building and iterating one combination #####################################

def _api():
    r"""The user-facing classes, wherever the package keeps them."""
    import pyg_fastload.lightning as lightning
    return (lightning.FastLoadDataModule, lightning.FeatureCache,
            lightning.LinkOptions)


def module_kwargs(combo: Combo, work: Workdir, check_only: bool = False
                  ) -> Dict[str, Any]:
    r"""The data module's arguments of :obj:`combo` (with
    :obj:`check_only`, partitions are named but not made)."""
    _, FeatureCache, LinkOptions = _api()
    kwargs: Dict[str, Any] = dict(
        num_neighbors=list(NUM_NEIGHBORS),
        batch_size=BATCH_SIZE if combo.graph == 'homo' else
        HETERO_BATCH_SIZE,
        pipeline=combo.pipeline, seed=SEED, progress=False,
        cache_dir=str(work.cache), mode=combo.mode,
        dist_timeout=DIST_TIMEOUT)
    if combo.source == 'mem':
        kwargs['dataset'] = 'tiny' if combo.graph == 'homo' else \
            'hetero-tiny'
    elif combo.source != 'parts':
        kwargs['dataset'] = str(work.dataset(combo.graph))
    if combo.source == 'dir-cache':
        kwargs['feature_cache'] = FeatureCache(host_budget='30%',
                                               device_budget='10%')
    elif combo.source == 'dir-window':
        kwargs['feature_cache'] = FeatureCache(
            host_budget='20%', device_budget='10%', device_cache='window',
            read_ahead=2)
    method = combo.partition_method
    if method is not None:
        kwargs['partitions'] = str(
            work.parts_path(combo.graph, method) if check_only else
            work.parts(combo.graph, method))
    if combo.task == 'link':
        kwargs['task'] = 'link'
        kwargs['link'] = LinkOptions(
            eval_edges=200, eval_negatives=20,
            edge_type=HETERO_LINK_EDGE if combo.graph == 'hetero' else None)
    return kwargs


def _is_refusal(error: BaseException) -> bool:
    r"""A setting the code refuses (its ``SettingError``/``ConfigError``)."""
    names = {c.__name__ for c in type(error).__mro__}
    return bool(names & {'SettingError', 'ConfigError', 'CommandRefused'})


def _outcome(error: BaseException) -> str:
    message = ' '.join(str(error).split())
    if _is_refusal(error):
        return f'refused: {message}'
    return f'error: {type(error).__name__}: {message}'


def seed_everything(seed: int = SEED) -> None:
    import numpy
    import torch
    os.environ['PL_GLOBAL_SEED'] = str(seed)  # what Lightning records
    random.seed(seed)
    numpy.random.seed(seed)
    torch.manual_seed(seed)


def refusal(combo: Combo, work: Workdir) -> Optional[str]:
    r"""``'refused: ...'`` if the data module refuses :obj:`combo` when
    made (nothing is opened), else :obj:`None`."""
    FastLoadDataModule, _, _ = _api()
    try:
        FastLoadDataModule(**module_kwargs(combo, work, check_only=True))
    except Exception as error:  # noqa: BLE001 (recorded)
        if _is_refusal(error):
            return _outcome(error)
        raise
    return None


def hash_split(loader: Any, whole_epoch: bool = False
               ) -> Tuple[List[str], List[Dict]]:
    r"""The digests of the first :data:`NUM_BATCHES` batches of
    :obj:`loader`; with :obj:`whole_epoch` the loader is run to the end of
    its epoch (collective modes: every rank takes part in every batch its
    pipeline starts)."""
    hashes, fields = [], []
    for i, batch in enumerate(loader):
        if i < NUM_BATCHES:
            digest, per_field = batch_digest(batch)
            hashes.append(digest)
            fields.append(per_field)
        elif not whole_epoch:
            break
    return hashes, fields


def run_combo(combo: Combo, work: Workdir) -> Any:
    r"""``{'train': [...], 'val': [...], 'fields': {...}}`` of this
    process's batches, or ``'refused: ...'``/``'error: ...'``."""
    FastLoadDataModule, _, _ = _api()
    seed_everything()
    module = None
    try:
        module = FastLoadDataModule(**module_kwargs(combo, work))
        module.prepare_data()
        module.setup('fit')
        whole = combo.ranks > 1 and combo.mode in COLLECTIVE_MODES
        train, train_fields = hash_split(module.train_dataloader(), whole)
        val, val_fields = hash_split(module.val_dataloader(), whole)
        return {'train': train, 'val': val,
                'fields': {'train': train_fields, 'val': val_fields}}
    except Exception as error:  # noqa: BLE001 (recorded)
        if not _is_refusal(error):
            log(f'  {combo.name}: ' + ''.join(traceback.format_exception(
                type(error), error, error.__traceback__))[-2000:])
        return _outcome(error)
    finally:
        if module is not None:
            try:
                module.teardown('fit')
            except Exception as error:  # noqa: BLE001
                log(f'  {combo.name}: teardown: {error!r}')


# Two ranks ##################################################################

def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


def rank_worker(spec_file: str) -> int:
    r"""One rank of a group of two-rank combinations (a subprocess of
    :func:`run_group`): joins the gloo group, then runs each combination in
    order and appends its result to its own JSON-lines file."""
    from datetime import timedelta

    import torch.distributed as dist
    spec = json.loads(Path(spec_file).read_text())
    rank, world = int(os.environ['RANK']), int(os.environ['WORLD_SIZE'])
    work = Workdir(Path(spec['workdir']))
    out = Path(spec['out'][rank])
    dist.init_process_group('gloo', rank=rank, world_size=world,
                            timeout=timedelta(seconds=DIST_TIMEOUT))
    try:
        for raw in spec['combos']:
            combo = Combo(**raw)
            result = run_combo(combo, work)
            with out.open('a') as f:
                f.write(json.dumps({'name': combo.name,
                                    'result': result}) + '\n')
            dist.barrier()  # both ranks done before the next one
    finally:
        dist.destroy_process_group()
    return 0


def run_group(combos: List[Combo], work: Workdir, world: int = 2,
              per_combo: float = COMBO_TIMEOUT) -> Dict[str, Any]:
    r"""Runs :obj:`combos` on :obj:`world` rank subprocesses (127.0.0.1,
    gloo, a free port); ``{name@rankR: result}``, each combination a rank
    did not finish within ``per_combo * (len(combos) + 1)`` seconds
    recorded as an error."""
    timeout = per_combo * (len(combos) + 1)
    tag = f'group{time.monotonic_ns()}'
    spec_file = work.root / f'{tag}.json'
    outs = [work.root / f'{tag}-rank{r}.jsonl' for r in range(world)]
    spec_file.write_text(json.dumps({
        'workdir': str(work.root), 'out': [str(p) for p in outs],
        'combos': [asdict(c) for c in combos]}))
    port = free_port()
    procs = []
    logs = []
    for rank in range(world):
        env = dict(os.environ, MASTER_ADDR='127.0.0.1',
                   MASTER_PORT=str(port), RANK=str(rank),
                   WORLD_SIZE=str(world), LOCAL_RANK=str(rank),
                   LOCAL_WORLD_SIZE=str(world))
        log_file = (work.root / f'{tag}-rank{rank}.log').open('w')
        logs.append(log_file)
        procs.append(subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), '--rank-worker',
             str(spec_file)], env=env, stdout=log_file,
            stderr=subprocess.STDOUT, cwd=work.root))
    deadline = time.monotonic() + timeout
    timed_out = False
    try:
        for proc in procs:
            left = deadline - time.monotonic()
            try:
                proc.wait(timeout=max(left, 0.1))
            except subprocess.TimeoutExpired:
                timed_out = True
                break
    finally:
        for proc in procs:  # only the processes started here
            if proc.poll() is None:
                proc.kill()
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    pass
        for log_file in logs:
            log_file.close()
    results: Dict[str, Any] = {}
    for rank, path in enumerate(outs):
        done = {}
        if path.is_file():
            for line in path.read_text().splitlines():
                entry = json.loads(line)
                done[entry['name']] = entry['result']
        tail = (work.root / f'{tag}-rank{rank}.log').read_text()[-1500:]
        for combo in combos:
            key = f'{combo.name}@rank{rank}'
            if combo.name in done:
                results[key] = done[combo.name]
            else:
                why = (f'timed out after {timeout:.0f} s' if timed_out else
                       f'rank exited with {procs[rank].returncode}')
                results[key] = f'error: {why}: ' + ' '.join(tail.split())[
                    -600:]
    return results


# Running everything #########################################################

def run_all(patterns: Optional[List[str]], work: Workdir,
            per_combo: float = COMBO_TIMEOUT) -> Dict[str, Any]:
    combos = [c for c in combinations() if not patterns or any(
        fnmatch.fnmatchcase(c.name, p) for p in patterns)]
    results: Dict[str, Any] = {}
    groups: Dict[str, List[Combo]] = {}  # one launch of the ranks a mode
    start = time.monotonic()
    for combo in combos:
        try:
            refused = refusal(combo, work)
        except Exception as error:  # noqa: BLE001 (recorded)
            refused = _outcome(error)
            if refused.startswith('error'):
                log(f'{combo.name}: preparing: {refused}')
        if refused is not None:
            names = [combo.name] if combo.ranks == 1 else [
                f'{combo.name}@rank{r}' for r in range(combo.ranks)]
            for name in names:
                results[name] = refused
            log(f'{combo.name}: {refused[:120]}')
            continue
        if combo.ranks == 1:
            t0 = time.monotonic()
            results[combo.name] = result = run_combo(combo, work)
            log(f'{combo.name}: {_summary(result)} '
                f'({time.monotonic() - t0:.1f} s)')
        else:
            groups.setdefault(combo.mode, []).append(combo)
    for key, group in groups.items():
        t0 = time.monotonic()
        ready = []
        for combo in group:  # partitions are made once, here, not by ranks
            try:
                module_kwargs(combo, work)
                ready.append(combo)
            except Exception as error:  # noqa: BLE001 (recorded)
                for r in range(combo.ranks):
                    results[f'{combo.name}@rank{r}'] = _outcome(error)
                log(f'{combo.name}: {_outcome(error)[:200]}')
        group = ready
        if not group:
            continue
        log(f'{key}: {len(group)} combination(s) on 2 ranks')
        group_results = run_group(group, work, per_combo=per_combo)
        results.update(group_results)
        for name, result in group_results.items():
            log(f'{name}: {_summary(result)}')
        log(f'{key}: {time.monotonic() - t0:.1f} s')
    log(f'{len(results)} entries in {time.monotonic() - start:.1f} s')
    return {name: _without_workdir(result, work.root)
            for name, result in sorted(results.items())}


def _without_workdir(result: Any, root: Path) -> Any:
    r"""A message with the temporary directory's path as ``<workdir>`` (so
    two runs' messages compare equal)."""
    if isinstance(result, str):
        return result.replace(str(root), '<workdir>')
    return result


def _summary(result: Any) -> str:
    if isinstance(result, str):
        return result[:160]
    return (f"train {len(result['train'])} "
            f"[{' '.join(h[:8] for h in result['train'])}] val "
            f"{len(result['val'])} [{' '.join(h[:8] for h in result['val'])}]")


# Comparing ##################################################################

def compare(before: Dict[str, Any], after: Dict[str, Any]) -> int:
    r"""Prints one line per combination and a count; 1 if any hash
    differs or a combination with hashes before has none after."""
    rows = []
    counts: Dict[str, int] = {}
    for name in sorted(set(before) | set(after)):
        a, b = before.get(name), after.get(name)
        detail = ''
        if a is None:
            status = 'new'
            detail = b if isinstance(b, str) else 'hashed'
        elif b is None:
            status = 'missing'
        elif isinstance(a, dict) and isinstance(b, dict):
            bad = [f'{split}[{i}]' for split in ('train', 'val')
                   for i in range(max(len(a[split]), len(b[split])))
                   if a[split][i:i + 1] != b[split][i:i + 1]]
            status = 'different' if bad else 'identical'
            if bad:
                detail = 'batches ' + ', '.join(bad) + _field_diff(a, b)
        elif isinstance(a, dict):  # hashed before, refused/failing now
            status = 'different'
            detail = f'now {b}'
        elif isinstance(b, dict):
            status = 'newly supported'
            detail = f'was {a[:100]}'
        else:
            status = 'refused' if a == b else 'refused (message changed)'
            if a.startswith('error') or b.startswith('error'):
                status = 'error' if a == b else 'error (changed)'
            detail = b if a == b else f'{a} -> {b}'
        counts[status] = counts.get(status, 0) + 1
        rows.append((name, status, detail))
    width = max((len(r[0]) for r in rows), default=10)
    for name, status, detail in rows:
        print(f'{name:<{width}}  {status:<16} {detail[:200]}')
    print(', '.join(f'{n} {s}' for s, n in sorted(counts.items())))
    failed = counts.get('different', 0)
    return 1 if failed else 0


def _field_diff(a: Dict, b: Dict) -> str:
    r"""Which fields of the first differing batch differ (if recorded)."""
    for split in ('train', 'val'):
        fa = a.get('fields', {}).get(split, [])
        fb = b.get('fields', {}).get(split, [])
        for i, (x, y) in enumerate(zip(fa, fb)):
            keys = sorted(k for k in set(x) | set(y) if x.get(k) != y.get(k))
            if keys:
                parts = [f'{k} {x.get(k, "-")} vs {y.get(k, "-")}'
                         for k in keys[:4]]
                return f'; first at {split}[{i}]: ' + '; '.join(parts)
    return ''


def _hashes_file(parser: argparse.ArgumentParser,
                 path: str) -> Dict[str, Any]:
    r"""The hashes a ``--compare`` file holds, or the parser's one-line
    error naming the file and what is wrong with it."""
    try:
        hashes = json.loads(Path(path).read_text())
    except OSError as error:
        parser.error(f"--compare: cannot read '{path}': {error.strerror}")
    except ValueError as error:
        parser.error(f"--compare: '{path}' is not JSON ({error})")
    if not isinstance(hashes, dict):
        parser.error(f"--compare: '{path}' holds a {type(hashes).__name__}, "
                     f"not the object of hashes by combination that this "
                     f"script writes (--out)")
    return hashes


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        description='Hash the first training/validation batches of every '
        'loading combination, or compare two such files.')
    parser.add_argument('--out', help='write the JSON here (else stdout)')
    parser.add_argument('--only', nargs='+', metavar='GLOB',
                        help='only the combinations whose name matches')
    parser.add_argument('--list', action='store_true',
                        help='print the combination names and exit')
    parser.add_argument('--compare', nargs=2, metavar=('BEFORE', 'AFTER'))
    parser.add_argument('--workdir', help='keep the generated data here '
                        '(default: a temporary directory, removed)')
    parser.add_argument('--timeout', type=float, default=COMBO_TIMEOUT,
                        help='seconds per two-rank combination (default '
                        '%(default)s; a group of N gets N + 1 times this)')
    parser.add_argument('--rank-worker', help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.rank_worker:
        return rank_worker(args.rank_worker)
    if args.compare:
        return compare(*(_hashes_file(parser, path)
                         for path in args.compare))
    if args.list:
        for combo in combinations():
            print(combo.name)
        return 0
    # every argument checked before the first combination is hashed
    if args.only and not any(fnmatch.fnmatchcase(c.name, p)
                             for c in combinations() for p in args.only):
        parser.error(f"--only {' '.join(args.only)}: matches no "
                     f"combination (--list prints their names)")
    if args.out and not Path(args.out).parent.is_dir():
        parser.error(f"--out '{args.out}': the directory "
                     f"'{Path(args.out).parent}' does not exist; make it "
                     f"first")
    if args.out and Path(args.out).is_dir():
        parser.error(f"--out '{args.out}' is a directory; name the JSON "
                     f"file to write")
    import pyg_fastload
    log(f'pyg_fastload from {Path(pyg_fastload.__file__).parent}')
    root = Path(args.workdir or tempfile.mkdtemp(prefix='batch_hashes-'))
    root.mkdir(parents=True, exist_ok=True)
    try:
        results = run_all(args.only, Workdir(root.resolve()), args.timeout)
    finally:
        if not args.workdir:
            shutil.rmtree(root, ignore_errors=True)
    text = json.dumps(results, indent=1, sort_keys=True) + '\n'
    if args.out:
        Path(args.out).write_text(text)
        log(f'wrote {args.out}')
    else:
        sys.stdout.write(text)
    return 0


if __name__ == '__main__':
    sys.exit(main())
