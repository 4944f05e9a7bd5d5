r"""What the node and link loaders share (:class:`PipelinedLoader`): the
epoch's random draws made in the consumer's thread, then sampling and
feature loading either in the consumer's thread or in the two-stage
pipeline (:mod:`~pyg_fastload.loader.pipeline`), batches identical either
way; ``pipeline='auto'``, the run-ahead scheduler, the device transfer, the
stage threads' shutdown when the loader goes away, and the loader's place in
its epochs saved and restored (:mod:`~pyg_fastload.loader.position`)."""
from __future__ import annotations

import functools
import threading
import warnings
import weakref
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple, Union

import torch
from torch import Tensor
from torch_geometric.data import HeteroData
from torch_geometric.loader.utils import filter_custom_hetero_store
from torch_geometric.sampler import HeteroSamplerOutput, SamplerOutput

from ..config import ADAPTIVE_RUN_AHEAD, PipelineSettings, SettingError
from ..graph.kind import is_data, is_sampler_output, stores_of
from ..placement import Placement
from ..storage import FeatureSource
from .auto_pipeline import (
    AUTO_MIN_BATCHES,
    PIPELINE_MIN_LOAD_SHARE,
    AutoIterator,
    Gate,
    load_share,
)
from .feature_join import FeatureJoin, RowFetch, pooled_attrs
from .pipeline import (
    DeviceTransfer,
    PipelineIterator,
    SequentialIterator,
    new_breakdown,
)
from .position import EpochPosition
from .scheduler import RunAheadScheduler
from .trainer_load import TrainerLoad

__all__ = ['PipelinedLoader', 'PIPELINE_MIN_LOAD_SHARE', 'AUTO_MIN_BATCHES']

#: One batch's sampling: (indices into the loader's inputs, generator).
SampleFn = Callable[[Union[Tensor, List[int]], torch.Generator],
                    SamplerOutput]


def _weak_join(loader: Any) -> Callable[[Any], Any]:
    r"""The loader's join for its loading thread, without keeping the
    loader alive."""
    method = weakref.WeakMethod(loader.filter_fn)

    def join(out: SamplerOutput) -> Any:
        filter_fn = method()
        if filter_fn is None:
            raise RuntimeError('the loader was deleted')
        return filter_fn(out)
    return join


class PipelinedLoader:
    r"""Mixin of a PyG ``NodeLoader`` / ``LinkLoader`` subclass (listed
    first): with ``num_workers=0`` it iterates through the pipeline or in
    the consumer's thread; the subclass gives :meth:`batch_sampling` and a
    ``filter_fn`` (the join)."""

    #: How a sampling pool (``sampling_workers > 1``) orders ready tasks:
    #: ``'priority'`` (ByteGNN: the oldest batch's first, the cheapest
    #: first) or ``'fifo'``.
    task_order = 'priority'
    #: Whether a sampling pool runs every hop of a batch as a task with
    #: its feature fetch chained after it (``False``: a batch's hops in
    #: one thread, features fetched after the batch).
    hop_tasks = True
    #: Whether those hop tasks fetch each hop's new feature rows as soon
    #: as the hop is sampled (ByteGNN; ``False``: the loading stage
    #: gathers the batch's rows once it is sampled).
    hop_fetch = True

    def setup_pipeline(self, settings: PipelineSettings,
                       placement: Placement) -> None:
        r"""Keeps the loader's :obj:`settings` (what :attr:`settings` then
        reports) and its resolved :obj:`placement`, refusing a sampling
        pool for a sampler that cannot run one (call after the PyG
        loader's ``__init__``).

        Args:
            settings (PipelineSettings): the loader's pipeline settings,
                as given (``sampling_device`` included).
            placement (Placement): where the loader samples and returns
                its batches, resolved from them.
        """
        #: The pipeline settings the loader was given.
        self.settings = settings
        workers = settings.sampling_workers
        sampler = getattr(self, 'node_sampler', None) or getattr(
            self, 'link_sampler', None)
        if workers > 1 and not getattr(sampler, 'concurrent_batches', True):
            raise SettingError(
                'sampling_workers', f"{workers}: "
                f"{type(sampler).__name__} samples with collectives, which "
                f"every rank must issue in one order from one thread; "
                f"use sampling_workers=1")
        #: Where the loader samples and returns its batches.
        self.placement = placement
        self._transfer = DeviceTransfer(placement.batches)
        self._scheduler: Optional[RunAheadScheduler] = None
        #: The trainer's cores, measured across epochs (trainer_first).
        self._trainer_load: Optional[TrainerLoad] = None
        self.time_breakdown = new_breakdown()
        self._auto_decision: Optional[bool] = None
        # The consumer's batch, the queued ones and the one being loaded.
        self._join = FeatureJoin(placement,
                                 max_buffers=settings.queue_capacity + 3)
        # The stop flags of this loader's running pipelines (set when the
        # loader is deleted; the loader holds no iterator).
        self._stops: List[threading.Event] = []
        self._position = EpochPosition(self.generator is not None)

    def batch_sampling(self) -> SampleFn:
        r"""One batch's sampling, holding no reference to the loader (the
        stage threads run it)."""
        raise NotImplementedError

    @property
    def device(self) -> Optional[torch.device]:
        r"""Where batches are returned (:obj:`None`: left on the host)."""
        return self.placement.batches

    @property
    def pipeline(self) -> Union[bool, str]:
        return self.settings.pipeline

    @property
    def queue_capacity(self) -> int:
        return self.settings.queue_capacity

    @property
    def run_ahead(self) -> Union[str, int]:
        return self.settings.run_ahead

    @property
    def _feature_source(self) -> Optional[FeatureSource]:
        stores = stores_of(self.data)
        if stores is not None and isinstance(stores[0], FeatureSource):
            return stores[0]
        return None

    def join_hetero(self, out: HeteroSamplerOutput) -> HeteroData:
        r"""A heterogeneous batch in PyG's layout: every type's feature
        matrices (a ``HeteroData``'s gathered into pooled buffers, stores'
        by PyG's join), ``n_id``, ``e_id``, ``batch`` and the per-hop
        counts (the loader adds its seeds')."""
        if is_data(self.data, hetero=True):
            data = self._join.from_hetero_data(self.data, out,
                                               self.time_breakdown)
        else:
            store = self._feature_source
            if store is not None and store.lookahead_depth:
                store.retire(out.node)  # its look-ahead saw these rows
            data = filter_custom_hetero_store(
                *self.data, out.node, out.row, out.col, out.edge,
                self.custom_cls)
        for key, node in out.node.items():
            data[key].n_id = node
        for key, edge in out.edge.items():
            if edge is not None:  # (bidirectional: no edge ids)
                data[key].e_id = edge
        data.set_value_dict('batch', out.batch)
        data.set_value_dict('num_sampled_nodes', out.num_sampled_nodes)
        data.set_value_dict('num_sampled_edges', out.num_sampled_edges)
        return data

    def _get_iterator(self) -> Iterator:
        if self.num_workers > 0:  # PyG's path: sampling in worker processes
            return super()._get_iterator()
        # Everything random is drawn here, in the consumer's thread and in
        # order, so pipelined and sequential iteration give the same batches.
        self._position.begin(self._stream)
        batches, epoch_seed = self._draw_epoch()
        # This epoch's breakdown, also for the parts 'auto' starts later
        # (another epoch of the loader may have started by then).
        pipelined = self._use_pipeline()
        breakdown = self.time_breakdown = new_breakdown()
        # (a resumed epoch: the batches taken before the checkpoint)
        skip = self._position.drawn(len(batches), breakdown)
        sample = self.batch_sampling()

        def tasks() -> Iterator[Callable[[], SamplerOutput]]:
            for i in range(skip, len(batches)):
                generator = torch.Generator().manual_seed(
                    (epoch_seed + i * 0x9E3779B97F4A7C15) % 2**63)
                yield functools.partial(sample, batches[i], generator)

        # One source of the epoch's batches, which `pipeline='auto'` hands
        # between the consumer's thread and the pipeline mid-epoch.
        pending = Gate(tasks())

        def sampled() -> Iterator[SamplerOutput]:
            for task in pending:
                yield task()

        store = self._feature_source
        depth = store.lookahead_depth if store is not None else 0

        def on_sampled(out: SamplerOutput) -> None:
            if depth and is_sampler_output(out):
                store.announce(out.node)

        def start_pipeline() -> PipelineIterator:
            sample_capacity = max(self.queue_capacity, depth)
            workers = self.settings.sampling_workers
            pipeline = PipelineIterator(
                sampled() if workers == 1 else pending, on_sampled,
                _weak_join(self), self.queue_capacity,
                sample_capacity, breakdown,
                self._new_scheduler(sample_capacity + self.queue_capacity),
                self._transfer, workers, self._new_trainer_load(),
                self.task_order, self.hop_tasks,
                self._row_fetch() if workers > 1 else None)
            # The iterator keeps the loader alive (`next(iter(Loader(...)))`
            # must work); the threads do not, so dropping the iterator, or
            # the loader with its iterators, stops them.
            pipeline.owner = self
            self._stops = [e for e in self._stops if not e.is_set()]
            self._stops.append(pipeline.shared.stop)
            return pipeline

        def start_sequential() -> SequentialIterator:
            return SequentialIterator(
                sampled(), on_sampled, self.filter_fn, depth, breakdown,
                self._transfer)

        iterator: Any
        if pipelined is None:  # 'auto', undecided: judged in the epoch
            iterator = AutoIterator(pending, start_sequential, start_pipeline,
                                    self._decide)
        elif pipelined:
            iterator = start_pipeline()
        else:
            iterator = start_sequential()
        if store is not None:  # e.g. device_budget='auto' sizes then
            iterator.after_first_step = store.first_step_done
        return iterator

    @property
    def _stream(self) -> torch.Generator:
        r"""The generator the epochs are drawn from (torch's global one
        without :obj:`generator`)."""
        return self.generator if self.generator is not None else \
            torch.default_generator

    def _draw_epoch(self) -> Tuple[List[Any], int]:
        r"""An epoch's random draws, in order: every batch's indices into
        the inputs (the index sampler's order) and the seed of the batches'
        random streams."""
        batches = list(self.batch_sampler)
        epoch_seed = int(torch.randint(0, 2**62, (1, ),
                                       generator=self.generator))
        return batches, epoch_seed

    @property
    def _graph_sampler(self) -> Any:
        r"""The sampler drawing every batch (node or link loader's)."""
        return getattr(self, 'node_sampler', None) or getattr(
            self, 'link_sampler', None)

    def state_dict(self) -> Dict[str, Any]:
        r"""Where the loader stands in its epochs, for Lightning's
        stateful-loader protocol (a checkpoint, e.g. ``ModelCheckpoint(
        every_n_train_steps=N)``, keeps it): the random stream's state,
        the epochs and batches taken since
        (:class:`~pyg_fastload.loader.position.EpochPosition`), and the
        sampler's own state if it keeps one across batches (a
        ``state_dict`` method: HopGNN's merge search). Without a
        ``generator`` the stream is torch's global one, which other code
        draws from between epochs: its state before the current epoch is
        saved, and :meth:`load_state_dict` sets it. With
        ``num_workers > 0`` nothing is saved (the worker processes draw
        from streams of their own): such a loader resumes with a new
        epoch."""
        if self.num_workers > 0:  # (once per place it is called from)
            warnings.warn(f"{type(self).__name__} with num_workers="
                          f"{self.num_workers} does not save its place in "
                          f"the epoch (PyG's worker processes draw from "
                          f"streams of their own): a run resumed from a "
                          f"checkpoint starts a new epoch; use "
                          f"num_workers=0 to resume mid-epoch",
                          stacklevel=2)
            return {}
        state = self._position.state(self._stream)
        saver = getattr(self._graph_sampler, 'state_dict', None)
        if saver is not None:
            state['sampler'] = saver()
        return state

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        r"""Continues from :obj:`state` (:meth:`state_dict`'s): the next
        epoch drawn is the one the state was saved in, without the batches
        the consumer had taken (those sampled ahead are sampled again)."""
        if not state:
            return
        stream = self._stream
        stream.set_state(state['generator'])
        for _ in range(state['epochs']):  # draws only: nothing is sampled
            self._draw_epoch()
        self._position.restore(state)
        if 'sampler' in state:
            self._graph_sampler.load_state_dict(state['sampler'],
                                                state['sampled'])

    def _row_fetch(self) -> Optional[RowFetch]:
        r"""What fetches a hop's new rows on the sampling pool (ByteGNN's
        per-hop feature fetching): for a ``Data`` or ``HeteroData``
        sampled on the CPU; ``None`` otherwise (the join gathers)."""
        sampler = self._graph_sampler
        if not (self.hop_tasks and self.hop_fetch) or getattr(
                sampler, 'device', torch.device('cpu')).type != 'cpu':
            return None
        if is_data(self.data, hetero=False):
            return RowFetch(self.data, arena=not self.placement.pinned) \
                if pooled_attrs(self.data) else None
        topology = getattr(sampler, 'topology', None)
        if is_data(self.data, hetero=True) and \
                hasattr(topology, 'node_offset'):
            return RowFetch(self.data, topology.node_offset,
                            topology.node_types)
        return None

    def _decide(self, pipelined: bool) -> None:
        self._auto_decision = pipelined

    def _new_scheduler(self, bound: int) -> RunAheadScheduler:
        r"""This epoch's run-ahead scheduler; an adaptive one starts from the
        sampling and model times measured in the previous epoch."""
        if self.run_ahead not in ADAPTIVE_RUN_AHEAD:
            return RunAheadScheduler(self.run_ahead, self.run_ahead)
        last = self._scheduler
        self._scheduler = RunAheadScheduler(
            1, bound, avg_sample=last and last.avg_sample,
            avg_train=last and last.avg_train)
        return self._scheduler

    def _new_trainer_load(self) -> Optional[TrainerLoad]:
        r"""What measures the trainer's cores for this epoch
        (``run_ahead='trainer_first'`` only; the measurement carries over
        between epochs)."""
        if self.run_ahead != 'trainer_first':
            return None
        if self._trainer_load is None:
            self._trainer_load = TrainerLoad()
        return self._trainer_load

    def _use_pipeline(self) -> Optional[bool]:
        r"""Whether this epoch runs in the pipeline; ``None``: ``'auto'``
        has not decided yet (the epoch starts in the consumer's thread and
        decides on its first batches, :class:`AutoIterator`)."""
        if self.pipeline != 'auto':
            return bool(self.pipeline)
        if self._auto_decision is None:
            last = self.time_breakdown
            # An epoch too short to decide within, or the batches a consumer
            # took before it stopped (e.g. Lightning's limit_train_batches).
            if last['batches'] >= min(len(self), AUTO_MIN_BATCHES):
                self._auto_decision = (load_share(last) >=
                                       PIPELINE_MIN_LOAD_SHARE)
        return self._auto_decision

    def __getstate__(self) -> dict:
        r"""What worker processes get (``num_workers > 0``, e.g. with
        ``multiprocessing_context='spawn'``): not the generator, whose state
        cannot travel through shared memory and which the workers never use
        (shuffling happens here; workers are seeded from it), nor the stop
        flags of this process's pipelines."""
        state = self.__dict__.copy()
        state['generator'] = None
        state['_stops'] = []
        state['_trainer_load'] = None
        return state

    def __del__(self) -> None:
        for stop in getattr(self, '_stops', ()):
            stop.set()
