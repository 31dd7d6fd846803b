from __future__ import annotations

import math

from loadtest.stats import percentile, summary


def test_nearest_rank_percentiles() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == 50
    assert percentile(values, 99) == 99
    assert percentile(values, 100) == 100
    assert percentile([7.0], 95) == 7
    assert math.isnan(percentile([], 50))


def test_summary_has_the_stable_keys() -> None:
    assert summary([3.0, 1.0, 2.0]) == {"p50": 2.0, "p95": 3.0, "p99": 3.0, "max": 3.0}
