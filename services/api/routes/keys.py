"""/api-keys: key management over HTTP for admin keys (AUTH=required only; `jobsched keys` does the same
from a shell). A created key is in the 201 response and nowhere else, ever; this replica's key cache takes the
keys made and revoked here at once."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from services.api.auth.tenancy import current_principal
from services.api.context import context
from services.api.http.errors import SafeJSONResponse, error
from services.api.http.request_bodies import read_json
from services.api.models.keys import KeyRequest
from shared import jsonsafe
from shared.job_requests import describe
from shared.keys.manage import issue_key, revoke_key

if TYPE_CHECKING:
    from services.api.auth.api_auth import ApiAuth

MAX_KEY_REQUEST_BYTES: Final = 16 * 1024


async def create_key(request: Request) -> Response:
    auth = key_authority(request)
    data = await read_json(request, max_bytes=MAX_KEY_REQUEST_BYTES)
    try:
        asked = KeyRequest.model_validate_json(jsonsafe.dumps(data))  # JSON mode: the role from its name
    except ValidationError as exc:
        return error(400, describe(exc))
    key, record = await run_in_threadpool(issue_key, auth.keys, asked.tenantId, asked.role, asked.name, by=_caller())
    auth.cache.remember(record)
    return SafeJSONResponse({"key": key, **record.to_wire()}, status_code=201)


async def list_keys(request: Request) -> Response:
    auth = key_authority(request)
    tenant = request.query_params.get("tenantId") or None
    found = await run_in_threadpool(auth.keys.list_keys, tenant)
    return SafeJSONResponse([k.to_wire() for k in found])


async def revoke(request: Request) -> Response:
    auth = key_authority(request)
    prefix: str = request.path_params["prefix"]
    record = await run_in_threadpool(revoke_key, auth.keys, prefix, by=_caller())
    if record is None:
        return error(404, f"API key {jsonsafe.shorten(prefix)} not found")
    auth.cache.remember(record)
    return SafeJSONResponse(record.to_wire())


ROUTES = [
    Route("/api-keys", create_key, methods=["POST"]),
    Route("/api-keys", list_keys, methods=["GET"]),
    Route("/api-keys/{prefix}", revoke, methods=["DELETE"]),
]


def key_authority(request: Request) -> ApiAuth:
    """The API's authentication (these routes are served only with AUTH=required): its key store and cache."""
    auth = context(request).auth
    if auth is None:
        raise RuntimeError("the key routes are served only with AUTH=required")
    return auth


def _caller() -> str:
    principal = current_principal.get()
    return principal.prefix if principal is not None else "unknown"
