"""Tenant isolation with AUTH=required: every store call a request makes is scoped to its key's tenant.

The API's routes never see the real job store: create_app hands them a TenantGuard, which reads the request's
principal (set by the authentication wrapper, auth.py) and applies one rule per kind of argument, whatever the
method is called. An argument named `job_id` (or `template_id`) must name a job of the principal's tenant (a
`workflow_id` a workflow of it, a `batch_id` a batch of it), and a Job passed as `job` or `template` must be one,
or the call raises JobNotFound (the 404 of an unknown id: another tenant's job is indistinguishable from none);
`tenant_id`, and the tenant of a NewJob argument `new` (of each of `news`), must be the principal's, or the call is
403. A store method with none of these arguments is refused unless it is one of the tenant-free ones (schema, ping,
close), so a route added later that calls a new store method is scoped by its arguments' names, or fails loudly,
never leaks. An admin key's principal may use every tenant.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from functools import wraps
from typing import Any, Final, cast

from starlette.exceptions import HTTPException

from shared.batches import BatchView, MemberResult
from shared.jsonsafe import shorten
from shared.keys.base import Role
from shared.model import Job
from shared.store.base import BatchNotFound, JobNotFound, JobStore, NewBatch, NewJob, NewWorkflow, WorkflowNotFound
from shared.store.browse import JobBrowser
from shared.workflows import WorkflowView

audit_log = logging.getLogger("jobsched.audit")
TENANT_FREE: Final = frozenset({"ensure_schema", "ping", "close"})


@dataclass(frozen=True)
class Principal:
    """Who a request acts as: the tenant and role of its key, and the key's public prefix (for logs)."""

    tenant: str
    role: Role
    prefix: str

    def may_use(self, tenant: str) -> bool:
        return self.role is Role.ADMIN or tenant == self.tenant


# Set by the authentication wrapper for the request it serves; copied into the threads store calls run in.
current_principal: ContextVar[Principal | None] = ContextVar("current_principal", default=None)


class TenantForbidden(HTTPException):
    """A request names a tenant that is not its key's: 403 (the app renders HTTPException as {"error"})."""

    def __init__(self, principal: Principal, tenant: str) -> None:
        super().__init__(403, f"this API key belongs to tenant {principal.tenant!r}, not {shorten(tenant)!r}")


def audit_denied(
    reason: str,
    status: int,
    principal: Principal | None,
    *,
    method: str | None = None,
    route: str | None = None,
    keyPrefix: str | None = None,
    jobId: str | None = None,
    requestedTenant: str | None = None,
    role: str | None = None,
    needs: str | None = None,
) -> None:
    """Every refused request is logged with the key's prefix and tenant, never the key (each field named here:
    a name a LogRecord keeps of its own would make the log call raise)."""
    audit_log.warning(
        "request denied",
        extra={
            "action": "request_denied",
            "reason": reason,
            "status": status,
            "tenantId": principal.tenant if principal else None,
            "keyPrefix": principal.prefix if principal else keyPrefix,
            "method": method,
            "route": route,
            "jobId": jobId,
            "requestedTenant": requestedTenant,
            "role": role,
            "needs": needs,
        },
    )


def check_tenant(principal: Principal, tenant: str) -> None:
    if not principal.may_use(tenant):
        audit_denied("other_tenant", 403, principal, requestedTenant=tenant)
        raise TenantForbidden(principal, tenant)


def _principal() -> Principal:
    principal = current_principal.get()
    if principal is None:  # a store call outside an authenticated request: a bug, refused rather than unscoped
        raise RuntimeError("job store called outside an authenticated request")
    return principal


class TenantGuard:
    """The job store as seen through the current request's principal (see the module docstring)."""

    def __init__(self, store: JobStore) -> None:
        self._store = store

    def get(self, job_id: str) -> Job | None:
        job = self._store.get(job_id)
        if job is None:
            return None
        principal = _principal()
        if not principal.may_use(job.tenantId):
            audit_denied("other_tenant", 404, principal, jobId=job_id)
            return None
        return job

    def workflow(self, workflow_id: str) -> WorkflowView | None:
        """As `get`: another tenant's workflow reads as none."""
        found = self._store.workflow(workflow_id)
        return found if found is not None and _own(found.workflow.tenantId) else None

    def batch(self, batch_id: str) -> BatchView | None:
        """As `get`: another tenant's batch reads as none."""
        found = self._store.batch(batch_id)
        return found if found is not None and _own(found.batch.tenantId) else None

    def batch_members(
        self, batch_id: str, after: MemberResult | None, limit: int, *, status: str | None = None, results: bool = True
    ) -> list[MemberResult]:
        """As `batch`: another tenant's batch has no members."""
        if self.batch(batch_id) is None:
            return []
        return self._store.batch_members(batch_id, after, limit, status=status, results=results)

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._store, name)
        scoped = method if name in TENANT_FREE else self._scoped(name, method)
        setattr(self, name, scoped)  # resolved once per method
        return scoped

    def _scoped(self, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(method)
        checks = [(p, _CHECKS[p]) for p in signature.parameters if p in _CHECKS]
        if not checks:
            raise TypeError(f"JobStore.{name} has no tenant rule (no job_id, tenant_id or new argument)")

        @wraps(method)
        def call(*args: Any, **kwargs: Any) -> Any:
            arguments = signature.bind(*args, **kwargs).arguments
            principal = _principal()
            for parameter, check in checks:
                check(self, principal, arguments[parameter])
            return method(*args, **kwargs)

        return call


def _own(tenant: str) -> bool:
    """Whether the request's principal may see what belongs to `tenant` (audited when not: a 404 follows)."""
    principal = _principal()
    if principal.may_use(tenant):
        return True
    audit_denied("other_tenant", 404, principal)
    return False


def _check_job_id(guard: TenantGuard, principal: Principal, job_id: str) -> None:
    if guard.get(job_id) is None:
        raise JobNotFound(job_id)


def _check_workflow_id(guard: TenantGuard, principal: Principal, workflow_id: str) -> None:
    if guard.workflow(workflow_id) is None:
        raise WorkflowNotFound(workflow_id)


def _check_batch_id(guard: TenantGuard, principal: Principal, batch_id: str) -> None:
    if guard.batch(batch_id) is None:
        raise BatchNotFound(batch_id)


def _check_job(guard: TenantGuard, principal: Principal, job: Job) -> None:
    """A job the route read through the guard already: scoped again all the same, by its tenant."""
    if not principal.may_use(job.tenantId):
        audit_denied("other_tenant", 404, principal, jobId=job.id)
        raise JobNotFound(job.id)


def _check_tenant_id(guard: TenantGuard, principal: Principal, tenant: str | None) -> None:
    """`tenant_id` None asks for every tenant: only an admin key may."""
    if tenant is None:
        if principal.role is not Role.ADMIN:
            audit_denied("every_tenant", 403, principal)
            raise HTTPException(
                403, f"this API key belongs to tenant {principal.tenant!r}; it cannot read every tenant"
            )
        return
    check_tenant(principal, tenant)


def _check_new_job(guard: TenantGuard, principal: Principal, new: NewJob | NewWorkflow | NewBatch) -> None:
    check_tenant(principal, new.tenantId)


def _check_new_jobs(guard: TenantGuard, principal: Principal, news: Sequence[NewJob]) -> None:
    for new in news:
        check_tenant(principal, new.tenantId)


_CHECKS: Final[dict[str, Callable[[TenantGuard, Principal, Any], None]]] = {
    "job_id": _check_job_id,
    "template_id": _check_job_id,
    "workflow_id": _check_workflow_id,
    "batch_id": _check_batch_id,
    "job": _check_job,
    "template": _check_job,
    "tenant_id": _check_tenant_id,
    "new": _check_new_job,
    "news": _check_new_jobs,
}
SCOPING_ARGUMENTS: Final = frozenset(_CHECKS)
"""The argument names that scope a store method to the request's tenant (see the module docstring)."""


def guarded_browser(browser: JobBrowser) -> JobBrowser:
    """With authentication on, the browser through the tenant guard, as the job store is: each call is checked
    against the request's key by its `tenant_id` argument."""
    return cast(JobBrowser, TenantGuard(cast(JobStore, browser)))
