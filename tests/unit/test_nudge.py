"""Nudges: a job due now is claimed at once instead of at the next tick, and a lost nudge costs nothing.

Real parts only: the scheduler loop on the embedded store, bus and elector, and real UDP datagrams on loopback.
The tick is a minute long, so a job claimed within seconds was claimed because of the nudge.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from jobsched.type_defaults import BUILTIN_DEFAULTS
from services.scheduler.dispatcher import Dispatcher
from services.scheduler.scheduler import Scheduler
from shared.bus.memory import MemoryBus, MemorySubscription
from shared.config import ConfigError, Settings
from shared.election.single import SingleNodeElector
from shared.job_types.served import REFRESH_S, ServedTypes
from shared.model import utc_now
from shared.nudge import NudgeListener, NudgeSender, parse_address
from shared.store.base import NewJob
from shared.store.sqlite import SqliteJobStore
from tests.support import backend_beside, wait_until

LONG_TICK_S = 60.0


class Running:
    def __init__(self, tmp_path: Path) -> None:
        self.store = SqliteJobStore(tmp_path / "jobs.db")
        self.store.ensure_schema()
        self.bus = MemoryBus()
        self.wakeups: MemorySubscription = self.bus.subscribe("noop")
        dispatcher = Dispatcher(self.store, self.bus, ["noop"], batch=500)
        self.scheduler = Scheduler(SingleNodeElector(), dispatcher, self.bus, ["noop"], tick_s=LONG_TICK_S)
        self.thread = threading.Thread(target=self.scheduler.run)

    def create_due(self, key: str) -> str:
        return self.store.create(NewJob(idempotencyKey=key, tenantId="t", jobType="noop", scheduledAt=utc_now())).id

    def next_wakeup(self, timeout_s: float) -> str | None:
        delivery = self.wakeups.poll(timeout_s)
        return delivery.read_wakeup().jobId if delivery else None

    def stop(self) -> None:
        self.scheduler.request_stop()
        self.thread.join(10)
        self.store.close()


@pytest.fixture
def running(tmp_path: Path) -> Iterator[Running]:
    scheduler = Running(tmp_path)
    first = scheduler.create_due("warm-up")  # before the first tick, which the term starts with
    scheduler.thread.start()
    assert scheduler.next_wakeup(10) == first  # the first tick of the term ran: from now on the next is a minute away
    yield scheduler
    scheduler.stop()


def test_a_nudge_claims_a_job_due_now_at_once(running: Running) -> None:
    job_id = running.create_due("due-now")
    assert running.next_wakeup(0.5) is None  # without a nudge it waits for the tick
    running.scheduler.nudge()
    assert running.next_wakeup(5) == job_id


def test_nudges_during_a_wait_are_served_by_one_tick_and_the_next_waits_again(running: Running) -> None:
    ids = {running.create_due(f"job-{n}") for n in range(3)}
    for _ in range(3):
        running.scheduler.nudge()
    assert {running.next_wakeup(5) for _ in ids} == ids
    late = running.create_due("after")
    assert running.next_wakeup(0.5) is None  # the nudges were used up: nothing left over to tick again
    running.scheduler.nudge()
    assert running.next_wakeup(5) == late


def test_a_datagram_nudges_the_scheduler_behind_a_listener(running: Running) -> None:
    listener = NudgeListener(("127.0.0.1", 0), running.scheduler.nudge)
    sender = NudgeSender([("127.0.0.1", listener.port)])
    try:
        job_id = running.create_due("over-udp")
        sender()
        assert running.next_wakeup(5) == job_id
    finally:
        sender.close()
        listener.close()


def test_targets_that_fail_do_not_keep_the_nudge_from_the_others() -> None:
    calls: list[int] = []
    listener = NudgeListener(("127.0.0.1", 0), lambda: calls.append(1))
    # nobody listens on the first (ICMP refusals), the second does not resolve: each send fails, only logged
    sender = NudgeSender([("127.0.0.1", free_port_udp()), ("no-such-host.invalid", 9), ("127.0.0.1", listener.port)])
    try:
        for _ in range(3):
            sender()
            wait_until(lambda: calls, 10, "a nudge past the failing targets")
            calls.clear()
    finally:
        sender.close()
        listener.close()


def free_port_udp() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_closed_listener_stops_calling_back() -> None:
    calls: list[int] = []
    listener = NudgeListener(("127.0.0.1", 0), lambda: calls.append(1))
    sender = NudgeSender([("127.0.0.1", listener.port)])
    try:
        sender()
        wait_until(lambda: calls, 5, "the first nudge")
        listener.close()
        sender()
        listener._thread.join(5)
        assert not listener._thread.is_alive()
        assert calls == [1]
    finally:
        sender.close()


def test_addresses_parse_and_bad_ones_name_their_variable() -> None:
    assert parse_address("scheduler-0.jobsched:9101") == ("scheduler-0.jobsched", 9101)
    settings = Settings.from_env({"NUDGE_LISTEN": "0.0.0.0:9101", "NUDGE_TARGETS": "a:1, b:2"})
    assert settings.nudge_listen == ("0.0.0.0", 9101)
    assert settings.nudge_targets == (("a", 1), ("b", 2))
    assert Settings.from_env({}).nudge_targets == ()
    assert Settings.from_env({}).nudge_listen is None
    for bad in ("nohost", "a:0", "a:70000", ":80", "a:b"):
        with pytest.raises(ConfigError, match="NUDGE_TARGETS"):
            Settings.from_env({"NUDGE_TARGETS": bad})


def test_a_type_whose_executor_appears_after_a_tick_is_claimed_without_waiting_for_the_next(tmp_path: Path) -> None:
    store = SqliteJobStore(tmp_path / "jobs.db")
    store.ensure_schema()
    registry = backend_beside(store).job_types
    bus = MemoryBus()
    wakeups = bus.subscribe("mail")
    served = ServedTypes(registry, ["mail"], retention=timedelta(days=1))
    scheduler = Scheduler(
        SingleNodeElector(), Dispatcher(store, bus, served, batch=500), bus, ["mail"], tick_s=LONG_TICK_S
    )
    job_id = store.create(NewJob(idempotencyKey="m", tenantId="t", jobType="mail", scheduledAt=utc_now())).id
    thread = threading.Thread(target=scheduler.run)
    thread.start()
    try:
        assert wakeups.poll(1.5) is None  # the term's first tick ran and left it: no executor serves mail yet
        now = utc_now()
        registry.announce("executor-1", {"mail": BUILTIN_DEFAULTS}, now, now + timedelta(minutes=1))
        delivery = wakeups.poll(5 * REFRESH_S)  # within the promised staleness, not the minute-long tick
        assert delivery is not None
        assert delivery.read_wakeup().jobId == job_id
    finally:
        scheduler.request_stop()
        thread.join(10)
        store.close()
