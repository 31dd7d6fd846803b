"""What keeps web pages out of an API without authentication (AUTH=off), whose only guard is who can reach it.

A browser on the same machine can reach a loopback API, and a page of any site can make it send requests:
- DNS rebinding: a page of `rebind.attacker.example`, whose name then resolves to 127.0.0.1, talks to the API as
  its own origin and reads the answers. Its requests name their site in the Host header, so only requests for
  the names in `hosts` are served (loopback names and API_HOST unless API_ALLOWED_HOSTS says otherwise; `*`
  serves any).
- Cross-site writes: a page can make the browser POST a form or a body-less request (pause, resume, trigger,
  retry) to the API without asking (no CORS preflight); it cannot read the answer, but the change is made.
  Browsers say where a request comes from (Sec-Fetch-Site; Origin in older ones), so a request that is not a
  read and comes from another origin is refused with 403. A request carrying neither header comes from a
  program (curl, the client), not from a page, and is served.

With AUTH=required a page gains nothing: it cannot attach a key the browser does not hold for it.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Final
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from services.api.http.errors import error
from services.api.http.request_limits import PROBE_PATHS
from shared.config import Settings
from shared.jsonsafe import shorten

LOOPBACK_NAMES: Final = ("localhost", "127.0.0.1", "::1")
ANY_HOST: Final = "*"
_READS: Final = frozenset({"GET", "HEAD", "OPTIONS"})
_SAME_SITE_FETCHES: Final = frozenset({"same-origin", "none"})  # `none`: the user typed the address
_WILDCARD_BINDS: Final = frozenset({"0.0.0.0", "::", ""})


def allowed_hosts(settings: Settings) -> tuple[str, ...]:
    """API_ALLOWED_HOSTS, or the loopback names and the address the API is bound to."""
    if settings.api_allowed_hosts:
        return tuple(h if h == ANY_HOST else host_name(h) for h in settings.api_allowed_hosts)
    bound = settings.api_host.lower()
    return LOOPBACK_NAMES if bound in _WILDCARD_BINDS or bound in LOOPBACK_NAMES else (*LOOPBACK_NAMES, bound)


def host_name(host: str) -> str:
    """The name of a Host header's value (or of a configured host), without its port: `[::1]:8080` and `::1` are
    `::1`, `Example.com.:80` is `example.com`."""
    if host.startswith("["):
        return host[1:].partition("]")[0].lower()
    if host.count(":") == 1:
        host = host.rpartition(":")[0]
    return host.lower().rstrip(".")


class SameOriginOnly:
    def __init__(self, app: ASGIApp, hosts: Collection[str]) -> None:
        self._app = app
        self._hosts = frozenset(hosts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in PROBE_PATHS:  # probes name the pod's address as Host
            await self._app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        host = headers.get("host")
        if host is not None and ANY_HOST not in self._hosts and host_name(host) not in self._hosts:
            message = f"this API does not serve the host {shorten(host)!r} (API_ALLOWED_HOSTS names those it does)"
            await error(400, message)(scope, receive, send)
            return
        if scope["method"] not in _READS and _from_another_origin(headers, host):
            message = "a change requested by a page of another origin is refused (the API has no authentication)"
            await error(403, message)(scope, receive, send)
            return
        await self._app(scope, receive, send)


def _from_another_origin(headers: Headers, host: str | None) -> bool:
    fetch_site = headers.get("sec-fetch-site")
    if fetch_site is not None:
        return fetch_site not in _SAME_SITE_FETCHES
    origin = headers.get("origin")
    if origin is None:
        return False
    try:
        netloc = urlsplit(origin).netloc
    except ValueError:  # not a URL (`http://[`): no page of this API's origin sends that
        return True
    return origin == "null" or netloc.lower() != (host or "").lower()
