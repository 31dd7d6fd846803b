"""Authentication of API requests (AUTH=required): API keys, roles, the key's tenant, per-key rate limits.

`Authorization: Bearer <key>` on every route but the public ones (health, readiness, the API's own
documentation). Each route is wrapped (protect), so the wrapper runs after routing and sees the route:

- 400 for a request with more than one Authorization header (which one a proxy in front reads is anyone's
  guess);
- 401 with `WWW-Authenticate: Bearer` for a missing, malformed, unknown, wrong or revoked key (one message for
  all of them: the reason goes only to the audit log);
- 429 with `Retry-After` when the key spent its token bucket (counted by tenant);
- 403 when the key's role is short of what the request needs: GET reads (reader), anything else writes
  (writer), key management needs admin;
- 403 when the query's or the JSON body's `tenantId` names another tenant than the key's (an admin key may
  name any); a request that omits it acts for the key's tenant (the query gets it; on routes that create
  something for a tenant, the JSON body does too). Key management (/api-keys, admin only) spans tenants and
  gets no default.

Every store call the routes make then goes through tenancy.TenantGuard, which scopes it to the same principal.
With AUTH=off none of this exists: the API is the open contract (tenantId self-declared), which a non-loopback
bind refuses unless AUTH=off is given explicitly.
"""

from __future__ import annotations

import copy
import ipaddress
import json
import logging
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final
from urllib.parse import parse_qsl, urlencode

from starlette.datastructures import Headers
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from services.api.auth.key_cache import NOT_VERIFIED, KeyCache
from services.api.auth.tenancy import Principal, TenantGuard, audit_denied, current_principal
from services.api.http.errors import error
from services.api.http.fair_shares import PUBLIC
from services.api.http.rate_limits import TokenBuckets
from shared import jsonsafe, metrics
from shared.config import ConfigError, Settings
from shared.jsonsafe import shorten
from shared.keys import tokens
from shared.keys.base import KeyStore, Role
from shared.store.base import JobStore

log = logging.getLogger("jobsched.api")
PUBLIC_PATHS: Final = frozenset({"/healthz", "/readyz", "/openapi.json", "/docs"})
READ_METHODS: Final = frozenset({"GET", "HEAD"})
BODY_METHODS: Final = frozenset({"POST", "PUT", "PATCH"})
# Bodies up to this size are read to check their tenantId; a larger one passes unread (the routes refuse
# bodies far smaller than this, and the store guard still checks the tenant of what would be created).
MAX_INSPECTED_BODY_BYTES: Final = 1024 * 1024
CHALLENGE: Final = 'Bearer realm="jobsched"'
# Routes whose JSON body names the tenant of what they create: there an omitted tenantId becomes the key's.
TENANT_BODIES: Final = frozenset(
    {("POST", "/jobs"), ("POST", "/jobs/batch"), ("POST", "/schedules/apply"), ("POST", "/signing-secrets")}
    | {("POST", "/workflows"), ("POST", "/batches")}
)
# Routes that bind every tenant (a job type's limits): admin keys only, by path and method.
ADMIN_ROUTES: Final = frozenset({("/job-types/{job_type}/limits", "PUT"), ("/job-types/{job_type}/limits", "DELETE")})
# Routes that take a writer key whatever the method: a signing secret, even read, lets its holder sign requests.
WRITER_PATHS: Final = frozenset({"/signing-secrets", "/signing-secrets/{secret_id}"})
# Routes whose JSON body lists what they create (under the key named here), each of which may name its own tenant.
LISTED_BODIES: Final = {
    ("POST", "/jobs/batch"): "jobs",
    ("POST", "/schedules/apply"): "schedules",
    ("POST", "/batches"): "jobs",
    ("POST", "/batches/{batch_id}/jobs"): "jobs",
}
VERDICT: Final = "jobsched.key_verdict"  # the scope's verdict on its key, when the request limits checked it


@dataclass
class ApiAuth:
    """What create_app needs for AUTH=required: the key store, the replica's key cache and rate limits."""

    keys: KeyStore
    cache: KeyCache
    buckets: TokenBuckets | None

    def guard(self, store: JobStore) -> JobStore:
        return TenantGuard(store)

    async def sharer(self, scope: Scope) -> str:
        """Whose share of the API a request uses (fair_shares.py): its key's prefix when the key verifies (a key this
        replica has not seen yet is looked up first), else the public's."""
        presented, problem = _presented_key(scope)
        if presented is None or problem is not None or not self.cache.fresh:  # not yet loaded: no verdict yet
            return PUBLIC
        verdict = await self.cache.verify_or_look_up(presented)
        scope[VERDICT] = verdict  # the authentication goes by it: one digest comparison, one lookup per request
        return verdict.key.prefix if verdict.key is not None else PUBLIC

    def start(self) -> None:
        self.cache.start()

    async def stop(self) -> None:
        await self.cache.stop()

    def protect(self, routes: Iterable[BaseRoute]) -> list[Route]:
        """Copies of the routes, every non-public one wrapped with the authentication check (the routes given are
        module-level, shared by every app of the process, so they are not changed). Only plain routes are known
        here: any other kind (a Mount...) must be decided on before it can be served, so it is refused at start-up."""
        protected: list[Route] = []
        for route in routes:
            if not isinstance(route, Route):
                raise TypeError(f"{route!r}: only Route objects are protected; decide how this one authenticates")
            if route.path not in PUBLIC_PATHS:
                methods = route.methods or set()
                admin = route.path.startswith("/api-keys") or any((route.path, m) in ADMIN_ROUTES for m in methods)
                needs = Role.ADMIN if admin else Role.WRITER if route.path in WRITER_PATHS else None
                route = copy.copy(route)
                route.app = Authenticate(route.app, self, route.path, needs)
            protected.append(route)
        return protected


def api_auth(settings: Settings, open_keys: Callable[[], KeyStore]) -> ApiAuth | None:
    """The API's authentication as the settings ask for it; None for AUTH=off. Raises ConfigError for an
    unauthenticated non-loopback bind that AUTH=off does not confirm, or an unusable bootstrap key."""
    if settings.auth != "required":
        if settings.auth_bootstrap_key or settings.auth_bootstrap_key_file:
            log.warning(
                "AUTH_BOOTSTRAP_KEY is ignored: AUTH is not required", extra={"action": "bootstrap_key_ignored"}
            )
        if not is_loopback(settings.api_host):
            if settings.auth != "off":
                raise ConfigError(
                    f"API_HOST={settings.api_host} is not a loopback address: set AUTH=required (and create API "
                    "keys, see `jobsched keys`) or AUTH=off to serve every tenant's jobs to anyone who can connect"
                )
            log.warning(
                "AUTH=off on a non-loopback address: anyone who can reach the API can read and change every "
                "tenant's jobs",
                extra={"action": "auth_off_exposed", "host": settings.api_host},
            )
        return None
    buckets = TokenBuckets(settings.rate_limit, settings.rate_limit_burst) if settings.rate_limit > 0 else None
    key = bootstrap_key(settings)
    keys = open_keys()
    return ApiAuth(keys, KeyCache(keys, refresh_s=settings.auth_refresh.total_seconds(), bootstrap_key=key), buckets)


def bootstrap_key(settings: Settings) -> str | None:
    if settings.auth_bootstrap_key and settings.auth_bootstrap_key_file:
        raise ConfigError("set AUTH_BOOTSTRAP_KEY or AUTH_BOOTSTRAP_KEY_FILE, not both")
    key, source = settings.auth_bootstrap_key, "AUTH_BOOTSTRAP_KEY"
    if settings.auth_bootstrap_key_file:
        source = "AUTH_BOOTSTRAP_KEY_FILE"
        try:
            key = Path(settings.auth_bootstrap_key_file).read_text().strip()
        except OSError as exc:
            raise ConfigError(f"AUTH_BOOTSTRAP_KEY_FILE={settings.auth_bootstrap_key_file}: {exc}") from None
    if not key:
        return None
    if tokens.prefix_of(key) is None:
        raise ConfigError(f"{source} is not an API key: expected {tokens.FORMAT_HINT} (jobsched keys generate)")
    return key


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Authenticate:
    """The per-route ASGI wrapper that admits a request and sets its principal (see the module docstring)."""

    def __init__(self, app: ASGIApp, auth: ApiAuth, path: str, needs: Role | None) -> None:
        self._app = app
        self._auth = auth
        self._path = path
        self._needs = needs

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        method: str = scope["method"]
        where = {"method": method, "route": self._path}
        presented, problem = _presented_key(scope)
        if problem is not None:
            audit_denied("several_keys", 400, None, **where)
            await _refuse(400, problem)(scope, receive, send)
            return
        if presented is None:
            audit_denied("missing_key", 401, None, **where)
            metrics.API_AUTH_DENIED.labels("missing_key").inc()
            await _refuse(401, "an API key is required: send Authorization: Bearer <key>", CHALLENGE)(
                scope, receive, send
            )
            return
        if not await self._auth.cache.wait_fresh():
            await _refuse(503, "API keys cannot be verified now (key store unavailable); retry later")(
                scope, receive, send
            )
            return
        verdict = scope.get(VERDICT) or await self._auth.cache.verify_or_look_up(presented)
        if verdict.reason == NOT_VERIFIED:  # a new key that cannot be looked up now: not "invalid", which is final
            await _refuse(503, "this API key cannot be verified now; retry")(scope, receive, send)
            return
        if verdict.key is None:
            audit_denied(verdict.reason, 401, None, keyPrefix=tokens.prefix_of(presented), **where)
            metrics.API_AUTH_DENIED.labels(verdict.reason).inc()
            challenge = f'{CHALLENGE}, error="invalid_token"'
            await _refuse(401, "invalid API key", challenge)(scope, receive, send)
            return
        principal = Principal(verdict.key.tenantId, verdict.key.role, verdict.key.prefix)
        refusal = self._limit(principal, where) or self._authorize(principal, method, where)
        if refusal is None and self._needs is not Role.ADMIN:  # key management spans tenants: nothing to default
            scope, refusal = self._scope_query(principal, scope, where)
        if refusal is None and method in BODY_METHODS:
            receive, refusal = await self._scope_body(principal, method, receive, where)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        token = current_principal.set(principal)
        try:
            await self._app(scope, receive, send)
        finally:
            current_principal.reset(token)

    def _limit(self, principal: Principal, where: dict[str, str]) -> ASGIApp | None:
        buckets = self._auth.buckets
        wait_s = buckets.take(principal.prefix) if buckets is not None else 0.0
        if not wait_s:
            return None
        audit_denied("rate_limited", 429, principal, **where)
        metrics.API_RATE_LIMITED.labels(principal.tenant).inc()
        retry_after = str(max(1, math.ceil(wait_s)))
        return _refuse(429, "rate limit of this API key exceeded", retry_after=retry_after)

    def _authorize(self, principal: Principal, method: str, where: dict[str, str]) -> ASGIApp | None:
        needs = self._needs or (Role.READER if method in READ_METHODS else Role.WRITER)
        if principal.role.includes(needs):
            return None
        audit_denied("role", 403, principal, role=principal.role.value, needs=needs.value, **where)
        metrics.API_AUTH_DENIED.labels("role").inc()
        return _refuse(403, f"this API key's role is {principal.role.value}; {method} {self._path} needs {needs.value}")

    def _scope_query(self, principal: Principal, scope: Scope, where: dict[str, str]) -> tuple[Scope, ASGIApp | None]:
        raw: bytes = scope.get("query_string", b"")
        # Read as Starlette's QueryParams reads it, so the check sees what the route will see.
        named = [v for k, v in parse_qsl(raw.decode("latin-1"), keep_blank_values=True) if k == "tenantId"]
        if not named:
            query = raw + (b"&" if raw else b"") + urlencode({"tenantId": principal.tenant}).encode("ascii")
            return {**scope, "query_string": query}, None
        refusal = self._tenant_refusal(principal, named, where)
        if refusal is None and len(named) > 1:  # the route would read only the last one
            refusal = _refuse(400, "tenantId is given more than once")
        return scope, refusal

    async def _scope_body(
        self, principal: Principal, method: str, receive: Receive, where: dict[str, str]
    ) -> tuple[Receive, ASGIApp | None]:
        body, rest = await _read_body(receive, MAX_INSPECTED_BODY_BYTES)
        if rest is not None:
            return rest, None
        try:
            data = jsonsafe.parse_request(body)  # read as the route reads it, so both see the same tenant
        except jsonsafe.JsonRejected:
            data = None  # not JSON the API accepts: the route answers that
        if isinstance(data, dict):
            named = [data["tenantId"]] if "tenantId" in data else []
            listed = data.get(LISTED_BODIES.get((method, self._path), ""))
            if isinstance(listed, list):
                named += [item["tenantId"] for item in listed if isinstance(item, dict) and "tenantId" in item]
            refusal = self._tenant_refusal(principal, named, where)
            if refusal is not None:
                return receive, refusal
            if "tenantId" not in data and (method, self._path) in TENANT_BODIES:
                body = _with_tenant(body, principal.tenant, empty=not data)
        return _replay(body, receive), None

    def _tenant_refusal(self, principal: Principal, named: Sequence[object], where: dict[str, str]) -> ASGIApp | None:
        # Only a non-empty string names a tenant; anything else is the route's to refuse as bad input (400).
        for tenant in named:
            if isinstance(tenant, str) and tenant and not principal.may_use(tenant):
                audit_denied("other_tenant", 403, principal, requestedTenant=tenant, **where)
                metrics.API_AUTH_DENIED.labels("other_tenant").inc()
                return _refuse(403, f"this API key belongs to tenant {principal.tenant!r}, not {shorten(tenant)!r}")
        return None


def _with_tenant(body: bytes, tenant: str, *, empty: bool) -> bytes:
    """The body with `"tenantId": tenant` as the object's first member, every other byte as sent (so the route
    judges the rest, its size included, as it would have). Only for UTF-8; other encodings pass unchanged."""
    if json.detect_encoding(body) not in ("utf-8", "utf-8-sig"):
        return body
    brace = body.index(b"{")  # json.loads found an object: only whitespace or a BOM precede its brace
    member = b'"tenantId":' + json.dumps(tenant).encode() + (b"" if empty else b",")
    return body[: brace + 1] + member + body[brace + 1 :]


def _presented_key(scope: Scope) -> tuple[str | None, str | None]:
    """The request's bearer key (None when it has none) and, for more than one Authorization header, why the
    request is refused."""
    headers = Headers(scope=scope).getlist("authorization")
    if len(headers) > 1:
        return None, "send one Authorization header, not several"
    return (_bearer(headers[0]) if headers else None), None


def _bearer(header: str) -> str | None:
    scheme, _, credentials = header.partition(" ")
    credentials = credentials.strip()
    return credentials if scheme.lower() == "bearer" and credentials else None


def _refuse(status: int, message: str, challenge: str | None = None, retry_after: str | None = None) -> ASGIApp:
    headers = {}
    if challenge is not None:
        headers["WWW-Authenticate"] = challenge
    if retry_after is not None:
        headers["Retry-After"] = retry_after
    return error(status, message, headers)


async def _read_body(receive: Receive, limit: int) -> tuple[bytes, Receive | None]:
    """The request body if it ends within `limit` bytes: (body, None); otherwise what was read and a receive
    that replays it and goes on with the rest: (b"", receive)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"", _replay_messages([*_as_messages(chunks), message], receive)
        chunk = message.get("body", b"")
        chunks.append(chunk)
        size += len(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks), None
        if size > limit:
            return b"", _replay_messages(_as_messages(chunks, more=True), receive)


def _as_messages(chunks: list[bytes], more: bool = False) -> list[Message]:
    return [{"type": "http.request", "body": c, "more_body": more or i < len(chunks) - 1} for i, c in enumerate(chunks)]


def _replay(body: bytes, receive: Receive) -> Receive:
    return _replay_messages([{"type": "http.request", "body": body, "more_body": False}], receive)


def _replay_messages(messages: list[Message], receive: Receive) -> Receive:
    pending = list(messages)

    async def replayed() -> Message:
        return pending.pop(0) if pending else await receive()

    return replayed
