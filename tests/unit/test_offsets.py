from __future__ import annotations

from shared.bus.offsets import OffsetTracker


def test_commits_only_the_contiguous_acknowledged_prefix() -> None:
    tracker: OffsetTracker[str] = OffsetTracker()
    for offset in (10, 11, 12, 13):
        tracker.received("p0", offset)
    tracker.acked("p0", 11)
    tracker.acked("p0", 13)
    assert tracker.positions_to_commit() == {"p0": 10}  # 10 still running: nothing past it
    tracker.acked("p0", 10)
    assert tracker.positions_to_commit() == {"p0": 12}
    assert tracker.positions_to_commit() == {}  # unchanged positions are not re-committed
    tracker.acked("p0", 12)
    assert tracker.positions_to_commit() == {"p0": 14}
    assert tracker.in_flight() == 0


def test_partitions_are_independent_and_can_be_forgotten() -> None:
    tracker: OffsetTracker[str] = OffsetTracker()
    tracker.received("p0", 0)
    tracker.received("p1", 5)
    tracker.acked("p1", 5)
    assert tracker.positions_to_commit() == {"p0": 0, "p1": 6}
    tracker.forget(["p0"])
    assert tracker.in_flight() == 0
    tracker.acked("p0", 0)  # a late ack for a revoked partition is harmless
    assert tracker.positions_to_commit() == {}


def test_positions_whose_commit_failed_are_returned_again() -> None:
    tracker: OffsetTracker[str] = OffsetTracker()
    for offset in (0, 1, 2):
        tracker.received("p0", offset)
        tracker.received("p1", offset)
    tracker.acked("p0", 0)
    tracker.acked("p1", 0)
    failed = tracker.positions_to_commit()
    assert failed == {"p0": 1, "p1": 1}
    tracker.acked("p1", 1)  # p1 moved on after the failed commit: its next position covers the failed one
    tracker.commit_failed(failed)
    assert tracker.positions_to_commit() == {"p0": 1, "p1": 2}
    assert tracker.positions_to_commit() == {}
    tracker.commit_failed({"p0": 0})  # an older position than the one committed since: the later one stands
    assert tracker.positions_to_commit() == {}
