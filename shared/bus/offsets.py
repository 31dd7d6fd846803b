"""Commit positions for messages processed out of order.

Handlers run concurrently, so offsets finish out of order. A partition's commit position is its first
offset not yet acknowledged (or one past the highest received when all are acknowledged): committing more
would lose the unfinished message on a crash; committing less only causes redeliveries, which the
executor's attempt record absorbs.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Iterable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class OffsetTracker(Generic[K]):
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._unacked: dict[K, set[int]] = {}
        self._next: dict[K, int] = {}
        self._committed: dict[K, int] = {}

    def received(self, partition: K, offset: int) -> None:
        with self._lock:
            self._unacked.setdefault(partition, set()).add(offset)
            self._next[partition] = max(self._next.get(partition, 0), offset + 1)

    def acked(self, partition: K, offset: int) -> None:
        with self._lock:
            self._unacked.get(partition, set()).discard(offset)

    def in_flight(self) -> int:
        with self._lock:
            return sum(len(offsets) for offsets in self._unacked.values())

    def positions_to_commit(self, partitions: Iterable[K] | None = None) -> dict[K, int]:
        """Positions that moved since they were last returned (and are then considered committed)."""
        with self._lock:
            out = {}
            for partition in list(self._next) if partitions is None else partitions:
                if partition not in self._next:
                    continue
                unacked = self._unacked.get(partition)
                position = min(unacked) if unacked else self._next[partition]
                if position > self._committed.get(partition, -1):
                    out[partition] = position
                    self._committed[partition] = position
            return out

    def commit_failed(self, positions: dict[K, int]) -> None:
        """These positions (from positions_to_commit) were not committed: the next positions_to_commit returns
        them again (or later ones), rather than taking them for committed and the acknowledgements for kept."""
        with self._lock:
            for partition, position in positions.items():
                if self._committed.get(partition) == position:
                    del self._committed[partition]

    def forget(self, partitions: Iterable[K]) -> None:
        """Drop partitions this consumer no longer owns (their in-flight messages go to the next owner)."""
        with self._lock:
            for partition in partitions:
                self._unacked.pop(partition, None)
                self._next.pop(partition, None)
                self._committed.pop(partition, None)
