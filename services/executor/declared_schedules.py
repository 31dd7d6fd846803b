"""The declared schedules of a job type an executor serves, checked as the API checks a template at start-up (a
declaration the API would refuse stops the executor with the reason, as a bad handler module does), and the
announcement that carries their digest (shared/schedules/declared.py says how they are kept)."""

from __future__ import annotations

from dataclasses import replace

from jobsched.handlers import JobType
from services.executor.announcer import TypeAnnouncer
from shared.backends import Backend
from shared.config import ConfigError, Settings
from shared.cron import ScheduleError
from shared.model import DEFAULT_PRIORITY, Job, effective_max_attempts, utc_now
from shared.schedules.declared import POLICY_FIELDS, TEMPLATES_READ, Declaration, DeclaredSchedules, WhenRemoved
from shared.schedules.spec import new_template
from shared.store.browse import JobQuery


def declarations(job_type: JobType[object, object], tenant_id: str) -> list[Declaration]:
    """The type's declared schedules, each checked as a template made through the API is (ConfigError: which one,
    and why)."""
    checked = []
    now = utc_now()
    for schedule, body in zip(job_type.schedules, job_type.declared(tenant_id), strict=True):
        own = {
            "idempotencyKey": body["idempotencyKey"],
            "tenantId": body["tenantId"],
            "jobType": job_type.name,
            "payload": body["payload"],
            "priority": body.get("priority", DEFAULT_PRIORITY),
            "maxAttempts": effective_max_attempts(schedule.max_attempts, job_type.defaults.max_attempts),
            "timeoutSeconds": body.get("timeoutSeconds"),
        }
        policy = {name: body[name] for name in POLICY_FIELDS if name in body}
        policy.update({k: v for k, v in (("startAt", schedule.start_at), ("endAt", schedule.end_at)) if v is not None})
        try:
            new = new_template(
                own, cron=schedule.cron, interval=schedule.interval, timezone=schedule.timezone, policy=policy, now=now
            )
        except (ScheduleError, TypeError, ValueError) as exc:
            raise ConfigError(f"schedule {schedule.name!r} of job type {job_type.name!r}: {exc}") from None
        checked.append(Declaration(body, new))
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
        tenants=[settings.declared_schedules_tenant],
    )
    defaults = replace(job_type.defaults, declared=keeper.digest)
    return TypeAnnouncer(
        backend.job_types, executor_id, {job_type.name: defaults}, settings.executor_heartbeat, schedules=keeper
    )
