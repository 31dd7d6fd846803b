"""Due slots: which slot a run is written into, and which slots a claimer queries."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from shared.store.mongo_compat.due_slots import (
    FULL_SWEEP_S,
    LOOKBACK_SLOTS,
    MAX_SLOT_QUERIES,
    SLOT_S,
    SWEEP_SHARE,
    SlotWindow,
    due_slot,
    slot_of,
)

NOW = datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_run_goes_to_the_slot_where_it_becomes_due_as_seen_when_written() -> None:
    assert due_slot(None, NOW) == slot_of(NOW) == int(NOW.timestamp()) // SLOT_S
    assert due_slot(NOW - timedelta(days=3), NOW) == slot_of(NOW)  # overdue: due from now on
    later = NOW + timedelta(seconds=42.5)
    assert due_slot(later, NOW) == slot_of(later) == slot_of(NOW) + 42 // SLOT_S


def test_the_first_claim_sweeps_everything_then_only_the_current_slot_is_read() -> None:
    window = SlotWindow(FakeClock())
    assert window.plan(NOW, NOW) is None
    window.claimed(NOW, full_sweep=True, left_behind=[])
    assert window.plan(NOW + timedelta(milliseconds=100), NOW + timedelta(milliseconds=100)) == [slot_of(NOW)]


def test_a_new_slot_rereads_the_previous_ones_once() -> None:
    window = SlotWindow(FakeClock())
    window.claimed(NOW, full_sweep=True, left_behind=[])
    next_slot = NOW + timedelta(seconds=SLOT_S)
    assert window.plan(next_slot, next_slot) == list(range(slot_of(NOW) - LOOKBACK_SLOTS, slot_of(next_slot) + 1))
    window.claimed(next_slot, full_sweep=False, left_behind=[])
    assert window.plan(next_slot, next_slot) == [slot_of(next_slot)]


def test_runs_left_behind_keep_their_slot_in_the_window_and_the_slots_between_are_skipped() -> None:
    window = SlotWindow(FakeClock())
    window.claimed(NOW, full_sweep=True, left_behind=[])
    later = NOW + timedelta(seconds=4 * SLOT_S)
    window.claimed(later, full_sweep=False, left_behind=[slot_of(NOW), slot_of(later)])
    assert window.plan(later, later) == [slot_of(NOW), slot_of(later)]


def test_a_long_backlog_is_read_from_the_cache_not_swept() -> None:
    window = SlotWindow(FakeClock())
    window.claimed(NOW, full_sweep=True, left_behind=[])
    later = NOW + timedelta(seconds=3 * MAX_SLOT_QUERIES * SLOT_S)
    behind = list(range(slot_of(NOW), slot_of(NOW) + 2 * MAX_SLOT_QUERIES))
    window.claimed(later, full_sweep=False, left_behind=behind)
    assert window.plan(later, later) is None  # too many slots to query one by one
    assert window.plan(later, later, cached=behind) == [*behind, slot_of(later)]


def test_a_claim_that_took_several_slots_rereads_the_slot_it_ran_in() -> None:
    window = SlotWindow(FakeClock())
    window.claimed(NOW, full_sweep=True, left_behind=[])
    later = NOW + timedelta(seconds=3 * SLOT_S)
    assert window.plan(later, later) == list(range(slot_of(NOW) - LOOKBACK_SLOTS, slot_of(later) + 1))


def test_a_claim_ahead_reads_from_the_current_slot_to_the_lookahead_slot() -> None:
    window = SlotWindow(FakeClock())
    window.claimed(NOW, full_sweep=True, left_behind=[])
    ahead = NOW + timedelta(seconds=2 * SLOT_S)
    assert window.plan(NOW, ahead) == list(range(slot_of(NOW), slot_of(ahead) + 1))


def test_a_run_without_a_slot_a_wide_window_or_the_sweep_interval_mean_a_full_sweep() -> None:
    clock = FakeClock()
    window = SlotWindow(clock)
    window.claimed(NOW, full_sweep=True, left_behind=[None])
    assert window.plan(NOW, NOW) is None
    window.claimed(NOW, full_sweep=True, left_behind=[])
    assert (
        window.plan(
            NOW + timedelta(seconds=MAX_SLOT_QUERIES * SLOT_S), NOW + timedelta(seconds=MAX_SLOT_QUERIES * SLOT_S)
        )
        is None
    )  # a backlog of slots
    assert window.plan(NOW, NOW) is not None
    clock.now += FULL_SWEEP_S
    assert window.plan(NOW, NOW) is None


def test_past_the_query_limit_slot_queries_win_when_measured_cheaper_than_the_last_sweep() -> None:
    window = SlotWindow(FakeClock())
    window.claimed(NOW, full_sweep=True, left_behind=[], read_s=11.0)  # a sweep of a deep future backlog
    later = NOW + timedelta(seconds=12 * SLOT_S)  # that slow claim widened the window past the limit
    assert window.plan(later, later) is None  # no measure of a slot query yet
    window.claimed(NOW, full_sweep=False, left_behind=[], read_s=0.02, queries=4)  # 5 ms per slot query
    wide = window.plan(later, later)
    assert wide is not None
    assert len(wide) > MAX_SLOT_QUERIES
    window.claimed(NOW, full_sweep=True, left_behind=[], read_s=0.05)  # a cheap sweep (small backlog)
    assert window.plan(later, later) is None  # 15 queries of 5 ms cost more than that sweep


def test_slow_sweeps_are_spaced_to_take_at_most_their_share_of_the_time() -> None:
    clock = FakeClock()
    window = SlotWindow(clock)
    window.claimed(NOW, full_sweep=True, left_behind=[], read_s=11.0)  # 100,000 future runs on FerretDB
    clock.now += FULL_SWEEP_S
    assert window.plan(NOW, NOW) is not None  # a fast sweep would be due again; this one is not yet
    clock.now += 11.0 / SWEEP_SHARE - FULL_SWEEP_S
    assert window.plan(NOW, NOW) is None
