"""The scheduler's life: campaign, tick while the term is trusted, step down, campaign again.

A tick that overruns the period is not followed by catch-up ticks (the next starts at once, then the
rhythm resumes), and an error in a tick (store or broker down) is logged and retried on the next one with
growing backoff instead of ending the process. A nudge (a job due now was stored) starts the next tick at once,
at most one per NUDGE_MIN_GAP_S; nudges that arrive during a tick are served together by the one after it.
"""

from __future__ import annotations

import logging
import threading
import time

from services.scheduler.dispatcher import Dispatcher
from shared import metrics
from shared.bus.base import Bus
from shared.election.base import Elector, Term
from shared.job_types.served import REFRESH_S

log = logging.getLogger("jobsched.scheduler")
MAX_ERROR_BACKOFF_S = 10.0
# Under a stream of due-now creates every tick is a nudged one; this gap bounds the claim transactions they
# cost while keeping a job's wait for its claim well under the period.
NUDGE_MIN_GAP_S = 0.005
# After a tick whose claims some type's room held back (its wake-ups not yet taken, a limit): claims again this
# often until the next tick, since that room comes back as executors start and finish runs, which nothing
# announces. Claims only: templates and warnings wait for the tick.
HELD_RETRY_S = 0.005
# Where the executors announce it (`room_freed`: an embedded node's, in the scheduler's process), the wait ends at
# their announcement instead, and looks this often only for what nothing announces (a cancel through the API, a
# job the reaper put back). Polls every 5 ms were a tenth of the embedded drain's CPU (766 reads for 343 claims).
HELD_ANNOUNCED_RETRY_S = 0.05


class Scheduler:
    def __init__(
        self,
        elector: Elector,
        dispatcher: Dispatcher,
        bus: Bus,
        job_types: list[str],
        *,
        tick_s: float,
        room_announced: bool = False,
    ) -> None:
        """`room_announced`: the executors of every type this scheduler claims call `room_freed` when they have
        started runs, or ended runs of a type with a concurrency limit (an embedded node's, in this process)."""
        self._elector = elector
        self._dispatcher = dispatcher
        self._bus = bus
        self._job_types = job_types
        self._tick_s = tick_s
        self.stop = threading.Event()
        self._term: Term | None = None
        self._wake = threading.Event()  # a nudge or a stop: end the wait for the next tick
        self._room = threading.Event()  # room_freed, a nudge or a stop: end the wait of a held type's claim
        self._room_announced = room_announced

    def request_stop(self) -> None:
        """From a signal handler: stop ticking now; `run` then resigns so a standby takes over at once."""
        self.stop.set()
        self._wake.set()
        self._room.set()
        if self._term is not None:
            self._term.lost.set()

    def _wake_on_loss(self, term: Term) -> None:
        term.lost.wait()
        self._wake.set()
        self._room.set()

    def nudge(self) -> None:
        """A job due now was stored: tick at once (thread-safe, cheap, a no-op while not leading)."""
        self._wake.set()
        self._room.set()

    def room_freed(self) -> None:
        """Runs were started, or ended under a concurrency limit: a type held back by its room may claim again
        (thread-safe, cheap)."""
        self._room.set()

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
        self._wake.clear()  # the first tick is now anyway
        # The wait between ticks ends on a nudge, a stop, or the term's loss (relayed by this watcher).
        threading.Thread(target=self._wake_on_loss, args=(term,), daemon=True, name="term-watch").start()
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
                    log.debug("tick", extra={"action": "tick", "result": vars(result)})
            except Exception as exc:  # a tick must never end the process (store or broker down)
                failures += 1
                metrics.SCHEDULER_TICK_ERRORS.inc()
                log.warning("tick failed", extra={"action": "tick_failed", "error": repr(exc)})
            if failures:  # back off; nudges do not shorten it
                delay = min(self._tick_s * 2**failures, MAX_ERROR_BACKOFF_S)
                next_tick = started + delay
                term.lost.wait(max(0.0, next_tick - time.monotonic()))
                continue
            next_tick = max(next_tick + self._tick_s, started)
            if result.held:
                self._claim_held(term, next_tick, result.held)
            if self._woken_before(next_tick):
                self.stop.wait(max(0.0, started + NUDGE_MIN_GAP_S - time.monotonic()))
                next_tick = time.monotonic()
            self._wake.clear()

    def _claim_held(self, term: Term, next_tick: float, held: frozenset[str]) -> None:
        """Until the next tick, a nudge or a stop: claims only of the held types while their room holds due runs
        back (it comes back as executors start runs and end them): every HELD_RETRY_S, or at each announcement
        where the executors make them."""
        while held and time.monotonic() + HELD_RETRY_S < next_tick and term.trusted():
            if self._room_may_be_back(next_tick):
                return  # a nudge or a stop: the full tick comes at once
            try:
                with metrics.SCHEDULER_TICK_SECONDS.time():
                    held = self._dispatcher.claim_held(term, held).held
            except Exception as exc:  # as a tick's: logged, and the next tick tries again
                metrics.SCHEDULER_TICK_ERRORS.inc()
                log.warning("claim failed", extra={"action": "tick_failed", "error": repr(exc)})
                return

    def _room_may_be_back(self, next_tick: float) -> bool:
        """Wait until a held type may have room again (at most until the next tick); True when a nudge or a stop
        came meanwhile. The announcement is cleared before the claim that follows reads the store, so one made
        during that claim ends the next wait at once: none is lost."""
        if not self._room_announced:
            return self._wake.wait(HELD_RETRY_S)
        self._room.wait(max(0.0, min(HELD_ANNOUNCED_RETRY_S, next_tick - time.monotonic())))
        self._room.clear()
        return self._wake.is_set()

    def _woken_before(self, next_tick: float) -> bool:
        """Wait for the next tick; True when something asks for one sooner: a nudge, a stop, the term's loss,
        or an executor of a type the last tick did not claim (its jobs may be due: with a long period they
        would otherwise wait for the next tick, not the REFRESH_S a new executor is promised)."""
        while (left := next_tick - time.monotonic()) > 0:
            if self._wake.wait(min(left, REFRESH_S)):
                return True
            # Only a wait cut short looks (never with a period up to REFRESH_S): the tick itself reads the types.
            if left > REFRESH_S and self._dispatcher.gained_types():
                return True
        return False
