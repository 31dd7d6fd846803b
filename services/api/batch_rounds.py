"""The order in which POST /jobs/batch creates jobs that name others of the batch as parents (`dependsOnKeys`):
rounds, parents first, worked out in one pass over the jobs and the keys they name (Kahn's algorithm), so that a
batch of any shape costs time in proportion to its size. What a round's creates answer then decides its
dependents' answers (batch_answers: a parent refused refuses them, one not written leaves them unwritten)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

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
    waiting_for: dict[int, int] = {}
    dependents: dict[int, list[int]] = {}
    for i, (new, keys) in jobs.items():
        parents = {holders.get((new.tenantId, key)) for key in keys}
        parents.discard(None)
        waiting_for[i] = len(parents) + (len(parents) < len(set(keys)))  # a key no job holds: never placed
        for parent in parents:
            if parent is not None:
                dependents.setdefault(parent, []).append(i)
    rounds: list[list[int]] = []
    ready = [i for i, count in waiting_for.items() if count == 0]
    while ready:
        rounds.append(ready)
        following: list[int] = []
        for parent in ready:
            for child in dependents.get(parent, ()):
                waiting_for[child] -= 1
                if waiting_for[child] == 0:
                    following.append(child)
        ready = following
    placed = {i for round_ in rounds for i in round_}
    unplaced: dict[int, str] = {}
    for i, (new, keys) in jobs.items():
        if i not in placed:
            unplaced[i] = next(k for k in keys if holders.get((new.tenantId, k)) not in placed)
    return Rounds(rounds, unplaced)
