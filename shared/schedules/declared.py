"""Schedules declared with the code (jobsched.schedules), kept in step with the store by the executors that serve
their job type (and `jobsched dev`), with each heartbeat's announcement.

When: only while every live executor of the type announces the same declarations (the digest it announces with
its type). Several executors of one version agree, so each may apply them: a creation is decided by the template's
idempotency key (one template, whoever writes first) and an update by a compare-and-set on the template, so none
is made twice. During a rolling deploy the old and the new version disagree and nothing changes; once the old
executors are gone (withdrawn, or their announcements expired), the new version applies its own. A version never
undoes another's change while both run, so nothing flip-flops, and a rollback is applied the same way.

What: a declared schedule with no template is created (marked declaredBy=code, with its declaration's digest); a
template whose digest differs is updated in place through the schedule engine (its last fire time is kept: no run
is lost or doubled); one of the type that the code no longer declares is reported, and paused or cancelled when
DECLARED_SCHEDULES_REMOVED says so. A template made through the API that holds a declared name is left alone and
reported.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from jobsched.schedules import DECLARED_IN_CODE, digest, digest_of_all
from shared.job_types.announcements import JobTypeRegistry
from shared.model import Job, Status
from shared.schedules.engine import ScheduleEngine
from shared.store import transitions
from shared.store.base import DuplicateJob, JobStore, NewJob, StoreError, TransitionRefused

log = logging.getLogger("jobsched.schedules")
# The fields a declaration sets: a template made from it and the declaration compare on these alone.
DECLARED_FIELDS = (
    "cron",
    "interval",
    "timezone",
    "payload",
    "priority",
    "maxAttempts",
    "timeoutSeconds",
    "overlap",
    "catchup",
    "catchupWindow",
    "jitter",
    "startAt",
    "endAt",
    "pauseOnFailure",
)
# The policy fields a declaration may set (as a template's body names them).
POLICY_FIELDS = ("overlap", "catchup", "catchupWindow", "jitter", "startAt", "endAt", "pauseOnFailure")
NOT_DECLARED_NOTE = "no longer declared in the code"
TEMPLATES_READ = 5000  # a type's templates in one tenant read to find the ones no longer declared


class WhenRemoved(StrEnum):
    """What happens to a declared template that the code no longer declares (DECLARED_SCHEDULES_REMOVED)."""

    KEEP = "keep"  # reported (logged) only: it keeps firing
    PAUSE = "pause"  # paused, with a note saying why
    CANCEL = "cancel"  # cancelled: it fires no more; its runs and history stay


@dataclass
class Reconciled:
    """What one pass did, by schedule name."""

    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)  # no longer declared (kept, paused or cancelled)
    conflicts: list[str] = field(default_factory=list)  # held by an API-made or finished template: left alone
    waiting: bool = False  # the type's live executors declare different schedules: nothing was changed


@dataclass(frozen=True)
class Declaration:
    """One declared schedule: its POST /jobs body, and the job that body makes (validated as the API does)."""

    body: dict[str, Any]
    new: NewJob

    @property
    def name(self) -> str:
        return self.new.idempotencyKey


class DeclaredSchedules:
    """The declarations of one job type, applied by one executor (`executor` as it announces itself)."""

    def __init__(
        self,
        store: JobStore,
        registry: JobTypeRegistry,
        job_type: str,
        declarations: Sequence[Declaration],
        templates_of: Callable[[str, str], list[Job]],
        *,
        executor: str,
        when_removed: WhenRemoved,
        tenants: Sequence[str],
    ) -> None:
        """`templates_of(tenant, job_type)`: that tenant's templates of the type; `tenants`: where to look for
        templates no longer declared (the declarations' tenants and the default one)."""
        self._store = store
        self._registry = registry
        self._job_type = job_type
        self._declarations = list(declarations)
        self._templates_of = templates_of
        self._executor = executor
        self._when_removed = when_removed
        self._tenants = sorted({*tenants, *(d.new.tenantId for d in declarations)})
        self._engine = ScheduleEngine(store)
        self.digest = digest_of_all(d.body for d in declarations)
        self._applied = False  # since the type's executors last agreed
        self._waiting = False

    def keep(self, now: datetime) -> Reconciled | None:
        """Apply the declarations if the type's live executors agree on them and this executor has not since
        they last came to agree; None when there was nothing to do. StoreError: tried again at the next beat."""
        live = [a for a in self._registry.announcements(self._job_type) if a.liveUntil > now]
        agreed = bool(live) and all(a.defaults.declared == self.digest for a in live)
        if not agreed:
            if self._applied or not self._waiting:  # said once per disagreement, not at every beat
                others = sorted({a.defaults.declared or "none" for a in live if a.executor != self._executor})
                log.info(
                    "declared schedules wait: the type's executors declare different schedules",
                    extra={"action": "schedules_waiting", "jobType": self._job_type, "declarations": others},
                )
            self._applied, self._waiting = False, True
            return Reconciled(waiting=True)
        self._waiting = False
        if self._applied:
            return None
        done = self.reconcile(now)
        self._applied = True
        return done

    def reconcile(self, now: datetime) -> Reconciled:
        done = Reconciled()
        for declaration in self._declarations:
            self._apply(declaration, now, done)
        self._remove_undeclared(now, done)
        log.info(
            "declared schedules reconciled",
            extra={"action": "schedules_reconciled", "jobType": self._job_type, **vars(done)},
        )
        return done

    def _apply(self, declaration: Declaration, now: datetime, done: Reconciled) -> None:
        wanted = digest(declaration.body)
        stored = self._store.job_by_key(declaration.new.tenantId, declaration.name)
        if stored is None:
            try:
                self._store.create(_declared(declaration.new, wanted))
                done.added.append(declaration.name)
                return
            except DuplicateJob:  # another executor of the same version made it first
                stored = self._store.job_by_key(declaration.new.tenantId, declaration.name)
                if stored is None:
                    raise StoreError(f"schedule {declaration.name!r} vanished while it was made") from None
        if stored.declaredBy != DECLARED_IN_CODE or stored.jobType != self._job_type or not stored.is_template:
            log.warning(
                "a declared schedule's name is held by another job: left alone",
                extra={"action": "schedule_conflict", "jobId": stored.id, "schedule": declaration.name},
            )
            done.conflicts.append(declaration.name)
        elif stored.declaration == wanted:
            done.unchanged.append(declaration.name)
        elif stored.status is not Status.PENDING:
            done.conflicts.append(declaration.name)  # cancelled or ended: an operator's decision stands
        else:
            self._update(stored, declaration.new, wanted, now)
            done.changed.append(declaration.name)

    def _update(self, stored: Job, new: NewJob, wanted: str, now: datetime) -> None:
        changes: dict[str, Any] = {
            name: transitions.UNSET if (value := getattr(new, name)) is None else value
            for name in DECLARED_FIELDS
            if getattr(new, name) != getattr(stored, name)
        }
        try:
            if changes:
                self._engine.update_template(stored, {**changes, "declaration": wanted}, now)
            elif self._store.update_if_unmoved(stored, {"declaration": wanted}) is None:
                raise TransitionRefused(stored, "change")
        except TransitionRefused:
            # It moved meanwhile: another executor of this version updated it, or the scheduler fired it; the next
            # pass (when the executors next come to agree) finds it as it is.
            self._applied = False

    def _remove_undeclared(self, now: datetime, done: Reconciled) -> None:
        declared = {(d.new.tenantId, d.name) for d in self._declarations}
        for tenant in self._tenants:
            for template in self._templates_of(tenant, self._job_type):
                if template.declaredBy != DECLARED_IN_CODE or (tenant, template.idempotencyKey) in declared:
                    continue
                if template.status is not Status.PENDING:
                    continue  # cancelled or ended already
                if self._when_removed is WhenRemoved.PAUSE and not template.paused:
                    self._engine.pause(template, NOT_DECLARED_NOTE, now)
                elif self._when_removed is WhenRemoved.CANCEL:
                    self._store.cancel(template.id)
                log.warning(
                    "a declared schedule is no longer declared in the code",
                    extra={
                        "action": "schedule_not_declared",
                        "jobId": template.id,
                        "schedule": template.idempotencyKey,
                        "done": self._when_removed.value,
                    },
                )
                done.removed.append(template.idempotencyKey)


def _declared(new: NewJob, wanted: str) -> NewJob:
    fields = {**new.__dict__, "declaredBy": DECLARED_IN_CODE, "declaration": wanted}
    return NewJob(**fields)
