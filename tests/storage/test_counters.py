from pyg_fastload.storage import TierCounters


def test_counters_add_up_and_reset():
    counters = TierCounters()
    assert counters.hit_ratio == 0.0  # no request yet
    counters.add(requests=10, hits=4, row_bytes=8, pages=2)
    counters.add(requests=6, hits=6, row_bytes=8)
    counters.disk_bytes += 4096
    assert counters.as_dict() == {'requests': 16, 'hits': 10, 'bytes': 80,
                                  'pages': 2, 'disk_bytes': 4096,
                                  'hit_ratio': 10 / 16}
    counters.reset()
    assert counters.as_dict()['requests'] == 0
    assert counters.bytes == 0 and counters.disk_bytes == 0
