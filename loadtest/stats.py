"""Percentiles for the load tools (nearest-rank, so every reported value is one that was measured)."""

from __future__ import annotations

import math
from collections.abc import Sequence


def percentile(sorted_values: Sequence[float], p: float) -> float:
    if not sorted_values:
        return math.nan
    rank = max(1, math.ceil(p / 100 * len(sorted_values)))
    return sorted_values[rank - 1]


def summary(values: Sequence[float]) -> dict[str, float]:
    """p50/p95/p99/max of `values`, rounded to 0.1."""
    ordered = sorted(values)
    figures = {f"p{p}": percentile(ordered, p) for p in (50, 95, 99)}
    figures["max"] = ordered[-1] if ordered else math.nan
    return {k: round(v, 1) for k, v in figures.items()}
