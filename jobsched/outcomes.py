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

Raising anything else fails the attempt, which is retried with the type's backoff until its attempts are spent,
unless the type's registration names the exception as one to give up on (`give_up_on`, `retry_on`: RetryRule).
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Iterable
from datetime import timedelta
from typing import Any, Final, TypeAlias

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


ExceptionClasses: TypeAlias = tuple[type[BaseException], ...]
# What a registration's give_up_on / retry_on take: one exception class, or several (a tuple, a list ...).
ExceptionsArg: TypeAlias = type[BaseException] | Iterable[type[BaseException]]
# Raised by a handler to say what happens next: its own decision, never overruled by give_up_on / retry_on, so
# naming one there is a mistake (RetryAfter would be retried all the same, Snooze would still snooze).
DECIDED: Final = (Snooze, RetryAfter, Cancel, GiveUp)


@dataclasses.dataclass(frozen=True)
class RetryRule:
    """Which exceptions a job type's handler raises are retried, as registered with
    `jobs.handler(..., give_up_on=..., retry_on=...)`. An exception that is an instance of a `give_up_on` class
    gives up at once (the job to the DLQ, whatever attempts it has left); with `retry_on` set, so does any
    exception that is an instance of none of its classes. give_up_on wins where both match, so
    `retry_on=(OSError,), give_up_on=(FileNotFoundError,)` retries OSErrors but that one. The outcome
    exceptions (Snooze, RetryAfter, Cancel, GiveUp) are the handler's own decision and keep it; an attempt that
    overruns its timeout is no exception the handler raised, and is retried while attempts are left."""

    give_up_on: ExceptionClasses = ()
    retry_on: ExceptionClasses | None = None  # None: every exception is retried (but give_up_on's)

    @classmethod
    def of(cls, *, give_up_on: ExceptionsArg = (), retry_on: ExceptionsArg | None = None) -> RetryRule:
        """From a registration's arguments, checked: a TypeError for anything but exception classes, a
        ValueError for a rule that contradicts itself (an empty retry_on, a retry_on class that give_up_on
        already covers)."""
        gives_up = _exception_classes("give_up_on", give_up_on)
        retries = None if retry_on is None else _exception_classes("retry_on", retry_on)
        if retries is not None and not retries:
            # Nothing retried is surely not meant (a computed tuple that came out empty?): say so at import.
            raise ValueError(
                "retry_on=() would retry no exception: leave it out to retry them all, or set max_attempts=1"
            )
        for retried in retries or ():
            covering = next((c for c in gives_up if issubclass(retried, c)), None)
            if covering is not None:
                raise ValueError(
                    f"retry_on names {_name(retried)}, which give_up_on's {_name(covering)} gives up on: it would"
                    " never be retried"
                )
        return cls(gives_up, retries) if gives_up or retries is not None else RETRY_ALL

    def gives_up(self, exc: BaseException) -> str | None:
        """Why a handler that raised `exc` gives up at once ("ValueError is in give_up_on"), or None when the
        attempt is retried while attempts are left (exc is then a failure like any other)."""
        if not self.give_up_on and self.retry_on is None:
            return None  # the rule of most types: a failure is a failure (checked first: it is every failure's path)
        if isinstance(exc, DECIDED):
            return None
        raised = type(exc)
        if raised in self.give_up_on:
            return f"{_name(raised)} is in give_up_on"
        for cls in self.give_up_on:
            if isinstance(exc, cls):
                return f"{_name(raised)} is in give_up_on as {_name(cls)}"
        if self.retry_on is not None and not isinstance(exc, self.retry_on):
            return f"{_name(raised)} is not in retry_on"
        return None


RETRY_ALL: Final = RetryRule()  # what a registration without give_up_on or retry_on has


def _exception_classes(argument: str, value: object) -> ExceptionClasses:
    """`value` as a tuple of exception classes; a TypeError saying what is wrong with it otherwise."""
    if isinstance(value, type | BaseException):  # one class; or an exception, refused below with a hint
        value = (value,)
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise TypeError(f"{argument} takes exception classes (a class or a tuple of them), not {value!r}")
    classes = tuple(value)
    for cls in classes:
        if not (inspect.isclass(cls) and issubclass(cls, BaseException)):
            hint = " (an exception, not its class)" if isinstance(cls, BaseException) else ""
            raise TypeError(f"{argument} takes exception classes, not {cls!r}{hint}")
        if issubclass(cls, DECIDED):
            raise TypeError(
                f"{argument} cannot name {cls.__name__}: raising it is the handler's own decision, which stands"
            )
    return classes


def _name(cls: type[BaseException]) -> str:
    """A class as lastError names it: as `describe` names the exception (its __name__, not a test's
    `<locals>`-laden __qualname__)."""
    return cls.__name__


def jsonable_result(value: Any) -> Any:
    """A handler's return value as JSON data: a dataclass as its fields, a pydantic model as its JSON form,
    anything else as it is (the executor checks it is JSON a store can keep)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json", by_alias=True)
    return value
