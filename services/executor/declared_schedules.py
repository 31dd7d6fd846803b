"""The declared schedules of a job type an executor serves, checked as the API checks a template at start-up (a
declaration the API would refuse stops the executor with the reason, as a bad handler module does), and the
announcement that carries their digest (shared/schedules/declared.py says how they are kept)."""

from __future__ import annotations

from dataclasses import replace

from pydantic import ValidationError

from jobsched.handlers import JobType
from services.executor.announcer import TypeAnnouncer
from shared.backends import Backend
from shared.config import ConfigError, Settings
from shared.cron import ScheduleError
from shared.job_requests import describe
from shared.model import Job, utc_now
from shared.schedules.declared import (
    TEMPLATES_READ,
    Declaration,
    DeclaredSchedules,
    WhenRemoved,
    checked_declaration,
)
from shared.store.browse import JobQuery


def declarations(job_type: JobType[object, object], tenant_id: str) -> list[Declaration]:
    """The type's declared schedules, each checked as the API checks a template (ConfigError: which one, and why)."""
    checked = []
    for body in job_type.declared(tenant_id):
        where = f"schedule {body['idempotencyKey']!r} of job type {job_type.name!r}"
        try:
            checked.append(checked_declaration(body, job_type.defaults, utc_now()))
        except ValidationError as exc:
            raise ConfigError(f"{where}: {describe(exc)}") from None
        except ScheduleError as exc:
            raise ConfigError(f"{where}: {exc}") from None
    return checked


def announcer_with_schedules(
    backend: Backend, executor_id: str, job_type: JobType[object, object], settings: Settings
) -> TypeAnnouncer:
    """The executor's announcer for `job_type`: it announces the type's defaults with its declarations' digest,
    and keeps the declared schedules with each beat."""

    def templates_of(tenant_id: str, name: str) -> list[Job]:
        return backend.browser.page(tenant_id, JobQuery(jobType=name, templates=True, limit=TEMPLATES_READ))

    keeper = DeclaredSchedules(
        backend.jobs,
        backend.job_types,
        job_type.name,
        declarations(job_type, settings.declared_schedules_tenant),
        templates_of,
        executor=executor_id,
        when_removed=WhenRemoved(settings.declared_schedules_removed),
        tenant=settings.declared_schedules_tenant,
    )
    defaults = replace(job_type.defaults, declared=keeper.digest)
    return TypeAnnouncer(
        backend.job_types, executor_id, {job_type.name: defaults}, settings.executor_heartbeat, schedules=keeper
    )
