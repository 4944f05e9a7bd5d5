r"""What the caches hold: hotness policies (out-degree, reverse PageRank,
expected accesses, pre-sampling, random), the planner filling a store's tiers from a
:class:`~pyg_fastload.config.FeatureCache`, and opening a dataset behind
its caches."""
from .hotness import (
    access_counts,
    expected_access_scores,
    hit_ratio,
    hit_ratio_curve,
    hot_order,
    Scores,
    hotness_scores,
    loader_scores,
    out_degree_scores,
    presample_scores,
    random_scores,
    reverse_pagerank_scores,
)
from .open import open_dataset, stores_from_data
from .planner import configure_caches

__all__ = [
    'configure_caches',
    'open_dataset',
    'stores_from_data',
    'hotness_scores',
    'loader_scores',
    'Scores',
    'hot_order',
    'hit_ratio',
    'hit_ratio_curve',
    'access_counts',
    'out_degree_scores',
    'reverse_pagerank_scores',
    'expected_access_scores',
    'presample_scores',
    'random_scores',
]
