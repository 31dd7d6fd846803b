"""The operator's endpoints beside the job API: who the caller is, an overview of counts, the history minute by
minute, the DLQ by error with bulk re-drive, and the optional filters and cursors of GET /jobs.

Every read is a bounded query of shared/store/browse.py. A bulk re-drive moves each job with the store's own
redrive (one job, one guarded transition), so a job that left the DLQ meanwhile is reported, never moved twice.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from services.api.auth.tenancy import current_principal
from services.api.context import context
from services.api.http.errors import ApiError, SafeJSONResponse
from services.api.http.request_bodies import read_json
from services.api.models.operator import RedriveRequest
from shared.job_requests import describe
from shared.jsonsafe import shorten
from shared.keys.base import Role
from shared.model import Status, format_time, utc_now
from shared.store.base import ApiStore, JobNotFound, TransitionRefused
from shared.store.browse import JobBrowser

log = logging.getLogger("jobsched.api")

RECENT_WINDOW = timedelta(hours=1)
# The history's ranges (GET /history?range=): the counters keep a day.
HISTORY_RANGES = {"1h": timedelta(hours=1), "6h": timedelta(hours=6), "24h": timedelta(hours=24)}
TENANTS_SHOWN = 200
DLQ_GROUPS_SHOWN = 100
DLQ_JOBS_PER_GROUP = 20
# A group's re-drive reads its dead letters this many at a time and moves at most REDRIVE_MAX_PER_CALL per
# request, so one request stays short; the answer's `more` says that the group has jobs left.
REDRIVE_BATCH = 500
REDRIVE_MAX_PER_CALL = 5000
REDRIVE_BODY_MAX_BYTES = 64 * 1024

Redriven = tuple[list[str], list[dict[str, str]]]


def _visible_tenants() -> str | None:
    """Whose tenants the caller may list: everyone's (None) without authentication or with an admin key, else
    only its key's tenant."""
    principal = current_principal.get()
    return None if principal is None or principal.role is Role.ADMIN else principal.tenant


async def overview(request: Request) -> Response:
    api = context(request)
    tenant = request.query_params.get("tenantId") or None
    now = utc_now()
    counts = await api.slots.read(api.browser.counts, tenant, now - RECENT_WINDOW)
    tenants = await api.slots.read(api.browser.tenants, _visible_tenants(), TENANTS_SHOWN)
    totals: dict[str, int] = {}
    for by_status in counts.byType.values():
        for status, count in by_status.items():
            totals[status] = totals.get(status, 0) + count
    return SafeJSONResponse(
        {
            "at": format_time(now),
            "tenantId": tenant,
            "statuses": [s.value for s in Status],
            "jobTypes": sorted(set(api.known.names()) | set(counts.byType)),
            "byType": counts.byType,
            "totals": totals,
            "lastHour": {t: vars(c) for t, c in counts.lastHour.items()},
            "dlq": totals.get(Status.DLQ.value, 0),
            "schedules": {"active": counts.activeTemplates, "paused": counts.pausedTemplates},
            "tenants": tenants,
        }
    )


async def history(request: Request) -> Response:
    """The history's minutes (shared/store/history.py) over the range asked for, of one job type or all, of one
    tenant or (an admin's) every tenant."""
    api = context(request)
    tenant = request.query_params.get("tenantId") or None
    job_type = request.query_params.get("jobType") or None
    chosen = request.query_params.get("range", "1h")
    span = HISTORY_RANGES.get(chosen)
    if span is None:
        raise ApiError(400, f"range {shorten(chosen)!r} is not one of {', '.join(HISTORY_RANGES)}")
    now = utc_now()
    found = await api.slots.read(api.browser.history, tenant, job_type, now - span + timedelta(minutes=1), now)
    return SafeJSONResponse({"tenantId": tenant, "jobType": job_type, "range": chosen, **found.to_wire()})


async def dlq(request: Request) -> Response:
    api = context(request)
    tenant = request.query_params.get("tenantId") or None
    groups = await api.slots.read(api.browser.dlq_groups, tenant, DLQ_GROUPS_SHOWN)
    out = []
    for group in groups:
        jobs = await api.slots.read(api.browser.dead_letters, tenant, group.error, DLQ_JOBS_PER_GROUP)
        out.append({**vars(group), "jobs": [_without_payload(j.to_wire()) for j in jobs]})
    return SafeJSONResponse(out)


async def redrive(request: Request) -> Response:
    api = context(request)
    expected = 'expected {"jobIds": [...]} or {"lastError": "..."}'
    try:
        data = await read_json(request, max_bytes=REDRIVE_BODY_MAX_BYTES)
    except ApiError as exc:
        message = f"{expected}: {exc.message}" if exc.status == 400 else exc.message
        raise ApiError(exc.status, message, exc.headers) from None
    try:
        wanted = RedriveRequest.model_validate(data)
    except ValidationError as exc:
        raise ApiError(400, f"{expected}: {describe(exc)}") from None
    if (wanted.jobIds is None) == (wanted.lastError is None):
        raise ApiError(400, "give jobIds or lastError, not both and not neither")
    more = False
    if wanted.jobIds is not None:
        bad = [i for i in wanted.jobIds if len(i) != 24 or any(c not in "0123456789abcdefABCDEF" for c in i)]
        if bad:
            shown = ", ".join(repr(shorten(i, 32)) for i in bad[:5])
            raise ApiError(400, f"malformed job ids {shown}: expected 24 hex characters")
        (redriven, refused) = await api.slots.write(_redrive_each, api.store, [i.lower() for i in wanted.jobIds])
    else:
        # A group of the key's tenant unless the body names one (that the authentication allowed).
        principal = current_principal.get()
        tenant = wanted.tenantId or (principal.tenant if principal is not None else None)
        (redriven, refused), more = await api.slots.read(
            _redrive_group, api.store, api.browser, tenant, wanted.lastError or ""
        )
    log.info("dlq re-driven", extra={"action": "dlq_redriven", "jobs": len(redriven), "refused": len(refused)})
    return SafeJSONResponse({"redriven": redriven, "refused": refused, "more": more})


async def session(request: Request) -> Response:
    principal = current_principal.get()
    if principal is None:  # AUTH=off: every caller may read and change every tenant's jobs
        return SafeJSONResponse({"auth": "off", "role": Role.ADMIN.value, "tenantId": None})
    return SafeJSONResponse({"auth": "required", "role": principal.role.value, "tenantId": principal.tenant})


ROUTES = [
    Route("/session", session, methods=["GET"]),
    Route("/overview", overview, methods=["GET"]),
    Route("/history", history, methods=["GET"]),
    Route("/dlq", dlq, methods=["GET"]),
    Route("/dlq/redrive", redrive, methods=["POST"]),
]


def _without_payload(job: dict[str, Any]) -> dict[str, Any]:
    """A dead letter as the DLQ lists it: up to 2,000 of them, each payload up to 256 KiB, would make one answer
    of hundreds of megabytes; the job's own page has its payload (and its result and progress)."""
    job.pop("payload", None)
    job.pop("result", None)
    job.pop("progress", None)
    return job


def _redrive_each(store: ApiStore, job_ids: list[str]) -> Redriven:
    redriven: list[str] = []
    refused: list[dict[str, str]] = []
    for job_id in job_ids:
        try:
            redriven.append(store.redrive(job_id).id)
        except (JobNotFound, TransitionRefused) as exc:
            refused.append({"id": job_id, "error": str(exc)})
    return redriven, refused


def _redrive_group(store: ApiStore, browser: JobBrowser, tenant: str | None, error: str) -> tuple[Redriven, bool]:
    redriven: list[str] = []
    refused: list[dict[str, str]] = []
    while len(redriven) < REDRIVE_MAX_PER_CALL:
        batch = browser.dead_letters(tenant, error, min(REDRIVE_BATCH, REDRIVE_MAX_PER_CALL - len(redriven)))
        done, failed = _redrive_each(store, [j.id for j in batch])
        redriven += done
        refused += failed
        if not done:  # the group is empty, or what is left refuses (it moved since it was read)
            return (redriven, refused), False
    return (redriven, refused), bool(browser.dead_letters(tenant, error, 1))
