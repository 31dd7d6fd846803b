"""The line of wake-ups a type may have: the scheduler claims no further ahead of its executors than
DISPATCH_AHEAD, tops the line up as executors take from it (without waiting for its next tick), and a job
another tenant makes due meanwhile is claimed in the next claim, not after the backlog.

Real parts: the scheduler loop on the embedded store, bus and elector. The tick is a minute long, so whatever is
claimed within seconds was claimed by the retries a full line asks for.
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from services.scheduler import scheduler as scheduler_module
from services.scheduler.dispatcher import Dispatcher
from services.scheduler.scheduler import HELD_RETRY_S, Scheduler
from shared.bus.base import Wakeup
from shared.bus.memory import MemoryBus
from shared.election.single import SingleNodeElector
from shared.model import utc_now
from shared.store.base import AttemptStart, NewJob
from shared.store.claim_limits import ClaimLimits
from shared.store.fair_claims import Lane, fair_selection, head_of
from shared.store.sqlite import SqliteJobStore
from tests.support import start_one, wait_until

AHEAD = 4


def test_the_line_is_kept_short_topped_up_without_ticks_and_a_new_tenant_goes_in_the_next_claim(
    tmp_path: Path,
) -> None:
    store = SqliteJobStore(tmp_path / "jobs.db")
    store.ensure_schema()
    bus = MemoryBus()
    wakeups = bus.subscribe("noop")
    due = utc_now() - timedelta(minutes=1)
    store.create_many([NewJob(f"a-{n}", "tenant-a", "noop", due) for n in range(40)])
    dispatcher = Dispatcher(store, bus, ["noop"], batch=500, dispatch_ahead=AHEAD)
    scheduler = Scheduler(SingleNodeElector(), dispatcher, bus, ["noop"], tick_s=60.0)
    thread = threading.Thread(target=scheduler.run)
    thread.start()
    taken: list[str] = []
    try:
        newcomer: str | None = None
        while len(taken) < 41:
            delivery = wakeups.poll(10)
            assert delivery is not None, f"only {len(taken)} claimed: the line was not topped up"
            job_id = delivery.read_wakeup().jobId
            assert count_queued(store) <= AHEAD
            start_one(store, AttemptStart(job_id, "noop", "w1", utc_now() + timedelta(minutes=5)))
            taken.append(job_id)
            if len(taken) == 10:
                newcomer = store.create(NewJob("b-0", "tenant-b", "noop", utc_now())).id
        assert newcomer is not None
        # Behind the line as it was (at most AHEAD) and the next claim's first turn.
        assert taken.index(newcomer) <= 10 + AHEAD + 1
    finally:
        scheduler.request_stop()
        thread.join(10)
        store.close()


def count_queued(store: SqliteJobStore) -> int:
    with store.database.read() as conn:
        return int(conn.execute("SELECT count(*) FROM jobs WHERE status = 'queued'").fetchone()[0])


@dataclass(frozen=True)
class Run:
    id: str
    priority: int
    at: datetime


def lane_of(job_type: str, runs: list[Run]) -> Lane[Run]:
    ordered = sorted(runs, key=lambda r: (-r.priority, r.at, r.id))

    def read(after: Run | None, n: int) -> list[Run]:
        start = 0 if after is None else ordered.index(after) + 1
        return ordered[start : start + n]

    return Lane(job_type, "tenant", head_of(ordered[0].priority, ordered[0].at), read)


def test_fair_selection_matches_round_robin_over_lanes_ordered_by_their_first_run() -> None:
    rng = random.Random(7)
    base = utc_now()
    for trial in range(200):
        lanes_runs = {
            (t, k): [
                Run(f"{t}{k}-{n}", rng.choice([0, 0, 5]), base + timedelta(seconds=rng.randint(0, 100)))
                for n in range(rng.randint(1, 30))
            ]
            for t in ("x", "y")
            for k in range(rng.randint(1, 5))
        }
        limit = rng.randint(1, 80)
        rooms: dict[str, int | None] = {"x": rng.choice([None, 0, 3, 50]), "y": None}
        chosen = fair_selection([lane_of(t, runs) for (t, _), runs in lanes_runs.items()], limit, rooms)
        # The model: lanes in order of their first run, one run each per round, a type stopping at its room.
        queues = [(sorted(runs, key=lambda r: (-r.priority, r.at, r.id)), t) for (t, _), runs in lanes_runs.items()]
        queues.sort(key=lambda q: (-q[0][0].priority, q[0][0].at))
        expected: list[Run] = []
        left = dict(rooms)
        while len(expected) < limit and any(q for q, _ in queues):
            for q, t in queues:
                if q and left[t] != 0 and len(expected) < limit:
                    expected.append(q.pop(0))
                    left[t] = None if left[t] is None else left[t] - 1  # type: ignore[operator]
            if all(not q or left[t] == 0 for q, t in queues):
                break
        assert chosen.runs == expected, f"trial {trial}"
        if rooms["x"] == 0:
            assert chosen.held == {"x"}


def test_room_tops_the_line_up_at_half_and_an_active_limit_counts_everything_in_flight() -> None:
    assert ClaimLimits().room(1000, 1000) is None
    assert ClaimLimits(queued=10).room(0, 50) == 10
    assert ClaimLimits(queued=10).room(5, 50) == 5
    assert ClaimLimits(queued=10).room(6, 50) == 0
    assert ClaimLimits(active=5).room(0, 3) == 2
    assert ClaimLimits(active=5).room(0, 7) == 0
    assert ClaimLimits(queued=10, active=5).room(0, 4) == 1


def test_the_in_process_bus_hands_a_types_wakeups_out_in_turns_by_tenant() -> None:
    bus = MemoryBus()
    subscription = bus.subscribe("noop")
    backlog = [Wakeup(jobId=f"a{n}", jobType="noop", priority=0, lane="tenant-a") for n in range(4)]
    bus.publish_wakeups([*backlog, Wakeup(jobId="b0", jobType="noop", priority=0, lane="tenant-b")])
    order = []
    while (delivery := subscription.poll(0.01)) is not None:
        order.append(delivery.read_wakeup().jobId)
    assert order == ["a0", "b0", "a1", "a2", "a3"]  # the newcomer's turn comes after one of the backlog's


def test_where_executors_announce_room_a_full_line_is_topped_up_at_the_announcement_not_by_polling(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An embedded node's executors announce the room their starts give back (room_freed): the scheduler then waits
    for that rather than looking every HELD_RETRY_S. The fallback look is put off past the test here, so that only
    the announcement can top the line up."""
    monkeypatch.setattr(scheduler_module, "HELD_ANNOUNCED_RETRY_S", 600.0)
    store = SqliteJobStore(tmp_path / "jobs.db")
    store.ensure_schema()
    bus = MemoryBus()
    wakeups = bus.subscribe("noop")
    store.create_many([NewJob(f"a-{n}", "tenant-a", "noop", utc_now() - timedelta(minutes=1)) for n in range(40)])
    dispatcher = Dispatcher(store, bus, ["noop"], batch=500, dispatch_ahead=AHEAD)
    scheduler = Scheduler(SingleNodeElector(), dispatcher, bus, ["noop"], tick_s=60.0, room_announced=True)
    thread = threading.Thread(target=scheduler.run)
    thread.start()
    try:
        wait_until(lambda: count_queued(store) == AHEAD, 10, "the first tick's claim")
        for _ in range(AHEAD):  # the executor's starts, unannounced: the line is empty, and stays so
            delivery = wakeups.poll(10)
            assert delivery is not None
            start_one(store, AttemptStart(delivery.read_wakeup().jobId, "noop", "w1", utc_now() + timedelta(minutes=5)))
        threading.Event().wait(20 * HELD_RETRY_S)  # a polling scheduler would have topped the line up by now
        assert count_queued(store) == 0
        scheduler.room_freed()
        wait_until(lambda: count_queued(store) == AHEAD, 10, "the line topped up at the announcement")
    finally:
        scheduler.request_stop()
        thread.join(10)
        store.close()
