"""Tenants take turns across claims (fair_claims.Turns): lanes go least recently served first, a lane the claimer
never served before every other, a lane it left waiting before the ones it served since; the memory is bounded
and forgets the turns longest ago first, which keeps the order."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass

from shared.store.claim_limits import Verdict
from shared.store.fair_claims import Lane, Turns, fair_selection, head_of


@dataclass(frozen=True)
class Run:
    id: str


def lane(tenant: str, runs: int, head: int = 0, job_type: str = "t") -> Lane[Run]:
    ordered = [Run(f"{tenant}-{n}") for n in range(runs)]

    def read(after: Run | None, n: int) -> list[Run]:
        start = 0 if after is None else ordered.index(after) + 1
        return ordered[start : start + n]

    return Lane(job_type, tenant, head_of(0, head), read)


def claim(turns: Turns, lanes: list[Lane[Run]], limit: int, won: set[str] | None = None) -> list[str]:
    selection = fair_selection(lanes, limit, {}, None, turns)
    turns.took(selection, won)
    return [run.id.split("-")[0] for run in selection.runs]


def test_a_new_claimer_starts_from_the_heads_and_then_goes_on_where_its_last_claim_stopped() -> None:
    turns = Turns()
    backlog = {t: 10 for t in "abcde"}
    heads = {"a": 5, "b": 1, "c": 4, "d": 2, "e": 3}

    def lanes() -> list[Lane[Run]]:
        return [lane(t, n, heads[t]) for t, n in backlog.items()]

    assert claim(turns, lanes(), 2) == ["b", "d"]  # nobody served yet: the oldest heads first
    assert claim(turns, lanes(), 2) == ["e", "c"]  # the lanes left waiting, in the order they waited in
    assert claim(turns, [*lanes(), lane("new", 1, head=99)], 2) == ["new", "a"]  # a newly due lane first
    assert claim(turns, lanes(), 3) == ["b", "d", "e"]  # least recently served first


def test_the_last_run_of_a_claim_decides_a_lanes_place() -> None:
    turns = Turns()
    assert claim(turns, [lane("a", 9), lane("b", 9), lane("c", 9)], 7) == list("abcabca")
    assert claim(turns, [lane("a", 9), lane("b", 9), lane("c", 9)], 4) == list("bcab")


def test_a_run_lost_to_another_writer_is_no_turn() -> None:
    turns = Turns()
    claim(turns, [lane("a", 3), lane("b", 3)], 2, won={"b-0"})
    assert claim(turns, [lane("a", 3), lane("b", 3)], 1) == ["a"]


def test_a_lane_whose_type_has_no_room_keeps_its_place() -> None:
    turns = Turns()
    selection = fair_selection([lane("a", 3, job_type="x"), lane("b", 3, job_type="x")], 5, {"x": 0}, None, turns)
    turns.took(selection)
    assert selection.runs == []
    assert selection.held == {"x"}
    assert not turns.knows(("x", "a"))
    assert not turns.knows(("x", "b"))


def test_lanes_with_runs_in_flight_that_a_new_claimer_did_not_serve_count_as_served_lately() -> None:
    turns = Turns()
    assert claim(turns, [lane("a", 3, head=0), lane("b", 3, head=1)], 1) == ["a"]
    turns.in_flight([("t", "a"), ("t", "c")])  # a's run is this claimer's own turn; c's was another claimer's
    lanes = [lane("c", 3, head=0), lane("a", 3, head=1), lane("b", 3, head=2), lane("d", 3, head=3)]
    assert claim(turns, lanes, 4) == ["d", "b", "a", "c"]


def test_a_passed_over_lane_is_remembered_as_waiting() -> None:
    turns = Turns()

    def admit(at: Lane[Run], run: Run) -> Verdict:
        return Verdict.CLOSE if at.tenant_id == "full" else Verdict.TAKE

    selection = fair_selection([lane("full", 3, head=0), lane("b", 3, head=1)], 5, {}, admit, turns)
    turns.took(selection)
    assert [r.id for r in selection.runs] == ["b-0", "b-1", "b-2"]
    assert [lane.tenant_id for lane in turns.order([lane("b", 1), lane("full", 1), lane("new", 1)])] == [
        "new",
        "full",
        "b",
    ]


def test_the_memory_is_bounded_and_forgets_the_longest_ago_first_without_changing_the_order() -> None:
    turns = Turns(remembered=8)
    tenants = [f"t{n:02}" for n in range(40)]
    for n in range(0, 40, 4):
        claim(turns, [lane(t, 1) for t in tenants[n : n + 4]], 4)
    remembered = [t for t in tenants if turns.knows(("t", t))]
    assert 8 <= len(remembered) <= 9
    assert remembered == tenants[-len(remembered) :]
    order = [lane.tenant_id for lane in turns.order([lane(t, 1) for t in reversed(tenants)])]
    assert order[-len(remembered) :] == remembered  # the forgotten ones first (by their heads), then by turn


def test_over_random_claims_no_lane_has_a_second_turn_while_another_due_lane_waits_for_its_first() -> None:
    rng = random.Random(11)
    turns = Turns()
    left = {f"t{n}": rng.randint(1, 40) for n in range(25)}
    since: Counter[str] = Counter()  # turns each lane had since the first lane waiting now was last served
    while any(left.values()):
        due = [lane(t, n, head=rng.randint(0, 100)) for t, n in left.items() if n]
        taken = claim(turns, due, rng.randint(1, 12))
        for tenant in taken:
            left[tenant] -= 1
            since[tenant] += 1
            waiting = [t for t, n in left.items() if n and since[t] == 0]
            assert not waiting or since[tenant] <= 1, (tenant, waiting)
        if all(since[t] for t, n in left.items() if n):
            since.clear()
