"""Claim lanes and the backlog cache: how a claim takes from a deep backlog without re-reading it, on a server
that does not push filters down.

On FerretDB 1.x (the MongoDB stand-in) a query costs one scan of the collection plus one decode of every
document its equality filters match (see due_slots.py). A claim of part of a deep due slot (a bulk insert, or a
scheduler that was down) would decode the whole slot twice, once to find and sort the candidates and once in
the guarded update, and draining the slot would decode it many times over. Two measures make a deep slot cost
what its claimed part costs:

- The backlog cache. A slot whose time has passed (older than the current slot by more than LOOKBACK_SLOTS)
  receives no new runs: every writer puts a run in the slot of max(scheduledAt, its clock). Its candidates,
  read once, can only go away (claimed, cancelled, moved), so the claimer keeps them, in claim order, and
  later claims take from that list instead of querying the slot again. A stale entry costs nothing: the
  guarded update does not match it. Anything the rule misses (a write delayed past the lookback) is found by
  the window's periodic full sweep, which also rebuilds the cache.
- Lanes. Every pending run carries `lane`, a random number below LANES chosen when it is written. When a
  claim takes only part of a (slot, priority) group, it takes whole lanes of the group (the lanes holding its
  oldest runs first) and guards each lane's update by lane equality, so the server decodes about the runs
  taken instead of the whole group (a 32nd of it per lane taken). It does
  so only when the estimate says that saves at least one more query's cost (each extra update costs a scan,
  worth QUERY_COST_IN_DOCS decodes), i.e. for groups of a few hundred runs and more. The price: inside such a
  deep (slot, priority) group taken in part, runs are claimed lane by lane rather than strictly by
  scheduledAt; priority order and slot order are kept, and smaller groups are claimed strictly oldest first.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from shared.store.mongo_compat.due_slots import SlotWindow

LANES: Final = 32
QUERY_COST_IN_DOCS: Final = 200  # one more update's scan costs about as much as decoding this many documents
MAX_CACHED: Final = 100_000  # candidates kept across claims (projected documents, ~0.5 kB each)

Document = dict[str, Any]


def new_lane() -> int:
    return random.randrange(LANES)


@dataclass(frozen=True)
class ClaimGroup:
    """One guarded update of a claim: these ids, all pending in `slot` with `priority` (and in `lane`)."""

    slot: int | None
    priority: int
    lane: int | None
    ids: list[Any]


def _group_key(doc: Document) -> tuple[int | None, int]:
    return doc.get("dueSlot"), int(doc.get("priority", 0))


def plan_claim(found: Sequence[Document], limit: int) -> tuple[list[ClaimGroup], list[Document]]:
    """Split the first `limit` of `found` (in claim order) into guarded updates, taking a group that is claimed
    in part by whole lanes when that decodes fewer documents. Returns the updates and the candidates left."""
    members: dict[tuple[int | None, int], list[Document]] = defaultdict(list)
    quota: dict[tuple[int | None, int], int] = defaultdict(int)
    for rank, doc in enumerate(found):
        key = _group_key(doc)
        members[key].append(doc)
        if rank < limit:
            quota[key] += 1
    groups: list[ClaimGroup] = []
    taken: set[Any] = set()
    for (slot, priority), count in quota.items():
        group = members[(slot, priority)]
        by_lane = _lane_pick(group, count) if count < len(group) else None
        picked = by_lane if by_lane is not None else {None: [d["_id"] for d in group[:count]]}
        for lane, ids in picked.items():
            groups.append(ClaimGroup(slot, priority, lane, ids))
            taken.update(ids)
    return groups, [d for d in found if d["_id"] not in taken]


def _lane_pick(group: Sequence[Document], quota: int) -> dict[int | None, list[Any]] | None:
    """`quota` ids of `group` from as few lanes as possible (lanes in the order of their oldest run), or None
    when that does not save at least one query's cost over one update of the whole group, or some run has no
    lane (written before lanes)."""
    lanes: dict[int, list[Any]] = {}
    for doc in group:
        lane = doc.get("lane")
        if lane is None:
            return None
        lanes.setdefault(int(lane), []).append(doc["_id"])
    picked: dict[int | None, list[Any]] = {}
    decoded = 0
    left = quota
    for lane, ids in lanes.items():
        if left == 0:
            break
        picked[lane] = ids[:left]
        decoded += len(ids)
        left -= len(picked[lane])
    # Lanes bend the age order inside the group, so they must save at least one query's worth of decoding:
    # a small group (the usual case: a second's worth of due runs) is always claimed strictly oldest first.
    by_lanes, whole = len(picked) * QUERY_COST_IN_DOCS + decoded, QUERY_COST_IN_DOCS + len(group)
    if by_lanes + QUERY_COST_IN_DOCS > whole:
        return None
    return picked


class BacklogCache:
    """Candidates of slots that can receive no new runs, complete per slot, in claim order. Part of one
    claimer's memory (ClaimerMemory: one set of job types; a new leader starts with a full sweep)."""

    def __init__(self, capacity: int = MAX_CACHED) -> None:
        self._capacity = capacity
        self._slots: dict[int, list[Document]] = {}

    def slots(self) -> frozenset[int]:
        return frozenset(self._slots)

    def get(self, slot: int) -> list[Document] | None:
        return self._slots.get(slot)

    def keep(self, slot: int, docs: list[Document]) -> None:
        """Remember the complete candidate list of a closed slot (dropped when over capacity)."""
        if len(self) + len(docs) <= self._capacity:
            self._slots[slot] = docs

    def rebuild(self, found: Iterable[Document], closed_below: int) -> None:
        """After a full sweep: every closed slot's candidates are among `found`."""
        self._slots = {}
        by_slot: dict[int, list[Document]] = defaultdict(list)
        for doc in found:
            slot = doc.get("dueSlot")
            if slot is not None and slot < closed_below:
                by_slot[slot].append(doc)
        for slot, docs in sorted(by_slot.items()):
            self.keep(slot, docs)

    def settle(self, left: Iterable[Document]) -> None:
        """After a claim: cached slots keep only the candidates the claim left; emptied slots are dropped."""
        remaining: dict[int, list[Document]] = defaultdict(list)
        for doc in left:
            slot = doc.get("dueSlot")
            if slot in self._slots:
                remaining[slot].append(doc)
        self._slots = {slot: docs for slot, docs in remaining.items() if docs}

    def __len__(self) -> int:
        return sum(len(d) for d in self._slots.values())


@dataclass
class ClaimerMemory:
    """What one claimer remembers between claims (which slots may hold due runs, the backlog's candidates),
    valid only for the job types it was built for: claims of other types never looked at these types' runs,
    so a claim with another set of types starts a fresh memory, which begins with a full sweep."""

    job_types: frozenset[str]
    window: SlotWindow = field(default_factory=SlotWindow)
    backlog: BacklogCache = field(default_factory=BacklogCache)

    def serving(self, job_types: Collection[str]) -> ClaimerMemory:
        """This memory if it was built for `job_types`, else a fresh one for them."""
        types = frozenset(job_types)
        return self if types == self.job_types else ClaimerMemory(types)
