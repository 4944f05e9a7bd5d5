r"""Ranks working together over a partition: the rank context, every
collective (bounded by timeouts and counted), the remote feature tier (one
partitioned cache), DSP's collective sampling and launch order, HopGNN's root
routing, start-up checks and the per-rank seed schedules that keep step
counts equal."""
from .collectives import Collectives
from .context import DEFAULT_TIMEOUT, DistContext, DistributedError
from .counters import KINDS, TrafficCounters, counting_allreduce_hook
from .dsp import DSPRank, open_dsp_rank
from .hopgnn import RootRouter
from .launch_order import LaunchCoordinator
from .rank_part import open_rank_part
from .remote import PartitionedFeatureStore
from .collective_sampling import CollectiveSampler
from .seeds import RankSeedSampler

__all__ = [
    'DistContext',
    'DistributedError',
    'DEFAULT_TIMEOUT',
    'Collectives',
    'TrafficCounters',
    'KINDS',
    'counting_allreduce_hook',
    'PartitionedFeatureStore',
    'CollectiveSampler',
    'LaunchCoordinator',
    'RootRouter',
    'DSPRank',
    'open_dsp_rank',
    'open_rank_part',
    'RankSeedSampler',
]
