"""How a handler ends an attempt other than by returning or failing: raise one of these.

    @jobs.handler("sync-account")
    def sync_account(payload: Account, ctx: jobsched.HandlerContext) -> dict[str, int]:
        if upstream_is_busy():
            raise jobsched.Snooze(30)  # again in 30 s; the attempt is not spent
        if account_closed(payload):
            raise jobsched.Cancel("the account was closed")  # final: cancelled, never retried
        if not valid(payload):
            raise jobsched.GiveUp("the account id is malformed")  # to the DLQ now: retrying cannot help
        return {"synced": 12}  # the result, kept on the attempt and the job (small JSON)

Raising anything else fails the attempt, which is retried with the type's backoff until its attempts are spent.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any, Final

# How far one snooze may put a job off, and how many times a job may snooze: past that a snooze fails the attempt
# (a handler that snoozes forever would never end, nor ever reach the DLQ where someone would see it).
MAX_SNOOZE: Final = timedelta(days=7)
MAX_SNOOZES: Final = 1000
# The largest result kept (its compact UTF-8 JSON): a result is a summary, not a blob store.
MAX_RESULT_BYTES: Final = 16 * 1024
MAX_PROGRESS_BYTES: Final = 4 * 1024  # a progress report, as JSON (HandlerContext.report_progress)


class Snooze(Exception):
    """Run the job again after `after` (seconds or a timedelta, more than 0 and at most 7 days) without spending
    an attempt of its budget. The attempt's record says `snoozed`; a job may snooze at most 1,000 times."""

    def __init__(self, after: float | timedelta, reason: str | None = None) -> None:
        seconds = after.total_seconds() if isinstance(after, timedelta) else after
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not seconds > 0:
            raise ValueError(f"a snooze must be more than 0 seconds (got {after!r})")
        if seconds > MAX_SNOOZE.total_seconds():
            raise ValueError(f"a snooze may be at most {MAX_SNOOZE.days} days (got {after!r})")
        self.after = timedelta(seconds=seconds)
        self.reason = reason
        super().__init__(f"snoozed for {seconds:g}s" + (f": {reason}" if reason else ""))


class RetryAfter(Exception):
    """Fail this attempt and retry no sooner than `after` (seconds or a timedelta, at most 7 days) — later if the
    type's backoff says so: a dependency said when to come back (an HTTP 429's Retry-After). The attempt is spent
    like any failure; the DLQ follows when none is left."""

    def __init__(self, after: float | timedelta, reason: str, *, result: Any = None) -> None:
        seconds = after.total_seconds() if isinstance(after, timedelta) else after
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not seconds >= 0:
            raise ValueError(f"a retry may come after 0 seconds or more (got {after!r})")
        self.after = timedelta(seconds=min(seconds, MAX_SNOOZE.total_seconds()))
        self.reason = reason
        self.result = result  # kept on the attempt's record, as a returned value would be
        super().__init__(reason)


class Cancel(Exception):
    """Stop the job for good: it ends `cancelled` with `reason` as its lastError, and is never retried."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


class GiveUp(Exception):
    """Fail without retrying: the job goes to the DLQ at once with `reason` as its lastError, whatever attempts
    it has left (a bad payload, a permanent refusal: retrying cannot help). `result`: kept on the attempt's
    record and the job, as a returned value would be."""

    def __init__(self, reason: str, *, result: Any = None) -> None:
        self.reason = reason
        self.result = result
        super().__init__(reason)


def jsonable_result(value: Any) -> Any:
    """A handler's return value as JSON data: a dataclass as its fields, a pydantic model as its JSON form,
    anything else as it is (the executor checks it is JSON a store can keep)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json", by_alias=True)
    return value
