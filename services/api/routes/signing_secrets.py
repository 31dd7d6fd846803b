"""A tenant's signing secrets for its http jobs' requests (shared/http_jobs/secrets.py): list them (with the secrets:
the receivers need them), add one (at most two live: rotation), remove one. Each call names its tenant (a key's
own, with AUTH=required, which also takes a writer key even to read: a secret lets its holder sign requests)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from services.api.auth.tenancy import check_tenant, current_principal
from services.api.context import context
from services.api.http.errors import ApiError, SafeJSONResponse
from services.api.http.request_bodies import read_json
from shared.http_jobs.secrets import TooManySecrets
from shared.jsonsafe import shorten
from shared.model import utc_now

PATH = "/signing-secrets"
MAX_TENANT_CHARS = 256  # as a job's tenantId


async def list_secrets(request: Request) -> Response:
    tenant = _tenant(request.query_params.get("tenantId"))
    api = context(request)
    found = await api.slots.read(api.signing_secrets.live, tenant)
    return SafeJSONResponse([s.to_wire() for s in found])


async def add_secret(request: Request) -> Response:
    body = await read_json(request, max_bytes=4096)
    if not isinstance(body, dict) or set(body) - {"tenantId"}:
        raise ApiError(400, 'the body is {"tenantId": "..."}')
    tenant = _tenant(body.get("tenantId"))
    api = context(request)
    try:
        made = await api.slots.write(api.signing_secrets.add, tenant, utc_now())
    except TooManySecrets as exc:
        raise ApiError(409, str(exc)) from None
    return SafeJSONResponse(made.to_wire(), status_code=201)


async def remove_secret(request: Request) -> Response:
    tenant = _tenant(request.query_params.get("tenantId"))
    secret_id = str(request.path_params["secret_id"])
    api = context(request)
    if not await api.slots.write(api.signing_secrets.remove, tenant, secret_id):
        raise ApiError(404, f"tenant {shorten(tenant)!r} has no signing secret {shorten(secret_id)!r}")
    return SafeJSONResponse({"id": secret_id, "tenantId": tenant, "deleted": True})


def _tenant(value: object) -> str:
    if not isinstance(value, str) or not value or len(value) > MAX_TENANT_CHARS:
        raise ApiError(
            400, f"tenantId: the tenant whose signing secrets these are (1 to {MAX_TENANT_CHARS} characters)"
        )
    principal = current_principal.get()
    if principal is not None:  # AUTH=required: the authentication wrapper checked it already; checked again here
        check_tenant(principal, value)
    return value


ROUTES = [
    Route(PATH, list_secrets, methods=["GET"]),
    Route(PATH, add_secret, methods=["POST"]),
    Route(PATH + "/{secret_id}", remove_secret, methods=["DELETE"]),
]
