"""One request of an `http` job, sent to an address the outbound policy checked, on a connection made to that
very address (the TLS name and the Host header stay the URL's), within a total deadline, reading at most a
bounded part of the response, and only a whole one: a response the connection or the deadline cut short is no
answer."""

from __future__ import annotations

import contextlib
import http.client
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from typing import Final

from shared.http_jobs.outbound import OutboundPolicy
from shared.http_jobs.request import HttpRequest

USER_AGENT: Final = "jobsched-http-job/1"
READ_CHUNK: Final = 64 * 1024


class Unanswered(Exception):
    """No response, or none whole: the connection failed, the response ended before its body did (short of its
    Content-Length, without its last chunk), or the deadline passed (`timed_out`)."""

    def __init__(self, message: str, *, timed_out: bool = False) -> None:
        super().__init__(message)
        self.timed_out = timed_out


@dataclass(frozen=True)
class Response:
    status: int
    reason: str
    headers: dict[str, str]  # lower-case names; a repeated header's values joined by ", "
    body: bytes  # at most the bound read
    truncated: bool  # the body was longer than the bound, which cut it (one the connection cut is Unanswered)
    address: str  # the address it came from


def send(
    request: HttpRequest,
    headers: dict[str, str],
    policy: OutboundPolicy,
    deadline: float,
    max_body_bytes: int,
    tls: ssl.SSLContext | None = None,
) -> Response:
    """Send `request` with `headers` (the payload's and jobsched's) before `deadline` (time.monotonic()): the
    response, Unanswered, or outbound.Refused before any connection is made."""
    try:
        addresses = policy.addresses(request.host, request.port, deadline)
    except TimeoutError:
        raise Unanswered(f"{request.host} did not resolve within {request.timeout_s:g}s", timed_out=True) from None
    errors: list[str] = []
    for address in addresses:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise Unanswered(f"no response within {request.timeout_s:g}s", timed_out=True)
        try:
            raw = socket.create_connection((address, request.port), timeout=remaining)
        except TimeoutError:
            raise Unanswered(f"connecting to {request.host} ({address}) timed out", timed_out=True) from None
        except OSError as exc:
            errors.append(f"{address}: {exc.strerror or exc}")
            continue
        return _exchange(request, headers, raw, address, deadline, max_body_bytes, tls)
    raise Unanswered(f"could not connect to {request.host}:{request.port} ({'; '.join(errors)})")


def _exchange(
    request: HttpRequest,
    headers: dict[str, str],
    raw: socket.socket,
    address: str,
    deadline: float,
    max_body_bytes: int,
    tls: ssl.SSLContext | None,
) -> Response:
    host_header = request.host if request.port in (80, 443) else f"{request.host}:{request.port}"
    connection: http.client.HTTPConnection
    sock = raw
    in_use = [raw]  # the socket the exchange reads: the TLS one once it is wrapped
    answer: http.client.HTTPResponse | None = None
    # Per-step timeouts alone let a server that drips a byte at a time stretch the exchange: at the deadline the
    # socket is shut, whatever step is waiting on it. The shutdown makes the read under way return empty, as a
    # clean end would: `cut` is set first, so an empty read once it is set is never taken for the response's end.
    cut = threading.Event()

    def cut_off() -> None:
        cut.set()
        _shut(in_use[-1])

    cutoff = threading.Timer(max(0.0, deadline - time.monotonic()), cut_off)
    cutoff.daemon = True
    cutoff.start()
    try:
        if request.scheme == "https":
            context = tls or ssl.create_default_context()
            connection = http.client.HTTPSConnection(request.host, request.port, context=context)
            sock = connection.sock = context.wrap_socket(raw, server_hostname=request.host)
            in_use.append(sock)
        else:
            connection = http.client.HTTPConnection(request.host, request.port)
            connection.sock = raw
        sent = {"Host": host_header, "User-Agent": USER_AGENT, **headers}
        if request.body or request.method in ("POST", "PUT", "PATCH"):
            sent["Content-Length"] = str(len(request.body))
        _timed(sock, deadline)
        connection.putrequest(request.method, request.target, skip_host=True, skip_accept_encoding=True)
        for name, value in sent.items():
            connection.putheader(name, value)
        connection.endheaders(request.body or None)
        _timed(sock, deadline)
        answer = connection.getresponse()
        body, truncated = _bounded_body(answer, sock, deadline, max_body_bytes, cut)
        folded: dict[str, str] = {}
        for name, value in answer.getheaders():
            key = name.lower()
            folded[key] = f"{folded[key]}, {value}" if key in folded else value
        return Response(answer.status, answer.reason, folded, body, truncated, address)
    except (OSError, http.client.HTTPException) as exc:  # TimeoutError and ssl.SSLError are OSErrors
        if isinstance(exc, TimeoutError) or cut.is_set() or time.monotonic() >= deadline:
            # The deadline's: the socket's own timeout, or the cutoff's shutdown under whatever step was waiting.
            raise Unanswered(_late(request, answer), timed_out=True) from None
        if isinstance(exc, ssl.SSLError):
            raise Unanswered(f"TLS with {request.host} failed: {exc.reason or exc}") from None
        raise Unanswered(f"{request.host} ({address}): {type(exc).__name__}: {exc}") from None
    finally:
        cutoff.cancel()
        if answer is not None:
            answer.close()
        sock.close()
        raw.close()


def _bounded_body(
    answer: http.client.HTTPResponse, sock: socket.socket, deadline: float, max_body_bytes: int, cut: threading.Event
) -> tuple[bytes, bool]:
    """The body, or its first `max_body_bytes` and True when it is longer (the rest is not read: the cap cuts a
    body on purpose, and the response is judged by what came within it). A body that does not come whole is no
    answer: Unanswered when the receiver ended it short of its framing, TimeoutError (or the read's own error,
    `cut` set) when the deadline did."""
    body = bytearray()
    while answer.length != 0:  # 0: every byte the Content-Length announced is in (None: chunked, or to the close)
        _timed(sock, deadline)
        try:
            chunk = answer.read1(min(READ_CHUNK, max_body_bytes + 1 - len(body)))
        except http.client.IncompleteRead:  # a chunk, its size line or its CRLF cut off
            if cut.is_set():
                raise  # the deadline's doing: the exchange says so
            said = f"the response ended after {len(body)} bytes, without its last chunk ({_status(answer)})"
            raise Unanswered(said) from None
        if not chunk:
            # http.client returns an empty read at whatever ends the connection, without raising: a receiver that
            # closes short of its Content-Length, the cutoff's shutdown. Only for a chunked body is it surely the
            # end: it comes after the last chunk (one cut short raises IncompleteRead above).
            if answer.chunked:
                break
            if cut.is_set():
                raise TimeoutError
            if answer.length:
                announced = len(body) + answer.length
                raise Unanswered(f"the response ended after {len(body)} of {announced} bytes ({_status(answer)})")
            break  # a body delimited by the close, closed cleanly: all of it
        body += chunk
        if len(body) > max_body_bytes:
            return bytes(body[:max_body_bytes]), True
    return bytes(body), False


def _late(request: HttpRequest, answer: http.client.HTTPResponse | None) -> str:
    """The error of an exchange the deadline ended: before the response came, or within its body."""
    if answer is None:
        return f"no response within {request.timeout_s:g}s"
    return f"the response did not end within {request.timeout_s:g}s ({_status(answer)})"


def _status(answer: http.client.HTTPResponse) -> str:
    return f"HTTP {answer.status} {answer.reason}".rstrip()


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


def _timed(sock: socket.socket, deadline: float) -> None:
    """Each blocking step may take only what is left of the deadline."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise TimeoutError
    sock.settimeout(remaining)
