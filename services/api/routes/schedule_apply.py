"""POST /schedules/apply: a tenant's schedules as a file declares them (`jobsched schedules apply FILE`), made to
hold: what is missing is created, what changed is updated in place (its last fire time kept), what an earlier
apply made and the file no longer has is reported, or paused or cancelled as `removed` says, and a template made
another way that holds a declared name is left alone. `dryRun` only says what applying would do. The rules are
those of schedules declared in the code (shared/schedules/declared.py), for the origin `file`; the answer is 200
with the names added, changed (with each field as [stored, declared]), unchanged, removed and in conflict.
"""

from __future__ import annotations

import logging
from typing import Any

from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from jobsched.schedules import DECLARED_IN_FILE
from services.api.context import context
from services.api.http.errors import ApiError, SafeJSONResponse
from services.api.http.request_bodies import checked, invalid, read_json
from services.api.models.schedules import ApplyRequest
from services.api.new_job import TypeDefaultsOf, unknown_type
from shared.cron import ScheduleError
from shared.jsonsafe import shorten
from shared.model import utc_now
from shared.schedules.declared import TEMPLATES_READ, Declaration, Reconciler, WhenRemoved, checked_declaration
from shared.store.browse import JobQuery

log = logging.getLogger("jobsched.api")


async def apply_schedules(request: Request) -> Response:
    api = context(request)
    wanted = await checked(ApplyRequest, await read_json(request))
    tenant = wanted.tenantId
    if tenant is None:
        raise ApiError(400, "tenantId: the tenant whose schedules these are is required")
    declarations = await run_in_threadpool(_declarations, wanted.schedules, tenant, api.known.defaults)
    for index, declaration in enumerate(declarations):
        if not await api.known.accepts(declaration.job_type):
            raise ApiError(400, f"schedules[{index}]: {unknown_type(declaration.job_type, api.known.names())}")
    await api.schema.wait_ready()
    reconciler = Reconciler(api.store, DECLARED_IN_FILE, WhenRemoved(wanted.removed))

    def apply() -> dict[str, Any]:
        present = api.browser.page(tenant, JobQuery(templates=True, limit=TEMPLATES_READ))
        done = reconciler.reconcile(declarations, present, utc_now(), write=not wanted.dryRun)
        return {k: v for k, v in vars(done).items() if k != "waiting"}

    answer = await api.slots.write(apply)
    log.info(
        "schedules applied",
        extra={"action": "schedules_applied", "dryRun": wanted.dryRun, "counts": _counts(answer)},
    )
    return SafeJSONResponse({**answer, "dryRun": wanted.dryRun})


def _counts(answer: dict[str, Any]) -> dict[str, int]:
    """How many schedules each list of the answer names (added, changed, ...), for the log line."""
    return {k: len(v) for k, v in answer.items() if isinstance(v, list)}


def _declarations(schedules: list[dict[str, Any]], tenant: str, type_defaults: TypeDefaultsOf) -> list[Declaration]:
    """Each schedule as POST /jobs validates it (a 400 names the first that is refused, by its place). One whose
    bounds leave it no fire time is taken: it has ended, and the answer says so."""
    made: list[Declaration] = []
    names: set[str] = set()
    for index, body in enumerate(schedules):
        where = f"schedules[{index}]"
        named = body.get("tenantId", tenant)
        if named != tenant:
            raise ApiError(400, f"{where}: tenantId {shorten(str(named))!r} is not the request's {tenant!r}")
        if "remainingRuns" in body:
            raise ApiError(400, f"{where}: remainingRuns cannot be declared (it counts down as the schedule fires)")
        if body.get("cron") is None and body.get("interval") is None:
            raise ApiError(400, f"{where}: not a schedule (give cron or interval)")
        body = {**body, "tenantId": tenant}
        try:
            declaration = checked_declaration(body, type_defaults(str(body.get("jobType"))), utc_now())
        except ValidationError as exc:
            refused = invalid(exc)
            raise ApiError(refused.status, f"{where}: {refused.message}") from None
        except ScheduleError as exc:
            raise ApiError(400, f"{where}: {exc}") from None
        if declaration.name in names:
            raise ApiError(400, f"{where}: the name {shorten(declaration.name)!r} is declared twice")
        names.add(declaration.name)
        made.append(declaration)
    return made


ROUTES = [Route("/schedules/apply", apply_schedules, methods=["POST"])]
