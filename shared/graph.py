"""The order in which a graph's nodes can be created parents first: rounds, each node in a round after every
node it names (Kahn's algorithm), worked out in one pass over the nodes and the names they give, so a graph of
any shape costs time in proportion to its size. What POST /jobs/batch (dependsOnKeys) and POST /workflows
(a step's `after`) both need."""

from __future__ import annotations

from collections.abc import Collection, Hashable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

N = TypeVar("N", bound=Hashable)


@dataclass(frozen=True)
class Rounds(Generic[N]):
    """The nodes round by round, and those no round can hold: a node naming one that is not in the graph, or
    waiting in a cycle or behind one (in the graph's order)."""

    rounds: list[list[N]]
    unplaced: list[N]


def rounds(parents: Mapping[N, Collection[N]]) -> Rounds[N]:
    """`parents`: each node with the nodes it waits for (a name that is no node of the graph is never placed)."""
    waiting_for: dict[N, int] = {}
    dependents: dict[N, list[N]] = {}
    for node, named in parents.items():
        distinct = set(named)
        waiting_for[node] = len(distinct)
        for parent in distinct:
            dependents.setdefault(parent, []).append(node)
    placed: list[list[N]] = []
    ready = [node for node, count in waiting_for.items() if count == 0]
    while ready:
        placed.append(ready)
        following: list[N] = []
        for parent in ready:
            for child in dependents.get(parent, ()):
                waiting_for[child] -= 1
                if waiting_for[child] == 0:
                    following.append(child)
        ready = following
    done = {node for round_ in placed for node in round_}
    return Rounds(placed, [node for node in parents if node not in done])
