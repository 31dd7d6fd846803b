"""The order in which POST /jobs/batch creates jobs that name others of the batch as parents (`dependsOnKeys`):
rounds, parents first (shared/graph.py), the jobs' keys turned into the batch's indexes. What a round's creates
answer then decides its dependents' answers (batch_answers: a parent refused refuses them, one not written leaves
them unwritten)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from shared import graph
from shared.store.base import NewJob

Key = tuple[str, str]  # (tenant, idempotency key)


@dataclass(frozen=True)
class Rounds:
    """The batch's jobs (by their index in it) round by round, and those no round creates, each with the first
    key it names that no job of the batch placed before it holds (missing, or waiting in a cycle)."""

    rounds: list[list[int]]
    unplaced: dict[int, str]


def batch_rounds(jobs: Mapping[int, tuple[NewJob, list[str]]]) -> Rounds:
    """`jobs`: the batch's valid jobs by index, each with the keys of the batch's jobs it waits for."""
    holders: dict[Key, int] = {}
    for i, (new, _) in jobs.items():
        holders.setdefault((new.tenantId, new.idempotencyKey), i)
    missing = -1  # the parent of a key no job of the batch holds: never placed
    plan = graph.rounds(
        {i: {holders.get((new.tenantId, key), missing) for key in keys} for i, (new, keys) in jobs.items()}
    )
    placed = {i for round_ in plan.rounds for i in round_}
    unplaced: dict[int, str] = {}
    for i in plan.unplaced:
        new, keys = jobs[i]
        unplaced[i] = next(k for k in keys if holders.get((new.tenantId, k)) not in placed)
    return Rounds(plan.rounds, unplaced)
