"""Claim lanes, the backlog cache and the executor's claim documents (shared/store/mongo_compat/claim_lanes.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from shared.store.mongo_compat.claim_lanes import LANES, BacklogCache, ClaimerMemory, plan_claim

T0 = datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)
Doc = dict[str, Any]


def candidates(count: int, *, slot: int = 100, priority: int = 0, lanes: int | None = LANES) -> list[Doc]:
    """`count` due runs in claim order, lanes dealt round-robin (None: written before lanes existed)."""
    return [
        {
            "_id": f"{slot}-{priority}-{n}",
            "dueSlot": slot,
            "priority": priority,
            "scheduledAt": T0 + timedelta(milliseconds=n),
            **({"lane": n % lanes} if lanes else {}),
        }
        for n in range(count)
    ]


def test_a_group_taken_whole_is_one_plain_update() -> None:
    found = candidates(50)
    groups, left = plan_claim(found, 500)
    assert [(g.slot, g.priority, g.lane, len(g.ids)) for g in groups] == [(100, 0, None, 50)]
    assert left == []


def test_part_of_a_deep_group_is_taken_by_whole_lanes_oldest_first() -> None:
    found = candidates(20_000)  # 625 per lane
    groups, left = plan_claim(found, 500)
    assert [(g.lane, len(g.ids)) for g in groups] == [(0, 500)]  # lane 0 holds the oldest run
    assert len(left) == 20_000 - 500
    assert {d["_id"] for d in left}.isdisjoint(groups[0].ids)


def test_a_claim_spanning_lanes_takes_them_in_order_and_the_last_in_part() -> None:
    found = candidates(20_000)
    groups, _ = plan_claim(found, 1_000)
    assert [(g.lane, len(g.ids)) for g in groups] == [(0, 625), (1, 375)]


def test_a_shallow_group_stays_one_update_when_lanes_would_cost_more() -> None:
    found = candidates(1_000)  # ~31 per lane: 16 updates of lanes cost more than one decode of 1,000
    groups, left = plan_claim(found, 500)
    assert [(g.lane, len(g.ids)) for g in groups] == [(None, 500)]
    assert [d["_id"] for d in left] == [d["_id"] for d in found[500:]]


def test_a_small_group_is_claimed_strictly_oldest_first_even_when_one_lane_would_decode_less() -> None:
    found = candidates(12, lanes=4)  # lane 0 holds runs 0, 4, 8: it alone would serve a claim of 3
    groups, _ = plan_claim(found, 3)
    assert [(g.lane, g.ids) for g in groups] == [(None, [d["_id"] for d in found[:3]])]


def test_runs_without_a_lane_are_claimed_in_strict_order() -> None:
    found = candidates(20_000, lanes=None)
    groups, _ = plan_claim(found, 500)
    assert [(g.lane, g.ids) for g in groups] == [(None, [d["_id"] for d in found[:500]])]


def test_higher_priorities_are_taken_whole_before_a_lower_one_is_touched() -> None:
    urgent = candidates(300, priority=5)
    bulk = candidates(20_000, priority=0)
    groups, left = plan_claim([*urgent, *bulk], 500)
    assert [(g.priority, g.lane, len(g.ids)) for g in groups] == [(5, None, 300), (0, 0, 200)]
    assert all(d["priority"] == 0 for d in left)


def test_the_backlog_cache_keeps_what_claims_leave() -> None:
    cache = BacklogCache()
    old, older = candidates(5, slot=90), candidates(3, slot=80)
    cache.keep(90, old)
    cache.keep(80, older)
    assert cache.slots() == {80, 90}
    cache.settle([*old[3:], {"_id": "fresh", "dueSlot": 101}])  # slot 80 emptied; 101 was never cached
    assert cache.slots() == {90}
    assert cache.get(90) == old[3:]
    assert cache.get(80) is None


def test_the_backlog_cache_is_rebuilt_from_a_sweep_with_passed_slots_only_and_within_capacity() -> None:
    cache = BacklogCache(capacity=10)
    found = [*candidates(4, slot=90), *candidates(8, slot=95), *candidates(2, slot=99)]
    cache.rebuild(found, closed_below=98)
    assert cache.slots() == {90}  # 95 would exceed the capacity (a slot is kept whole or not at all)
    assert len(cache) == 4


def test_a_claimer_memory_serves_only_its_job_types() -> None:
    memory = ClaimerMemory(frozenset({"noop"}))
    memory.backlog.keep(90, candidates(2, slot=90))
    assert memory.serving(["noop"]) is memory
    other = memory.serving({"noop", "email"})  # claims of {"noop"} never looked at email's runs
    assert other is not memory
    assert other.job_types == {"noop", "email"}
    assert other.backlog.slots() == frozenset()
    assert other.window.plan(datetime.now(UTC), datetime.now(UTC)) is None  # a fresh memory starts with a sweep
