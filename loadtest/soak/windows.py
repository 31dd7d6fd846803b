"""The soak's figures over time: one window per WINDOW seconds of wall-clock time from the start, each event in
the window in which it happened: a create by its planned send time, a start's lateness by the attempt's start,
a final status when the store first showed it, server log lines and process memory when the window was
reported (a few seconds after its end)."""

from __future__ import annotations

import math
from array import array
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from loadtest.stats import summary

# Drift: a p99 that grows over the soak. Below the slack a doubling is the noise of a machine shared with other
# work (a 10 ms p99 that becomes 25 ms), not a trend.
DRIFT_FACTOR = 2.0
DRIFT_SLACK_MS = 50.0
DRIFT_RULE = (
    f"the last full window's p99 <= max({DRIFT_FACTOR:g} x the first full window's,"
    f" the first's + {DRIFT_SLACK_MS:g} ms)"
)


def no_drift(first_p99: float, last_p99: float) -> bool:
    return last_p99 <= max(first_p99 * DRIFT_FACTOR, first_p99 + DRIFT_SLACK_MS)


def quantiles(values: array[float]) -> dict[str, float] | None:
    """p50/p95/p99/max, or None for no values (a percentile of nothing is not a figure)."""
    return summary(values) if values else None


@dataclass
class Window:
    index: int
    start: datetime
    length_s: float
    sent: int = 0
    created: int = 0
    create_ms: array[float] = field(default_factory=lambda: array("d"))
    lateness_ms: array[float] = field(default_factory=lambda: array("d"))
    # runs of the template, plannedAt → start, apart: the scheduler spawns them when due, then claims them
    run_lateness_ms: array[float] = field(default_factory=lambda: array("d"))
    finals: Counter[str] = field(default_factory=Counter)  # completed / dlq / cancelled, as the store showed them
    api_errors: Counter[str] = field(default_factory=Counter)  # "POST 503", "DELETE ReadTimeout"...
    server: Counter[str] = field(default_factory=Counter)  # server_logs categories, store_read_errors
    rss_mb: dict[str, float] = field(default_factory=dict)  # the product's processes' resident memory
    loadavg_1m: float | None = None  # the machine's, shared with other work
    longest_op_s: float | None = None  # the store's longest operation on the soak's database running then

    @property
    def end(self) -> datetime:
        return self.start + timedelta(seconds=self.length_s)

    def figures(self, until: datetime | None = None) -> dict[str, Any]:
        """Its figures; `until` cuts a window that the run ended inside."""
        seconds = self.length_s if until is None else min(self.length_s, (until - self.start).total_seconds())
        return {
            "window": self.index,
            "start": self.start.isoformat(timespec="seconds"),
            "seconds": round(seconds, 1),
            "sent": self.sent,
            "created": self.created,
            "created_per_s": round(self.created / seconds, 1) if seconds > 0 else 0.0,
            "create_ms": quantiles(self.create_ms),
            "lateness_ms": quantiles(self.lateness_ms),
            "run_lateness_ms": quantiles(self.run_lateness_ms),
            "completed": self.finals["completed"],
            "dlq": self.finals["dlq"],
            "cancelled": self.finals["cancelled"],
            "api_errors": dict(self.api_errors),
            "server": dict(self.server),
            "rss_mb": self.rss_mb,
            "loadavg_1m": self.loadavg_1m,
            "longest_op_s": self.longest_op_s,
        }


class Windows:
    def __init__(self, start: datetime, length_s: float) -> None:
        self.start = start
        self.length_s = length_s
        self._by_index: dict[int, Window] = {}

    def at(self, moment: datetime) -> Window:
        return self.number(max(0, math.floor((moment - self.start).total_seconds() / self.length_s)))

    def number(self, index: int) -> Window:
        """Window `index` (made if nothing happened in it yet)."""
        window = self._by_index.get(index)
        if window is None:
            start = self.start + timedelta(seconds=index * self.length_s)
            window = self._by_index[index] = Window(index, start, self.length_s)
        return window

    def combined(self) -> Window:
        """All the windows as one (its length: from the first start to the last end)."""
        every = [self._by_index[i] for i in sorted(self._by_index)]
        total = Window(-1, self.start, (every[-1].end - self.start).total_seconds() if every else 0.0)
        for window in every:
            total.sent += window.sent
            total.created += window.created
            for mine, theirs in (
                (total.create_ms, window.create_ms),
                (total.lateness_ms, window.lateness_ms),
                (total.run_lateness_ms, window.run_lateness_ms),
            ):
                mine.extend(theirs)
            for counts, more in ((total.finals, window.finals), (total.api_errors, window.api_errors)):
                counts.update(more)
            total.server.update(window.server)
        return total


HEADER = (
    f"{'window':>6} {'start':>8} {'created/s':>9} {'create p50/p99 ms':>17} {'lateness p50/p99 ms':>19} "
    f"{'completed':>9} {'dlq':>5} {'cancel':>6} {'api err':>7} {'crash':>5} {'corrupt':>7} {'fdb err':>7} "
    f"{'RSS MB':>6} {'op s':>5}"
)


def _pair(figures: dict[str, float] | None) -> str:
    return f"{figures['p50']:.0f}/{figures['p99']:.0f}" if figures else "-"


def row(figures: dict[str, Any]) -> str:
    server = figures["server"]
    return (
        f"{figures['window']:>6} {figures['start'][11:19]:>8} {figures['created_per_s']:>9.1f} "
        f"{_pair(figures['create_ms']):>17} {_pair(figures['lateness_ms']):>19} {figures['completed']:>9} "
        f"{figures['dlq']:>5} {figures['cancelled']:>6} {sum(figures['api_errors'].values()):>7} "
        f"{server.get('crashes', 0):>5} {server.get('corruption', 0):>7} {server.get('ferretdb_errors', 0):>7} "
        f"{sum(figures['rss_mb'].values()):>6.0f} {figures['longest_op_s'] or 0:>5.0f}"
    )
