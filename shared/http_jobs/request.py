"""What an `http` job's payload asks for, checked: the API refuses a payload that is not one (400), so a job
that cannot be sent is never stored.

    {"url": "https://billing.internal/charge", "method": "POST",
     "headers": {"Content-Type": "text/plain"}, "body": "..." | "json": {...},
     "timeoutSeconds": 30, "followRedirects": false}
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import urlsplit

from shared.http_jobs.credential_refs import CredentialRef

JOB_TYPE: Final = "http"  # the built-in type whose payload is one of these
METHODS: Final = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
DEFAULT_TIMEOUT_S: Final = 30.0
MAX_TIMEOUT_S: Final = 15 * 60.0
MAX_URL_CHARS: Final = 2048
MAX_HEADERS: Final = 50
MAX_HEADER_CHARS: Final = 8192
# Headers jobsched sets itself (signing.py) or that belong to the connection: a payload may not set them.
RESERVED_HEADERS: Final = frozenset(
    {"host", "content-length", "transfer-encoding", "connection", "idempotency-key"} | {"te", "upgrade", "trailer"}
)
RESERVED_PREFIX: Final = "jobsched-"
_TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")  # an HTTP header name (RFC 9110 token)
_FIELDS: Final = {"url", "method", "headers", "body", "json", "timeoutSeconds", "followRedirects"}


class BadHttpRequest(ValueError):
    """The payload is not an HTTP request this job type sends; the message says why."""


@dataclass(frozen=True)
class HttpRequest:
    url: str
    scheme: str
    host: str
    port: int
    target: str  # the path and query sent in the request line
    method: str = "POST"
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    timeout_s: float = DEFAULT_TIMEOUT_S
    follow_redirects: bool = False
    # Headers whose value is a tenant's credential, filled in at send time (credential_refs.py): never in `headers`.
    credentials: dict[str, CredentialRef] = field(default_factory=dict)

    @classmethod
    def from_payload(cls, payload: Any) -> HttpRequest:
        if not isinstance(payload, dict):
            raise BadHttpRequest("an http job's payload is an object")
        unknown = set(payload) - _FIELDS
        if unknown:
            raise BadHttpRequest(f"unknown fields in an http job's payload: {', '.join(sorted(unknown))}")
        method = payload.get("method", "POST")
        if method not in METHODS:
            raise BadHttpRequest(f"payload.method is one of {', '.join(METHODS)} (got {method!r})")
        headers, credentials = _headers(payload.get("headers", {}))
        if "body" in payload and "json" in payload:
            raise BadHttpRequest("payload.body and payload.json: give one")
        body = b""
        if "body" in payload:
            if not isinstance(payload["body"], str):
                raise BadHttpRequest("payload.body is a string (payload.json takes any JSON value)")
            body = payload["body"].encode("utf-8")
        elif "json" in payload:
            body = json.dumps(payload["json"], ensure_ascii=False, separators=(",", ":")).encode("utf-8")
            if not any(name.lower() == "content-type" for name in headers):
                headers["Content-Type"] = "application/json"
        timeout = payload.get("timeoutSeconds", DEFAULT_TIMEOUT_S)
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout <= MAX_TIMEOUT_S:
            raise BadHttpRequest(
                f"payload.timeoutSeconds is more than 0 and at most {MAX_TIMEOUT_S:g} (got {timeout!r})"
            )
        follow = payload.get("followRedirects", False)
        if not isinstance(follow, bool):
            raise BadHttpRequest("payload.followRedirects is true or false")
        return cls(
            method=method,
            headers=headers,
            body=body,
            timeout_s=float(timeout),
            follow_redirects=follow,
            credentials=credentials,
            **parsed_url(payload.get("url")),
        )


def parsed_url(url: Any) -> dict[str, Any]:
    """The parts of an absolute http(s) URL a request is sent by; BadHttpRequest for anything else."""
    if not isinstance(url, str) or not url:
        raise BadHttpRequest("payload.url is the absolute http:// or https:// URL to send the request to")
    if len(url) > MAX_URL_CHARS or not url.isascii() or any(c in url for c in " \r\n\t\\"):
        raise BadHttpRequest(f"payload.url is an ASCII URL of at most {MAX_URL_CHARS} characters, without spaces")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise BadHttpRequest(f"payload.url is not a URL: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise BadHttpRequest(f"payload.url is http:// or https:// (got {parts.scheme or 'no'} scheme)")
    if not parts.hostname:
        raise BadHttpRequest("payload.url names a host")
    if parts.username is not None or parts.password is not None:
        raise BadHttpRequest("payload.url carries no user or password: put credentials in payload.headers")
    target = parts.path or "/"
    if parts.query:
        target += f"?{parts.query}"
    return {
        "url": url,
        "scheme": scheme,
        "host": parts.hostname,
        "port": port or (443 if scheme == "https" else 80),
        "target": target,
    }


def is_reserved(name: str) -> bool:
    """Whether a header name is jobsched's (or the connection's) as a receiver may read it: CGI, WSGI and some
    proxies fold `_` into `-`, so `Jobsched_Signature` reaches them as `Jobsched-Signature`."""
    folded = name.lower().replace("_", "-")
    return folded in RESERVED_HEADERS or folded.startswith(RESERVED_PREFIX)


def _headers(value: Any) -> tuple[dict[str, str], dict[str, CredentialRef]]:
    if not isinstance(value, dict):
        raise BadHttpRequest("payload.headers is an object of header names to string values")
    if len(value) > MAX_HEADERS:
        raise BadHttpRequest(f"payload.headers has at most {MAX_HEADERS} headers")
    headers: dict[str, str] = {}
    credentials: dict[str, CredentialRef] = {}
    for name, text in value.items():
        if not _TOKEN.match(name):
            raise BadHttpRequest(f"payload.headers: {name[:64]!r} is not a header name")
        if is_reserved(name):
            raise BadHttpRequest(f"payload.headers: {name[:64]} is set by jobsched, not by a payload")
        if isinstance(text, dict):  # a credential named, not given (credential_refs.py)
            try:
                credentials[name] = CredentialRef.of(text)
            except ValueError as exc:
                raise BadHttpRequest(f"payload.headers.{name}: {exc}") from None
            continue
        if not isinstance(text, str) or len(text) > MAX_HEADER_CHARS or not text.isascii() or not text.isprintable():
            raise BadHttpRequest(f"payload.headers: {name} is printable ASCII of at most {MAX_HEADER_CHARS} characters")
        headers[name] = text
    return headers, credentials
