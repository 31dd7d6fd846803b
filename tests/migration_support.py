"""What the migration tests of every store share: released migrations are never edited; the announcements a
backfill of the types' backoffs reads."""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from jobsched.backoff import Backoff
from jobsched.type_defaults import TypeDefaults
from shared.job_types.announcements import JobTypeRegistry

Released = list[tuple[str, str]]  # (function name, sha256 of its source), in the order of MIGRATIONS


def digests(functions: Sequence[Callable[..., Any]]) -> Released:
    return [(f.__name__, hashlib.sha256(inspect.getsource(f).encode()).hexdigest()) for f in functions]


def assert_released_unchanged(migrations: Sequence[Callable[..., Any]], released: Released, where: str) -> None:
    """Each released migration's source is the one recorded when it was released; a new one must be recorded."""
    now = digests(migrations)
    for number, (recorded, current) in enumerate(zip(released, now, strict=False), start=1):
        assert current == recorded, (
            f"migration {number} ({recorded[0]}) changed after its release: databases already migrated will never "
            f"run it again. Restore it, and make the change a new migration at the end of MIGRATIONS ({where})"
        )
    assert len(now) == len(released), (
        f"MIGRATIONS has {len(now)} migrations and {len(released)} are recorded as released here: add each new "
        f"one's name and digest to RELEASED as it is released, {now[len(released) :]}"
    )


def announce_backoffs(types: JobTypeRegistry, t0: datetime, backoff: Backoff) -> None:
    """Type `slow`'s latest announcement carries `backoff`, type `back`'s the default, as announcements.summarize
    picks the latest: by seenAt first (an older announcement of the default for `slow` does not count), then by
    executor (for `back`, exec-2's default at the same time as exec-1's `backoff`)."""
    types.announce("exec-9", {"slow": TypeDefaults()}, t0 - timedelta(seconds=1), t0)
    types.announce("exec-1", {"slow": TypeDefaults(backoff=backoff), "back": TypeDefaults(backoff=backoff)}, t0, t0)
    types.announce("exec-2", {"back": TypeDefaults()}, t0, t0)
