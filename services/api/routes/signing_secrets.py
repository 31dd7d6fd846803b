"""A tenant's signing secrets for its http jobs' requests (shared/http_jobs/secrets.py): list them (with the secrets:
the receivers need them), add one (at most two live: rotation), remove one. Each call names its tenant (a key's
own, with AUTH=required, which also takes a writer key even to read: a secret lets its holder sign requests)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from services.api.context import context
from services.api.http.errors import ApiError, SafeJSONResponse
from services.api.http.request_bodies import read_json
from services.api.routes.own_tenant import own_tenant
from shared.http_jobs.secrets import TooManySecrets
from shared.jsonsafe import shorten
from shared.model import utc_now
from shared.sealing import SealingError

PATH = "/signing-secrets"


async def list_secrets(request: Request) -> Response:
    tenant = _tenant(request.query_params.get("tenantId"))
    api = context(request)
    try:
        found = await api.slots.read(api.signing_secrets.live, tenant)
    except SealingError as exc:  # kept sealed, and this API has no key (or another): the operator's to fix
        raise ApiError(503, f"the signing secrets cannot be read: {exc}") from None
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
    return own_tenant(value, "signing secrets")


ROUTES = [
    Route(PATH, list_secrets, methods=["GET"]),
    Route(PATH, add_secret, methods=["POST"]),
    Route(PATH + "/{secret_id}", remove_secret, methods=["DELETE"]),
]
