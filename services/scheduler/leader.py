"""The scheduler's life: campaign, tick while the term is trusted, step down, campaign again.

A tick that overruns the period is not followed by catch-up ticks (the next starts at once, then the
rhythm resumes), and an error in a tick (store or broker down) is logged and retried on the next one with
growing backoff instead of ending the process.
"""

from __future__ import annotations

import logging
import threading
import time

from services.scheduler.dispatcher import Dispatcher
from shared import metrics
from shared.bus.base import Bus
from shared.election.base import Elector, Term

log = logging.getLogger("jobsched.scheduler")
MAX_ERROR_BACKOFF_S = 10.0


class Scheduler:
    def __init__(
        self, elector: Elector, dispatcher: Dispatcher, bus: Bus, job_types: list[str], *, tick_s: float
    ) -> None:
        self._elector = elector
        self._dispatcher = dispatcher
        self._bus = bus
        self._job_types = job_types
        self._tick_s = tick_s
        self.stop = threading.Event()
        self._term: Term | None = None

    def request_stop(self) -> None:
        """From a signal handler: stop ticking now; `run` then resigns so a standby takes over at once."""
        self.stop.set()
        if self._term is not None:
            self._term.lost.set()

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                try:
                    term = self._elector.campaign(self.stop)
                except Exception as exc:  # an election backend bug must not end the process: try again
                    log.exception("campaign failed", extra={"action": "campaign_error", "error": repr(exc)})
                    self.stop.wait(1.0)
                    continue
                if term is None:
                    break
                self._term = term
                metrics.SCHEDULER_IS_LEADER.set(1)
                metrics.SCHEDULER_LEADER_TRANSITIONS.labels("gained").inc()
                try:
                    self._lead(term)
                finally:
                    self._term = None
                    metrics.SCHEDULER_IS_LEADER.set(0)
                    metrics.SCHEDULER_LEADER_TRANSITIONS.labels("lost").inc()
                    self._elector.resign()
        finally:
            self._elector.close()

    def _lead(self, term: Term) -> None:
        topics_ready = False
        failures = 0
        next_tick = time.monotonic()
        while not self.stop.is_set() and term.trusted():
            started = time.monotonic()
            try:
                if not topics_ready:
                    self._bus.ensure_topics(self._job_types)
                    topics_ready = True
                with metrics.SCHEDULER_TICK_SECONDS.time():
                    result = self._dispatcher.tick(term)
                failures = 0
                if result.claimed or result.spawned:
                    log.debug("tick", extra={"action": "tick", **vars(result)})
            except Exception as exc:  # a tick must never end the process (store or broker down)
                failures += 1
                metrics.SCHEDULER_TICK_ERRORS.inc()
                log.warning("tick failed", extra={"action": "tick_failed", "error": repr(exc)})
            delay = self._tick_s if not failures else min(self._tick_s * 2**failures, MAX_ERROR_BACKOFF_S)
            next_tick = max(next_tick + delay, started + (delay if failures else 0))
            term.lost.wait(max(0.0, next_tick - time.monotonic()))
