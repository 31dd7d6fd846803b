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

import contextlib
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import StrEnum
from functools import partial
from typing import Any

from jobsched.schedules import DECLARED_IN_CODE, digest, digest_of_all
from jobsched.type_defaults import TypeDefaults
from shared.job_requests import JobRequest
from shared.job_types.announcements import JobTypeRegistry
from shared.model import Job, Status, format_time
from shared.schedules.engine import ScheduleEngine
from shared.schedules.spec import NoFireTime
from shared.store import transitions
from shared.store.base import ApiStore, DuplicateJob, JobStore, NewJob, StoreError, TransitionRefused

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
NOT_DECLARED_NOTE = "no longer declared (dropped from its code or file)"
TEMPLATES_READ = 5000  # a type's templates in one tenant read to find the ones no longer declared
RECHECK = timedelta(minutes=1)  # how often executors that agree check that the store still holds what they declare


class WhenRemoved(StrEnum):
    """What happens to a declared template that the code no longer declares (DECLARED_SCHEDULES_REMOVED)."""

    KEEP = "keep"  # reported (logged) only: it keeps firing
    PAUSE = "pause"  # paused, with a note saying why
    CANCEL = "cancel"  # cancelled: it fires no more; its runs and history stay


@dataclass
class Reconciled:
    """What one pass did (or, dry, would do), by schedule name; `changes`: per changed schedule, each field that
    differs as [stored, declared]."""

    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)  # no longer declared (kept, paused or cancelled)
    conflicts: list[str] = field(default_factory=list)  # held by another template, or a cancelled one
    ended: list[str] = field(default_factory=list)  # no fire time left (its template completed, or none is made)
    resumed: list[str] = field(default_factory=list)  # paused when the code dropped it, declared again
    waiting: bool = False  # the type's live executors declare different schedules: nothing was changed
    changes: dict[str, dict[str, list[Any]]] = field(default_factory=dict)


@dataclass(frozen=True)
class Declaration:
    """One declared schedule: its body as POST /jobs takes it (what its digest is of), and how to make its template
    as of a time (validated as the API validates one; NoFireTime once its bounds leave it no fire time)."""

    body: dict[str, Any]
    build: Callable[[datetime], NewJob]

    @property
    def name(self) -> str:
        return str(self.body["idempotencyKey"])

    @property
    def tenant(self) -> str:
        return str(self.body["tenantId"])

    @property
    def job_type(self) -> str:
        return str(self.body["jobType"])


def checked_declaration(body: dict[str, Any], type_defaults: TypeDefaults | None, now: datetime) -> Declaration:
    """`body` checked as POST /jobs checks a template: pydantic's ValidationError or ScheduleError when it would
    be refused. A schedule whose bounds leave it no fire time passes: it has ended (Reconciler says so). Its
    template is made with `type_defaults` (its type's: None, a type not known yet) as POST /jobs makes one."""
    request = JobRequest.model_validate(body)
    build = partial(request.to_new_job, type_defaults=type_defaults)
    with contextlib.suppress(NoFireTime):
        build(now)
    return Declaration(body, build)


class Reconciler:
    """Makes the store hold what a set of declarations says, for declarations from one origin (`code`, `file`):
    templates of that origin in `present` (the scope: a job type's, a tenant's) that are not declared are the
    removed ones."""

    def __init__(self, store: ApiStore, origin: str, when_removed: WhenRemoved) -> None:
        self._store = store
        self._origin = origin
        self._when_removed = when_removed
        self._engine = ScheduleEngine(store)

    def reconcile(
        self, declarations: Sequence[Declaration], present: Iterable[Job], now: datetime, *, write: bool = True
    ) -> Reconciled:
        """Apply the declarations (without `write`: only say what applying them would do)."""
        done = Reconciled()
        for declaration in declarations:
            self._apply(declaration, now, done, write)
        declared = {(d.tenant, d.name) for d in declarations}
        for template in present:
            if template.declaredBy != self._origin or (template.tenantId, template.idempotencyKey) in declared:
                continue
            if template.status is Status.PENDING:  # cancelled or ended already: nothing left to do
                self._remove(template, now, write)
                done.removed.append(template.idempotencyKey)
        return done

    def _apply(self, declaration: Declaration, now: datetime, done: Reconciled, write: bool) -> None:
        wanted = digest(declaration.body)
        stored = self._store.job_by_key(declaration.tenant, declaration.name)
        if stored is None:
            try:
                new = declaration.build(now)
            except NoFireTime:
                done.ended.append(declaration.name)  # nothing would ever fire: nothing to make
                return
            if not write:
                done.added.append(declaration.name)
                return
            try:
                self._store.create(replace(new, declaredBy=self._origin, declaration=wanted))
                done.added.append(declaration.name)
                return
            except DuplicateJob:  # another executor of the same version made it first
                stored = self._store.job_by_key(declaration.tenant, declaration.name)
                if stored is None:
                    raise StoreError(f"schedule {declaration.name!r} vanished while it was made") from None
        if stored.declaredBy != self._origin or stored.jobType != declaration.job_type or not stored.is_template:
            log.warning(
                "a declared schedule's name is held by another job: left alone",
                extra={"action": "schedule_conflict", "jobId": stored.id, "schedule": declaration.name},
            )
            done.conflicts.append(declaration.name)
            return
        if stored.status is Status.COMPLETED:
            done.ended.append(declaration.name)  # it reached its end (endAt, remainingRuns)
            return
        if stored.status is not Status.PENDING:
            done.conflicts.append(declaration.name)  # cancelled: an operator's decision stands
            return
        resumed = stored.paused and stored.pauseNote == NOT_DECLARED_NOTE  # paused when dropped, declared again
        if resumed:
            if write:
                stored = self._engine.resume(stored, now)
            done.resumed.append(declaration.name)
        if stored.declaration == wanted:
            if not resumed:  # a resumed one is counted once, as resumed (and as changed, when it changed too)
                done.unchanged.append(declaration.name)
            return
        try:
            new = declaration.build(now)
        except NoFireTime:
            done.ended.append(declaration.name)  # its new bounds end it: the scheduler completes it
            return
        differs = [n for n in DECLARED_FIELDS if getattr(new, n) != getattr(stored, n)]
        done.changes[declaration.name] = {n: [_shown(getattr(stored, n)), _shown(getattr(new, n))] for n in differs}
        done.changed.append(declaration.name)
        if write:
            self._update(stored, new, differs, wanted, now)

    def _update(self, stored: Job, new: NewJob, differs: list[str], wanted: str, now: datetime) -> None:
        changes = {n: transitions.UNSET if (value := getattr(new, n)) is None else value for n in differs}
        if new.backoff != stored.backoff:  # the type's, which no declaration states: resolved anew, as maxAttempts
            changes["backoff"] = new.backoff or transitions.UNSET
        if changes:
            self._engine.update_template(stored, {**changes, "declaration": wanted}, now)
        elif self._store.update_if_unmoved(stored, {"declaration": wanted}) is None:
            raise TransitionRefused(stored, "change")

    def _remove(self, template: Job, now: datetime, write: bool) -> None:
        if write and self._when_removed is WhenRemoved.PAUSE and not template.paused:
            self._engine.pause(template, NOT_DECLARED_NOTE, now)
        elif write and self._when_removed is WhenRemoved.CANCEL:
            self._store.cancel(template.id)
        log.warning(
            "a declared schedule is no longer declared",
            extra={
                "action": "schedule_not_declared",
                "jobId": template.id,
                "schedule": template.idempotencyKey,
                "done": self._when_removed.value if write else "nothing (dry run)",
            },
        )


class DeclaredSchedules:
    """The declarations of one job type in the code, applied by one executor (`executor` as it announces itself)
    while the type's live executors agree on them."""

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
        tenant: str,
    ) -> None:
        """`templates_of(tenant, job_type)`: that tenant's templates of the type; `tenant`: the declarations'
        (where templates no longer declared are looked for)."""
        self._registry = registry
        self._job_type = job_type
        self._declarations = list(declarations)
        self._templates_of = templates_of
        self._executor = executor
        self._tenant = tenant
        self._reconciler = Reconciler(store, DECLARED_IN_CODE, when_removed)
        self.digest = digest_of_all(d.body for d in declarations)
        self._applied_at: datetime | None = None  # since the type's executors last agreed
        self._waiting = False
        self._store = store
        self._schema_ensured = False

    def keep(self, now: datetime) -> Reconciled | None:
        """Apply the declarations if the type's live executors agree on them, when they come to agree and every
        RECHECK while they do (what an old version wrote as it stopped, or an operator changed, is put back); None
        when there was nothing to do. StoreError: tried again at the next beat."""
        live = [a for a in self._registry.announcements(self._job_type) if a.liveUntil > now]
        agreed = bool(live) and all(a.defaults.declared == self.digest for a in live)
        if not agreed:
            if self._applied_at is not None or not self._waiting:  # said once per disagreement, not at every beat
                others = sorted({a.defaults.declared or "none" for a in live if a.executor != self._executor})
                log.info(
                    "declared schedules wait: the type's executors declare different schedules",
                    extra={"action": "schedules_waiting", "jobType": self._job_type, "declarations": others},
                )
            self._applied_at, self._waiting = None, True
            return Reconciled(waiting=True)
        self._waiting = False
        if self._applied_at is not None and now - self._applied_at < RECHECK:
            return None
        done = self.reconcile(now)
        self._applied_at = now
        return done

    def reconcile(self, now: datetime) -> Reconciled:
        if not self._schema_ensured:
            # Executors may start on a database no API has prepared yet (a fresh install, every pod at once):
            # without the unique index, two executors of one version would each make the same template, and
            # the scheduler would fire both.
            self._store.ensure_schema()
            self._schema_ensured = True
        present = self._templates_of(self._tenant, self._job_type)
        try:
            done = self._reconciler.reconcile(self._declarations, present, now)
        except TransitionRefused:
            # A template moved meanwhile (another executor of this version updated it, or the scheduler fired it):
            # the next beat looks again.
            self._applied_at = None
            raise StoreError("a declared schedule moved while it was updated; trying again") from None
        log.info(
            "declared schedules reconciled",
            extra={"action": "schedules_reconciled", "jobType": self._job_type, "reconciled": vars(done)},
        )
        return done


def _shown(value: Any) -> Any:
    return format_time(value) if isinstance(value, datetime) else value
