r"""Ranks working together over a partition: the rank context, every
collective (bounded by timeouts and counted), the remote feature tier and
the per-rank seed schedule that keeps step counts equal."""
from .collectives import Collectives
from .context import DEFAULT_TIMEOUT, DistContext, DistributedError
from .counters import KINDS, TrafficCounters, counting_allreduce_hook
from .remote import PartitionedFeatureStore

__all__ = [
    'DistContext',
    'DistributedError',
    'DEFAULT_TIMEOUT',
    'Collectives',
    'TrafficCounters',
    'KINDS',
    'counting_allreduce_hook',
    'PartitionedFeatureStore',
]
