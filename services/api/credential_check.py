"""The API's job store with one more rule: an http job's payload that names a credential (credential_refs.py) is
written only if its tenant has that credential, so a job that would fail at its first send for want of it is a
400 at once (`payload.headers.Authorization: no credential named 'billing-token'`).

The rule sits at the store, where every route's write goes (a job, a batch, schedules applied from a file, a
PATCH of a job or a template, a trigger with its own payload), rather than in each route: a write path added
later is checked without knowing of it. It is inside the tenant guard (create_app), so a request for another
tenant is refused as such before a credential of that tenant is looked for. A credential deleted after the job
was stored fails its attempt instead (credential_filling.py). Payloads that name none cost nothing more.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from shared.http_jobs.credential_refs import referenced
from shared.http_jobs.credentials import Credentials
from shared.http_jobs.request import JOB_TYPE as HTTP_JOB_TYPE
from shared.model import Job
from shared.schedules.workflow_runs import WORKFLOW_SCHEDULE
from shared.store.base import JobRefused, JobStore, NewJob, NewWorkflow, RunSpec, StoreError
from shared.workflows import WorkflowView


class CredentialMissing(JobRefused):
    """A payload names a credential its tenant does not have (HTTP 400, as every JobRefused)."""

    def __init__(self, message: str) -> None:
        StoreError.__init__(self, message)  # the message as it is: it names the field, for the client


class CredentialsChecked:
    """`store`, its payload writes checked against `credentials`; everything else passed through."""

    def __init__(self, store: JobStore, credentials: Credentials) -> None:
        self._store = store
        self._credentials = credentials

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def create(self, new: NewJob) -> Job:
        if new.jobType == WORKFLOW_SCHEDULE:  # a schedule firing a workflow: its steps, each time it fires
            steps = new.payload["steps"]
            self._check_steps(new.tenantId, [(step["name"], step["jobType"], step["payload"]) for step in steps])
        else:
            self.check(new.tenantId, new.jobType, new.payload)
        return self._store.create(new)

    def create_many(self, news: Sequence[NewJob]) -> list[Job | StoreError]:
        """Each job refused on its own, as the store refuses one: the others are written. One look-up per tenant
        for the whole batch (a batch of a thousand jobs naming credentials is not a thousand reads)."""
        named = {i: _names(new.jobType, new.payload) for i, new in enumerate(news)}
        wanted: dict[str, set[str]] = {}
        for index, names in named.items():
            wanted.setdefault(news[index].tenantId, set()).update(names.values())
        missing = {tenant: self._credentials.store.missing(tenant, names) for tenant, names in wanted.items() if names}
        refused: dict[int, StoreError] = {}
        for index, names in named.items():
            if (refusal := _refusal(names, missing.get(news[index].tenantId, set()))) is not None:
                refused[index] = refusal
        kept = [new for index, new in enumerate(news) if index not in refused]
        written = iter(self._store.create_many(kept) if kept else [])
        return [refused[index] if index in refused else next(written) for index in range(len(news))]

    def create_workflow(self, new: NewWorkflow) -> WorkflowView:
        self._check_steps(new.tenantId, [(step.name, step.job.jobType, step.job.payload) for step in new.steps])
        return self._store.create_workflow(new)

    def _check_steps(self, tenant_id: str, steps: list[tuple[str, str, Any]]) -> None:
        """check() for each (name, job type, payload) of a workflow's steps, the refusal naming the step."""
        for name, job_type, payload in steps:
            try:
                self.check(tenant_id, job_type, payload)
            except CredentialMissing as exc:
                raise CredentialMissing(f"steps: {name!r}: {exc}") from None

    def add_run(self, template: Job, run: RunSpec) -> tuple[Job, bool]:
        if run.payload is not None:  # a trigger's own payload; the template's own was checked when written
            self.check(template.tenantId, template.jobType, run.payload)
        return self._store.add_run(template, run)

    def add_runs(self, template: Job, runs: Sequence[RunSpec]) -> list[tuple[str, bool]]:
        for run in runs:
            if run.payload is not None:
                self.check(template.tenantId, template.jobType, run.payload)
        return self._store.add_runs(template, runs)

    def update_if_unmoved(self, job: Job, fields: dict[str, Any]) -> Job | None:
        if "payload" in fields:
            self.check(job.tenantId, job.jobType, fields["payload"])
        return self._store.update_if_unmoved(job, fields)

    def check(self, tenant_id: str, job_type: str, payload: Any) -> None:
        names = _names(job_type, payload)
        if names and (refusal := _refusal(names, self._credentials.store.missing(tenant_id, names.values()))):
            raise refusal


def _names(job_type: str, payload: Any) -> dict[str, str]:
    """Header -> credential name, for each credential an http payload names (none for other types)."""
    return referenced(payload) if job_type == HTTP_JOB_TYPE else {}


def _refusal(names: dict[str, str], missing: set[str]) -> CredentialMissing | None:
    """The refusal of the first header naming a credential in `missing`, or None."""
    for header, name in names.items():
        if name in missing:
            return CredentialMissing(
                f"payload.headers.{header}: no credential named {name!r} (PUT /credentials/{name})"
            )
    return None


def credentials_checked(store: JobStore, credentials: Credentials) -> JobStore:
    """`store` as the API writes through it (create_app)."""
    return cast(JobStore, CredentialsChecked(store, credentials))
