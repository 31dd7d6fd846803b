"""An executor built from the settings, as `jobsched executor` runs one and the embedded node one per job type: the
same handlers, timeouts, lease, limits, concurrency and heartbeat in both. What differs between them (the bus, how
the type's topic is made ready, when the announcer is built, the worker id) is the caller's."""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import partial

from jobsched.handlers import JobTypes
from services.executor.announcer import TypeAnnouncer
from services.executor.attempt_runner import AttemptRunner
from services.executor.executor import Executor
from shared.backends import Backend
from shared.bus.base import Bus, Subscription
from shared.config import Settings
from shared.http_jobs.job_type import http_job_types
from shared.http_jobs.request import JOB_TYPE as HTTP_JOB_TYPE
from shared.job_types.limits import LimitsView
from shared.nudge import NudgeSender


def with_http_jobs(handlers: JobTypes, settings: Settings, backend: Backend) -> JobTypes:
    """`handlers` and the `http` type beside them (served in every mode), unless they bring their own: it signs
    with the secrets the backend keeps, and fills in the credentials it keeps."""
    if HTTP_JOB_TYPE in handlers:
        return handlers
    return JobTypes([*handlers, *http_job_types(settings, backend.signing_secrets, backend.credentials)])


def attempt_runner(
    settings: Settings,
    backend: Backend,
    bus: Bus,
    handlers: JobTypes,
    job_type: str,
    worker_id: str,
    limits: LimitsView | None = None,
    nudge: Callable[[], None] | None = None,
    room_freed: Callable[[], None] = lambda: None,
) -> AttemptRunner:
    """What `job_type`'s executor does with each wake-up; `limits`: the process's view of the types' limits (one
    for all the executors of a process; default: a view of this executor's own); `nudge`: the scheduler's, called
    when an outcome ended a job others waited for (default: a datagram to NUDGE_TARGETS, if any); `room_freed`:
    the scheduler's, when it runs in this process (AttemptRunner's on_room)."""
    if limits is None:
        limits = LimitsView(backend.job_types, retention=settings.job_type_retention)
    return AttemptRunner(
        backend.jobs,
        bus,
        handlers,
        job_type,
        worker_id,
        default_timeout=settings.job_timeout,
        lease=settings.claim_timeout,
        limits=partial(limits.in_force, job_type),
        on_dependents=nudge or (NudgeSender(settings.nudge_targets) if settings.nudge_targets else lambda: None),
        on_room=room_freed,
    )


def executor(
    attempts: AttemptRunner,
    subscription: Subscription,
    settings: Settings,
    backend: Backend,
    *,
    stop: threading.Event,
    announcer: TypeAnnouncer,
) -> Executor:
    """The executor loop of `attempts`' type on `subscription` (its type's wake-ups), until `stop` is set."""
    return Executor(
        attempts,
        subscription,
        backend.jobs,
        concurrency=settings.executor_concurrency,
        lease=settings.claim_timeout,
        stop=stop,
        heartbeat=settings.executor_heartbeat,
        announcer=announcer,
    )
