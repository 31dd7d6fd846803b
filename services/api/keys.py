"""/api-keys: key management over HTTP for admin keys (AUTH=required only; `jobsched keys` does the same
from a shell). A created key is in the 201 response and nowhere else, ever."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from services.api.bodies import describe, read_json
from services.api.errors import SafeJSONResponse, error
from services.api.tenancy import current_principal
from shared import jsonsafe
from shared.keys.base import ApiKey, KeyStore, Role
from shared.keys.manage import issue_key, revoke_key

MAX_KEY_REQUEST_BYTES: Final = 16 * 1024


class KeyRequest(BaseModel):
    """POST /api-keys."""

    model_config = ConfigDict(extra="forbid", strict=True)

    tenantId: str = Field(min_length=1, max_length=256, description="The tenant the key acts for")
    role: Role = Field(description="reader: GET only; writer: also changes; admin: every tenant and the keys")
    name: str | None = Field(default=None, max_length=200, description="What the key is for (shown in lists)")


def key_routes(keys: KeyStore, remember: Callable[[ApiKey], None]) -> list[Route]:
    """`remember`: this replica's key cache takes the keys made and revoked here at once."""

    async def create_key(request: Request) -> Response:
        data = await read_json(request, max_bytes=MAX_KEY_REQUEST_BYTES)
        try:
            asked = KeyRequest.model_validate_json(jsonsafe.dumps(data))  # JSON mode: the role from its name
        except ValidationError as exc:
            return error(400, describe(exc))
        key, record = await run_in_threadpool(issue_key, keys, asked.tenantId, asked.role, asked.name, by=_caller())
        remember(record)
        return SafeJSONResponse({"key": key, **record.to_wire()}, status_code=201)

    async def list_keys(request: Request) -> Response:
        tenant = request.query_params.get("tenantId") or None
        found = await run_in_threadpool(keys.list_keys, tenant)
        return SafeJSONResponse([k.to_wire() for k in found])

    async def revoke(request: Request) -> Response:
        prefix: str = request.path_params["prefix"]
        record = await run_in_threadpool(revoke_key, keys, prefix, by=_caller())
        if record is None:
            return error(404, f"API key {jsonsafe.shorten(prefix)} not found")
        remember(record)
        return SafeJSONResponse(record.to_wire())

    return [
        Route("/api-keys", create_key, methods=["POST"]),
        Route("/api-keys", list_keys, methods=["GET"]),
        Route("/api-keys/{prefix}", revoke, methods=["DELETE"]),
    ]


def _caller() -> str:
    principal = current_principal.get()
    return principal.prefix if principal is not None else "unknown"
