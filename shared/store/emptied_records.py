"""Retention of workflows' and batches' records (ReaperStore.delete_emptied_groups), the part every store shares:
the kinds of record, and where the look at each goes on at the next call."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, Literal

Group = Literal["workflows", "batches"]
GROUPS: Final[tuple[Group, ...]] = ("workflows", "batches")


class EmptiedRecords:
    """Each kind's resume cursor: the id of the last record the previous call looked at (None: from the oldest)."""

    def __init__(self) -> None:
        self._after: dict[Group, str | None] = dict.fromkeys(GROUPS)

    def sweep(self, delete_some: Callable[[Group, str | None], tuple[int, str | None]]) -> tuple[int, bool]:
        """`delete_some(group, after)` for each kind (how many it deleted, where the next look starts): how many in
        all, and whether any kind has more to look at."""
        deleted = 0
        for group in GROUPS:
            count, self._after[group] = delete_some(group, self._after[group])
            deleted += count
        return deleted, any(after is not None for after in self._after.values())
