"""The soak's bookkeeping without servers: what it reads from the servers' logs, how it follows jobs to their final
status, and its drift rule. (The soak itself runs in tests/integration/test_bench_soak.py.)"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

from loadtest.server_logs import LogTail, ServerLogs
from loadtest.soak.load import KINDS, mix
from loadtest.soak.tracking import Tracked, Tracker
from loadtest.soak.windows import Windows, no_drift

T0 = datetime(2026, 1, 1, tzinfo=UTC)
RETAIN_S = 60.0
CRASH = "LOG:  server process (PID 42) was terminated by signal 11: Segmentation fault\n"
CORRUPT = 'ERROR:  right sibling of RUM page is of different type in index "jobs_rum"\n'
PAST_THE_END = (
    'ERROR:  could not open file "base/5/1302246.1" (target block 1245184): previous segment is only 60 blocks\n'
)
FERRET_ERROR = '2026-12-05T12:50:48.214Z\tERROR\tdocumentdb/tracer.go:198\tQuery\t{"error":"boom"}\n'
FERRET_WARN = "2026-12-05T12:50:48.215Z\tWARN\tmiddleware/dispatcher.go:131\tCommand handled\n"


def test_a_log_tail_reads_only_what_was_written_after_it_began(tmp_path: Path) -> None:
    log = tmp_path / "documentdb.log"
    log.write_text(CRASH)  # before the soak: not its finding
    tail = LogTail(log)
    with log.open("a") as out:
        out.write("first\nsecond, still being writ")
    assert tail.new_lines() == ["first"]
    with log.open("a") as out:
        out.write("ten\n")
    assert tail.new_lines() == ["second, still being written"]
    assert tail.new_lines() == []
    log.write_text("after a restart\n")  # truncated: all of it is new
    assert tail.new_lines() == ["after a restart"]


def test_server_logs_count_crashes_corruption_and_ferretdb_errors(tmp_path: Path) -> None:
    (tmp_path / "documentdb.log").write_text("")
    (tmp_path / "ferretdb.log").write_text(FERRET_ERROR)
    logs = ServerLogs(tmp_path)
    with (tmp_path / "documentdb.log").open("a") as out:
        out.write(f"LOG:  checkpoint starting: wal\n{CRASH}{CORRUPT}{PAST_THE_END}")
    with (tmp_path / "ferretdb.log").open("a") as out:
        out.write(FERRET_WARN + FERRET_ERROR)
    assert logs.read() == Counter(crashes=1, corruption=2, ferretdb_errors=1)
    assert logs.read() == Counter()
    figures = logs.figures()
    assert figures["crashes"] == {"count": 1, "samples": [CRASH.rstrip("\n")]}
    assert figures["ferretdb_errors"]["count"] == 1


def test_logs_that_are_not_there_are_not_read_as_clean(tmp_path: Path) -> None:
    logs = ServerLogs(tmp_path / "elsewhere")
    assert logs.read() == Counter()
    assert not logs.known("crashes")
    assert logs.figures()["crashes"] is None


def tracker_with(*jobs: tuple[str, Tracked]) -> Tracker:
    tracker = Tracker(Windows(T0, 60.0), retain_s=RETAIN_S)
    for job_id, job in jobs:
        tracker.add(job_id, job)
    return tracker


def due_now(expected: str = "completed") -> Tracked:
    return Tracked(T0, expected, seen_unfinished=T0)


def test_a_job_gone_before_it_was_seen_final_is_lost_and_one_seen_final_is_let_go() -> None:
    tracker = tracker_with(("a", due_now()), ("b", due_now()))
    read_at = T0 + timedelta(seconds=5)
    to_read = tracker.apply_statuses(tracker.due(read_at), {"a": "completed"}, read_at, read_at)
    assert tracker.vanished.count == 1
    assert tracker.vanished.samples[0].startswith("b (a job to end completed): gone 5.0s after")
    assert set(to_read) == {"a"}
    assert not tracker.open
    tracker.apply_starts(to_read, {"a": T0 + timedelta(milliseconds=30)}, {"a": "completed"})
    window = tracker.windows.at(read_at)
    assert list(window.lateness_ms) == [30.0]
    assert window.finals == Counter(completed=1)


def test_a_job_gone_half_the_retention_after_it_was_seen_may_have_been_deleted_by_it() -> None:
    tracker = tracker_with(("a", due_now()))
    late = T0 + timedelta(seconds=RETAIN_S / 2)
    tracker.apply_statuses(["a"], {}, late, late)
    assert tracker.vanished.count == 0
    assert tracker.unverified.count == 1


def test_jobs_are_read_least_recently_read_first_and_at_most_the_budget() -> None:
    tracker = tracker_with(("a", due_now()), ("b", due_now()), ("c", due_now()))
    assert tracker.due(T0, limit=2) == ["a", "b"]
    assert tracker.full_polls == 1
    tracker.apply_statuses(["a", "b"], {"a": "running", "b": "pending"}, T0, T0)
    assert tracker.due(T0, limit=None) == ["c", "a", "b"]
    assert tracker.open["b"].seen_unfinished == T0


def test_a_job_is_read_once_due_and_its_outcome_checked_against_its_kind() -> None:
    later = T0 + timedelta(seconds=30)
    tracker = tracker_with(("dead", due_now("dlq")), ("cancel", Tracked(later, "cancelled", T0)))
    assert tracker.due(T0) == ["dead"]  # the other is not due: not read, not outstanding
    assert tracker.outstanding(T0) == 1
    tracker.cancel_answered("cancel", 202)  # found running: any final status will do
    assert tracker.due(T0) == ["dead", "cancel"]
    tracker.apply_statuses(["dead", "cancel"], {"dead": "completed", "cancel": "completed"}, T0, T0)
    assert tracker.unexpected.samples == ["dead: completed, expected dlq"]


def test_a_started_job_has_its_start_read_once() -> None:
    tracker = tracker_with(("a", due_now()))
    to_read = tracker.apply_statuses(["a"], {"a": "running"}, T0, T0)
    tracker.apply_starts(to_read, {"a": T0}, {"a": "running"})
    assert tracker.apply_statuses(["a"], {"a": "completed"}, T0, T0) == {}
    assert tracker.open == {}
    assert len(tracker.windows.at(T0).lateness_ms) == 1


def test_the_mix_holds_every_kind_in_its_share() -> None:
    kinds = mix()
    assert len(kinds) == 100 == sum(k.share for k in KINDS)
    assert Counter(k.name for k in kinds) == {k.name: k.share for k in KINDS}


def test_drift_is_a_p99_beyond_twice_the_first_and_the_slack() -> None:
    assert no_drift(100.0, 200.0)
    assert not no_drift(100.0, 201.0)
    assert no_drift(10.0, 60.0)
    assert not no_drift(10.0, 61.0)
