"""The `http` job type: send the request a job's payload names and let the response decide the attempt.

- 2xx: succeeded; the result is the response's summary.
- 429, 5xx, no response (a connection refused or reset, the deadline passed) or none whole (a body short of its
  Content-Length or without its last chunk, or one the deadline cut: sending.py): failed and retried with the job's
  backoff, no sooner than a Retry-After says. A response is judged whole or not before its status is.
- 3xx: followed when the job asks (payload.followRedirects, up to MAX_REDIRECTS, each hop checked again by the
  outbound policy); otherwise, and for every other status: failed without retry, to the DLQ (retrying a 404 or
  a 400 cannot help).
- A request the outbound policy refuses, or a payload that is not a request: to the DLQ, nothing sent.

Every attempt's record keeps the response's summary (status, duration, headers that describe the body, the first
EXCERPT_CHARS of the body); lastError has the status and a short excerpt.
"""

from __future__ import annotations

import email.utils
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Final
from urllib.parse import urljoin

from jobsched.handlers import HandlerContext, JobTypes
from jobsched.outcomes import Cancel, GiveUp, RetryAfter, Snooze
from shared import tracing
from shared.config import Settings
from shared.http_jobs import signing
from shared.http_jobs.credential_filling import Lookup, filled, kept_across, redacted
from shared.http_jobs.credentials import Credentials
from shared.http_jobs.outbound import OutboundPolicy, Refused
from shared.http_jobs.request import JOB_TYPE, MAX_TIMEOUT_S, BadHttpRequest, HttpRequest, parsed_url
from shared.http_jobs.secrets import CachedSecrets, SigningSecrets
from shared.http_jobs.sending import Response, Unanswered, send
from shared.jsonsafe import storable_text

MAX_REDIRECTS: Final = 5
EXCERPT_CHARS: Final = 2000  # of the body, in the result
ERROR_EXCERPT_CHARS: Final = 200  # of the body, in lastError
DESCRIBING_HEADERS: Final = ("content-type", "content-length", "location", "retry-after")
ATTEMPT_MARGIN_S: Final = 5.0  # beyond a request's deadline, for the attempt to record its outcome
BUSY_SNOOZE_S: Final = 1.0  # a job whose tenant already has its most requests to the host in flight comes back then


@dataclass(frozen=True)
class HttpJobSettings:
    """`per_host`: requests in flight at once from one executor to one host, per tenant (one tenant's slow host
    never holds another's requests); `max_response_bytes`: what is read of a response body at most."""

    policy: OutboundPolicy = field(default_factory=OutboundPolicy)
    per_host: int = 8
    max_response_bytes: int = 1024 * 1024


class HttpJobs:
    """The handler of the `http` type. `secrets(tenant)`: the tenant's live signing secrets (signing.py);
    `credentials(tenant, name)`: a credential's value, for the headers that name one (credential_filling.py)."""

    def __init__(self, settings: HttpJobSettings, secrets: Callable[[str], Sequence[str]], credentials: Lookup) -> None:
        self._settings = settings
        self._secrets = secrets
        self._credentials = credentials
        self._in_flight: Counter[tuple[str, str]] = Counter()
        self._lock = threading.Lock()

    def __call__(self, payload: dict[str, Any], ctx: HandlerContext) -> dict[str, Any]:
        try:
            request = HttpRequest.from_payload(payload)
        except BadHttpRequest as exc:
            raise GiveUp(str(exc)) from None
        left_s = (ctx.deadline - datetime.now(UTC)).total_seconds()
        deadline = time.monotonic() + max(0.0, min(request.timeout_s, left_s))
        started = time.monotonic()
        with self._slot(ctx.tenant_id, request.host):
            response, url = self._follow(request, ctx, deadline)
        summary = _summary(response, url, (time.monotonic() - started) * 1000)
        status = response.status
        if 200 <= status < 300:
            return summary
        said = _error_line(response)
        if status == 429 or status >= 500:
            raise RetryAfter(_retry_after(response.headers.get("retry-after")), said, result=summary)
        if 300 <= status < 400:
            where = response.headers.get("location", "nowhere")
            why = f"after {MAX_REDIRECTS} redirects" if request.follow_redirects else "(followRedirects: false)"
            raise GiveUp(f"{said}: a redirect to {where[:200]}, not followed {why}", result=summary)
        raise GiveUp(said, result=summary)

    def _follow(self, request: HttpRequest, ctx: HandlerContext, deadline: float) -> tuple[Response, str]:
        hops = 0
        while True:
            if ctx.cancelled.is_set():  # the job was cancelled: send nothing more
                raise Cancel("cancelled before its request was sent")
            secrets = self._secrets(ctx.tenant_id)
            added = signing.headers_for(ctx.job_id, ctx.attempt, secrets, int(time.time()), request.body)
            credentials = filled(request.credentials, ctx.tenant_id, self._credentials)
            try:
                response = send(
                    request,
                    {**_traced(request.headers), **credentials.headers, **added},
                    self._settings.policy,
                    deadline,
                    self._settings.max_response_bytes,
                )
            except Refused as exc:
                raise GiveUp(str(exc)) from None
            except (Unanswered, OSError) as exc:  # OSError: the name does not resolve (perhaps not yet)
                raise RetryAfter(0, str(exc)) from None  # retried with the backoff alone
            response = redacted(response, credentials.values)  # what is kept of it never holds a value sent
            location = response.headers.get("location")
            if not (request.follow_redirects and 300 <= response.status < 400 and location and hops < MAX_REDIRECTS):
                return response, request.url
            hops += 1
            request = _redirected(request, response.status, location)

    @contextmanager
    def _slot(self, tenant: str, host: str) -> Iterator[None]:
        owner = (tenant, host.lower())
        with self._lock:
            if self._in_flight[owner] >= self._settings.per_host:
                busy = f"{self._settings.per_host} requests of this tenant to {host} already in flight here"
                raise Snooze(BUSY_SNOOZE_S, reason=busy)
            self._in_flight[owner] += 1
        try:
            yield
        finally:
            with self._lock:
                self._in_flight[owner] -= 1
                if not self._in_flight[owner]:
                    del self._in_flight[owner]


def http_job_types(settings: Settings, secrets: SigningSecrets, credentials: Credentials) -> JobTypes:
    """The `http` type, as an executor serves it: its settings' outbound policy and bounds, signing with the
    tenants' secrets in `secrets`, filling in the `credentials` their payloads name. Its attempts may take the
    longest request a payload may ask for: the request's own timeout bounds each one."""
    types = JobTypes()
    handler = HttpJobs(
        HttpJobSettings(
            OutboundPolicy.from_setting(settings.http_jobs_allow),
            settings.http_jobs_per_host,
            settings.http_jobs_max_response,
        ),
        CachedSecrets(secrets),
        credentials.value,
    )
    types.handler(JOB_TYPE, timeout=MAX_TIMEOUT_S + ATTEMPT_MARGIN_S)(handler)
    return types


def _redirected(request: HttpRequest, status: int, location: str) -> HttpRequest:
    """The request a redirect asks for: 307 and 308 keep the method and body, the others become a GET."""
    try:
        parts = parsed_url(urljoin(request.url, location))
    except BadHttpRequest as exc:
        raise GiveUp(f"a redirect to {location[:200]!r}: {exc}") from None
    if status in (307, 308):
        return kept_across(request, replace(request, **parts))
    headers = {k: v for k, v in request.headers.items() if k.lower() != "content-type"}
    return kept_across(request, replace(request, method="GET", body=b"", headers=headers, **parts))


def _summary(response: Response, url: str, duration_ms: float) -> dict[str, Any]:
    decoded = response.body[: EXCERPT_CHARS * 4 + 4].decode("utf-8", "replace")
    return {
        "status": response.status,
        "reason": storable_text(response.reason[:200]),
        "url": url,
        "address": response.address,
        "durationMs": round(duration_ms, 3),
        "headers": {k: storable_text(response.headers[k][:500]) for k in DESCRIBING_HEADERS if k in response.headers},
        "body": storable_text(decoded[:EXCERPT_CHARS]),
        "bodyBytes": len(response.body),  # as read: at most HTTP_JOBS_MAX_RESPONSE
        # jobsched's own bounds cut it (the read cap, the excerpt); a body the connection cut never gets here.
        "truncated": response.truncated or len(decoded) > EXCERPT_CHARS,
    }


def _error_line(response: Response) -> str:
    excerpt = " ".join(response.body[: ERROR_EXCERPT_CHARS * 4].decode("utf-8", "replace").split())
    excerpt = storable_text(excerpt[:ERROR_EXCERPT_CHARS])
    return f"HTTP {response.status} {storable_text(response.reason[:100])}".rstrip() + (
        f": {excerpt}" if excerpt else ""
    )


def _retry_after(value: str | None) -> float:
    """Seconds from now that a Retry-After header asks for (delay-seconds or an HTTP date); 0 when absent or not
    readable (the backoff decides alone)."""
    if not value:
        return 0.0
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return 0.0
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


_TRACE_HEADERS: Final = frozenset({"traceparent", "tracestate"})


def _traced(headers: dict[str, str]) -> dict[str, str]:
    """The payload's headers, with the attempt's span as the trace context when tracing is on (the payload's own
    `traceparent` and `tracestate`, any case, give way to it: they belong to another trace)."""
    trace = tracing.outgoing_headers()
    if not trace:
        return headers
    return {**{k: v for k, v in headers.items() if k.lower() not in _TRACE_HEADERS}, **trace}
