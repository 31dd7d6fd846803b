"""A tenant's named credentials for its http jobs (shared/http_jobs/credentials.py): set one (made, or its value
replaced: a rotation), list them (names and times: no answer ever holds a value), delete one. Each call names its
tenant in the query (with AUTH=required the key's when omitted); changing takes a writer key, listing a reader's.

    PUT    /credentials/{name}?tenantId=T   {"value": "..."}  201 made, 200 replaced
    GET    /credentials?tenantId=T                              [{"name", "tenantId", "createdAt", "updatedAt"}]
    DELETE /credentials/{name}?tenantId=T                      200, 404 when there is none
"""

from __future__ import annotations

import logging
from typing import Final

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from services.api.context import context
from services.api.http.errors import ApiError, SafeJSONResponse
from services.api.http.request_bodies import read_json
from services.api.routes.own_tenant import own_tenant
from shared.http_jobs.credentials import (
    MAX_VALUE_BYTES,
    BadCredential,
    TooManyCredentials,
    ValueTooLarge,
    checked_name,
    checked_value,
)
from shared.jsonsafe import shorten
from shared.model import utc_now
from shared.sealing import SealingError

log = logging.getLogger("jobsched.api")
PATH: Final = "/credentials"
# A value's JSON escapes (\" and \\) can double it; the value itself is then held to MAX_VALUE_BYTES (413).
MAX_BODY_BYTES: Final = 2 * MAX_VALUE_BYTES + 1024
WHAT: Final = "credentials"


async def list_credentials(request: Request) -> Response:
    tenant = own_tenant(request.query_params.get("tenantId"), WHAT)
    api = context(request)
    found = await api.slots.read(api.credentials.store.listed, tenant)
    return SafeJSONResponse([c.to_wire() for c in found])


async def set_credential(request: Request) -> Response:
    tenant = own_tenant(request.query_params.get("tenantId"), WHAT)
    name = _name(request)
    body = await read_json(request, max_bytes=MAX_BODY_BYTES)
    if not isinstance(body, dict) or set(body) != {"value"}:
        raise ApiError(400, 'the body is {"value": "..."} (the value only: the name is in the path)')
    try:
        value = checked_value(body["value"])
    except ValueTooLarge as exc:
        raise ApiError(413, f"value: {exc}") from None
    except BadCredential as exc:
        raise ApiError(400, f"value: {exc}") from None
    api = context(request)
    try:
        made, created = await api.slots.write(api.credentials.set, tenant, name, value, utc_now())
    except TooManyCredentials as exc:
        raise ApiError(409, str(exc)) from None
    except SealingError as exc:  # no key here: refused, never stored in the clear
        raise ApiError(503, f"credentials cannot be stored: {exc}") from None
    action = "credential_created" if created else "credential_replaced"
    log.info("credential set", extra={"action": action, "tenantId": tenant, "credential": name})
    return SafeJSONResponse(made.to_wire(), status_code=201 if created else 200)


async def delete_credential(request: Request) -> Response:
    tenant = own_tenant(request.query_params.get("tenantId"), WHAT)
    name = _name(request)
    api = context(request)
    if not await api.slots.write(api.credentials.store.remove, tenant, name):
        raise ApiError(404, f"tenant {shorten(tenant)!r} has no credential {name!r}")
    log.info("credential deleted", extra={"action": "credential_deleted", "tenantId": tenant, "credential": name})
    return SafeJSONResponse({"name": name, "tenantId": tenant, "deleted": True})


def _name(request: Request) -> str:
    try:
        return checked_name(request.path_params["name"])
    except BadCredential as exc:
        raise ApiError(400, f"name: {exc}") from None


ROUTES = [
    Route(PATH, list_credentials, methods=["GET"]),
    Route(PATH + "/{name}", set_credential, methods=["PUT"]),
    Route(PATH + "/{name}", delete_credential, methods=["DELETE"]),
]
