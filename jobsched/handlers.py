"""Job types: a name, the handler that runs it, and the type's defaults, collected in a JobTypes.

    jobs = jobsched.JobTypes()

    @jobs.handler("write-report", timeout=60, max_attempts=5)
    def write_report(report: Report, ctx: jobsched.HandlerContext) -> None: ...

A handler takes the job's payload and a HandlerContext; it may be a plain or an async function, and signals
failure by raising. The decorator returns a JobType, which is still the function (call it as before) and is
what typed enqueueing takes: `client.enqueue(write_report, Report(...))` is checked against the handler's
payload type. Naming a type twice in one collection raises, so a bad deploy fails at start-up instead of
silently running the wrong code under one name.
"""

from __future__ import annotations

import inspect
import logging
import threading
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Generic, NamedTuple, TypeVar, overload

from jobsched.backoff import Backoff
from jobsched.limits import Limits
from jobsched.outcomes import RETRY_ALL, RetryRule
from jobsched.payloads import Payload, PayloadType, called_function, decoded
from jobsched.schedules import Schedule
from jobsched.type_defaults import TypeDefaults

P = TypeVar("P")
R = TypeVar("R")
T = TypeVar("T")


class JobLogger(logging.LoggerAdapter[logging.Logger]):
    """A logger that adds the job's ids to every record, merged with the caller's own `extra`."""

    def process(self, msg: Any, kwargs: MutableMapping[str, Any]) -> tuple[Any, MutableMapping[str, Any]]:
        kwargs["extra"] = {**(self.extra or {}), **(kwargs.get("extra") or {})}
        return msg, kwargs


@dataclass(frozen=True)
class BatchProgress:
    """A batch as its callback sees it (ctx.batch()): its status (succeeded, failed; running or open before it
    fired), its members counted by status, and how many there are."""

    batch_id: str
    status: str
    total: int
    counts: Mapping[str, int]


class BatchMember(NamedTuple):
    """A member of a batch as its callback reads it (ctx.batch_results()): its job's id, status and result."""

    job_id: str
    status: str
    result: Any


class ParentResult(NamedTuple):
    """What a job that another waited for returned (at its last attempt that kept a result: None if none), and its
    step's name when it is a step of a workflow."""

    step: str | None
    result: Any


@dataclass(frozen=True)
class HandlerContext:
    """What a handler knows about the attempt it runs.

    `cancelled` is set when the job is cancelled while it runs (DELETE /jobs/{id}): a plain function should
    check it between steps and stop by raising; an async handler's task is also cancelled. A handler that
    ignores it and finishes has its result recorded all the same."""

    job_id: str
    job_type: str
    attempt: int  # this attempt's number, from 1
    deadline: datetime
    tenant_id: str
    # When this attempt was due: the job's scheduledAt, which a retry moves to the end of its backoff.
    scheduled_at: datetime
    logger: logging.LoggerAdapter[logging.Logger]
    cancelled: threading.Event
    # A run of a recurring template: the fire time it runs for (the night a nightly report covers, whatever
    # retries or catch-up moved its start to) and the template's id; None for a one-off job.
    planned_at: datetime | None = None
    template_id: str | None = None
    # Where report_progress's values go: the executor keeps the last one for its next heartbeat to write.
    on_progress: Callable[[Any], None] = field(default=lambda value: None, repr=False, compare=False)
    # The jobs this one waited for (its dependsOn, in order), and where their results are read from: once, when
    # the handler first asks (parent_results, step_results).
    parents: tuple[str, ...] = ()
    read_results: Callable[[Sequence[str]], Mapping[str, ParentResult]] = field(
        default=lambda ids: {}, repr=False, compare=False
    )
    _results: dict[str, ParentResult] | None = field(default=None, init=False, repr=False, compare=False)
    # A batch's callback: the batch it runs for, and where the batch and its members are read from.
    batch_id: str | None = None
    read_batch: Callable[[str], BatchProgress] | None = field(default=None, repr=False, compare=False)
    read_members: Callable[[str, BatchMember | None, int], Sequence[BatchMember]] | None = field(
        default=None, repr=False, compare=False
    )

    def report_progress(self, value: Any) -> None:
        """How far this attempt has come, for whoever watches the job: a small JSON value (a dataclass or a
        pydantic model too; at most 4 KiB), e.g. {"done": 120, "of": 1000}. Cheap to call often: the executor
        writes the last report of each running attempt once a heartbeat, as the job's `progress`."""
        self.on_progress(value)

    def parent_results(self) -> dict[str, Any]:
        """What each job this one waited for (`dependsOn`) returned at its last attempt that kept a result, by
        the parent's id in dependsOn's order (None for a parent that returned nothing, or was deleted since);
        empty for a job without parents. Read from the store at the first call, in one read for all of them (a
        fan-in of 100 parents too), and kept for the attempt."""
        return {parent: read.result for parent, read in self._parents().items()}

    def step_results(self) -> dict[str, Any]:
        """parent_results for a step of a workflow, by its parent steps' names (those of its `after`), read the
        same way; a parent that is no step (or was deleted since) is left out."""
        return {read.step: read.result for read in self._parents().values() if read.step is not None}

    @overload
    def step_result(self, step: str) -> Any: ...

    @overload
    def step_result(self, step: str, as_type: type[T]) -> T: ...

    def step_result(self, step: str, as_type: type[Any] | None = None) -> Any:
        """What the parent step `step` returned (step_results), as `as_type` when given: a dataclass or a pydantic
        model is built from the stored JSON, as a handler's payload is (PayloadMismatch when it does not fit, which
        fails the attempt). KeyError for a step that is not a parent of this one."""
        results = self.step_results()
        if step not in results:
            raise KeyError(f"{step!r} is not a step this one waited for; its parent steps: {sorted(results)}")
        return results[step] if as_type is None else decoded(as_type, results[step])

    def batch(self) -> BatchProgress:
        """For a batch's callback (onComplete, onSuccess): the batch's counts as they are now (read from the
        store at each call). LookupError for a job that is no batch's callback."""
        if self.batch_id is None or self.read_batch is None:
            raise LookupError(f"job {self.job_id} is no batch's callback")
        return self.read_batch(self.batch_id)

    def batch_results(self, page: int = 1000) -> Iterator[BatchMember]:
        """For a batch's callback: every member with its status and result, read from the store `page` members
        at a time as the iteration goes (a batch of 100,000 is never in memory at once), by status then id.
        LookupError for a job that is no batch's callback."""
        if self.batch_id is None or self.read_members is None:
            raise LookupError(f"job {self.job_id} is no batch's callback")
        if page < 1:
            raise ValueError(f"page: {page}; members are read at least one at a time")
        after: BatchMember | None = None
        while chunk := self.read_members(self.batch_id, after, page):
            yield from chunk
            after = chunk[-1]

    def _parents(self) -> dict[str, ParentResult]:
        if self._results is None:
            found = self.read_results(self.parents) if self.parents else {}
            read = {parent: found.get(parent) or ParentResult(None, None) for parent in self.parents}
            object.__setattr__(self, "_results", read)
        assert self._results is not None
        return self._results


# What the executors call: the stored payload (a JSON object) and the context.
HandlerFn = Callable[[Payload, HandlerContext], Any] | Callable[[Payload, HandlerContext], Awaitable[Any]]


class HandlerError(Exception):
    """A handler's own, expected failure (bad payload, a dependency said no); recorded as lastError."""


class DuplicateHandler(Exception):
    def __init__(self, name: str, first: str, second: str) -> None:
        super().__init__(f"handler {name!r} is registered twice (by {first} and by {second})")
        self.name = name


@dataclass(frozen=True, eq=False)
class JobType(Generic[P, R]):
    """A job type: its name, its handler and its defaults. Calling it calls the handler."""

    name: str
    function: Callable[[P, HandlerContext], R]
    defaults: TypeDefaults = field(default_factory=TypeDefaults)
    schedules: tuple[Schedule, ...] = ()  # recurring templates declared with the type (jobsched.schedules)
    # Which of the handler's exceptions give up at once rather than being retried (give_up_on, retry_on). Only
    # the executors that run the handler apply it, so unlike `defaults` it is not announced to the store.
    retry_rule: RetryRule = RETRY_ALL
    payload: PayloadType[P] = field(init=False, repr=False)
    # Read per attempt by the executors: found once, at registration.
    is_async: bool = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "payload", PayloadType(self.function))
        object.__setattr__(self, "is_async", is_async_callable(self.function))

    def __call__(self, payload: P, ctx: HandlerContext) -> R:
        return self.function(payload, ctx)

    @property
    def module(self) -> str:
        return getattr(self.function, "__module__", "?")

    @property
    def fn(self) -> HandlerFn:
        """The handler as the executors call it: with the stored payload, converted first where the handler
        takes a dataclass or a model (a payload that does not fit raises PayloadMismatch, failing the attempt)."""
        if not self.payload.converts:
            return self.function  # type: ignore[return-value]
        decode, function = self.payload.decode, self.function
        if self.is_async:

            async def decoded_async(payload: Payload, ctx: HandlerContext) -> Any:
                return await function(decode(payload), ctx)  # type: ignore[misc]

            return decoded_async

        def decoded(payload: Payload, ctx: HandlerContext) -> Any:
            return function(decode(payload), ctx)

        return decoded

    def encode(self, payload: P) -> Payload:
        """The JSON object to enqueue for `payload` (a TypeError when it is not of the handler's type)."""
        return self.payload.encode(payload)

    def declared(self, tenant_id: str) -> list[dict[str, Any]]:
        """The schedules declared with the type, as POST /jobs bodies of `tenant_id`'s templates."""
        return [
            s.body(self.name, tenant_id, {} if s.payload is None else self.encode(s.payload)) for s in self.schedules
        ]


class JobTypes:
    """A collection of job types, named by `JOBSCHED_HANDLERS=myapp.jobs:jobs` (or an entry point) to be run."""

    def __init__(self, types: Iterable[JobType[Any, Any]] = ()) -> None:
        self._types: dict[str, JobType[Any, Any]] = {}
        self._lock = threading.RLock()
        self.include(types)

    def handler(
        self,
        name: str,
        *,
        timeout: float | timedelta | None = None,
        max_attempts: int | None = None,
        backoff: Backoff | None = None,
        schedule: Schedule | Iterable[Schedule] = (),
        limits: Limits | None = None,
        # Spelled out rather than as outcomes.ExceptionsArg: the reference page shows the annotations as written.
        give_up_on: type[BaseException] | Iterable[type[BaseException]] = (),
        retry_on: type[BaseException] | Iterable[type[BaseException]] | None = None,
    ) -> Callable[[Callable[[P, HandlerContext], R]], JobType[P, R]]:
        """Register the decorated function as job type `name`. `timeout` (seconds, or a timedelta) bounds each
        attempt (default JOB_TIMEOUT); `max_attempts` is the budget of jobs that give none (default 3);
        `backoff` spaces the retries (default waits 2, 4, 8 … s, capped at 5 min: jobsched.Backoff). A job's own
        timeoutSeconds and maxAttempts win over these; a job keeps the budget and backoff its type had when it
        was created. `schedule`: one or more recurring templates of this type, kept in the store by the executors
        that serve it (jobsched.Schedule). `limits`: how many of its jobs run at once and how often one starts,
        across the cluster (jobsched.Limits; an operator may replace them through the API). `give_up_on`:
        exception classes (subclasses match) that send the job to the DLQ at once instead of being retried;
        `retry_on`: when given, the only exception classes retried, any other gives up (give_up_on wins where
        both match)."""
        check_name(name)
        if limits is not None and not isinstance(limits, Limits):
            raise TypeError(f"limits must be a jobsched.Limits (got {limits!r})")
        defaults = TypeDefaults.of(timeout=timeout, max_attempts=max_attempts, backoff=backoff, limits=limits)
        retry_rule = RetryRule.of(give_up_on=give_up_on, retry_on=retry_on)
        schedules = (schedule,) if isinstance(schedule, Schedule) else tuple(schedule)
        names = [s.name for s in schedules]
        if len(set(names)) != len(names):
            raise ValueError(f"job type {name!r} declares a schedule name twice: {sorted(names)}")

        def decorate(function: Callable[[P, HandlerContext], R]) -> JobType[P, R]:
            job_type = JobType(name, function, defaults, schedules, retry_rule)
            self.include([job_type])
            return job_type

        return decorate

    def include(self, types: Iterable[JobType[Any, Any]]) -> None:
        """Add `types` (another JobTypes, or JobType objects): all of them, or none when a name is taken."""
        adding = list(types)
        with self._lock:
            seen: dict[str, JobType[Any, Any]] = {}
            for job_type in adding:
                existing = self._types.get(job_type.name) or seen.get(job_type.name)
                if existing is not None and existing is not job_type:
                    raise DuplicateHandler(job_type.name, existing.module, job_type.module)
                seen[job_type.name] = job_type
            self._types.update(seen)

    def get(self, name: str) -> JobType[Any, Any] | None:
        return self._types.get(name)

    def __getitem__(self, name: str) -> JobType[Any, Any]:
        return self._types[name]

    def names(self) -> list[str]:
        return sorted(self._types)

    def __contains__(self, name: object) -> bool:
        return name in self._types

    def __iter__(self) -> Iterator[JobType[Any, Any]]:
        return iter(list(self._types.values()))

    def __len__(self) -> int:
        return len(self._types)

    def __repr__(self) -> str:
        return f"JobTypes({', '.join(self.names())})"


def is_async_callable(function: Callable[..., Any]) -> bool:
    """Whether calling `function` gives a coroutine to await: an async function, also behind a partial or a
    decorator that kept `__wrapped__`, or an object whose `__call__` is async."""
    return inspect.iscoroutinefunction(called_function(function))


def not_a_coroutine(result: Any, job_type: str) -> Any:
    """A plain handler's result, refused when it is a coroutine: the handler is async behind something that hid
    it (a decorator without functools.wraps), and its body never ran."""
    if inspect.iscoroutine(result):
        result.close()
        raise TypeError(
            f"handler {job_type!r} returned a coroutine without being async (a decorator that hides it?): its body"
            " did not run"
        )
    return result


def check_name(name: object) -> None:
    if not isinstance(name, str) or not name.strip() or name != name.strip():
        raise ValueError(f"a job type name must be a non-empty string without surrounding spaces, not {name!r}")
