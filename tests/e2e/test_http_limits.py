"""The HTTP server's own limits, over real sockets, in both binaries that serve the API: `jobsched dev` and
`jobsched api`. Bodies are refused by their declared length before they are sent and cut off at the limit
when they have none; a client that sends its headers or its body too slowly is disconnected; a request too
malformed for the app still gets a JSON error; a taken port ends the start with one line naming its holder;
every listener is on loopback unless configured otherwise."""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from tests.conftest import Launch
from tests.e2e.devmode import Dev
from tests.support import REPO_ROOT, ServiceProcess, free_port, wait_until

SLOW = {"API_HEADER_TIMEOUT": "2s", "API_BODY_TIMEOUT": "2s"}
TRICKLE_S = 0.25
GIVE_UP_S = 30  # far past both deadlines: a server that never cuts a slow client off fails the test


@dataclass
class Server:
    process: ServiceProcess
    port: int


@pytest.fixture(params=["dev", pytest.param("api", marks=pytest.mark.servers)])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Server]:
    if request.param == "dev":
        dev = Dev(tmp_path)
        process = dev.start(**SLOW)
        yield Server(process, dev.port)
        process.stop()
        dev.http.close()
        return
    launch: Launch = request.getfixturevalue("launch")
    port = free_port()
    process = launch("api", API_PORT=str(port), **SLOW)
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=5) as http:
        wait_until(lambda: _ready(http, process), 60, "the API to be ready")
    yield Server(process, port)


def _ready(http: httpx.Client, process: ServiceProcess) -> bool:
    assert process.process.poll() is None, process.log_text()[-3000:]
    try:
        return http.get("/readyz").status_code == 200
    except httpx.HTTPError:
        return False


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: Any


def read_answer(sock: socket.socket) -> Answer | None:
    """The response on `sock`, or None when the server closed (or reset) the connection without one."""
    data = b""
    try:
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                return None
            data += chunk
        head, _, rest = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
        while len(rest) < int(headers.get("content-length", "0")):
            chunk = sock.recv(65536)
            if not chunk:
                break
            rest += chunk
    except ConnectionResetError:
        return None
    body = json.loads(rest) if headers.get("content-type", "").startswith("application/json") else rest
    return Answer(int(lines[0].split()[1]), headers, body)


def connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=GIVE_UP_S)


def request_head(method: str, path: str, *headers: str) -> bytes:
    return "\r\n".join([f"{method} {path} HTTP/1.1", "Host: localhost", *headers, "", ""]).encode()


def test_a_body_declared_too_large_is_refused_before_it_is_sent(server: Server) -> None:
    with connect(server.port) as sock:
        sock.sendall(request_head("POST", "/jobs", "Content-Type: application/json", "Content-Length: 100000000"))
        answer = read_answer(sock)  # nothing of the body was sent: the server must answer on the headers alone
    assert answer is not None
    assert answer.status == 413
    assert "limit" in answer.body["error"]
    assert answer.headers["connection"] == "close"


def test_a_chunked_body_is_read_only_up_to_the_limit(server: Server) -> None:
    chunk = b"x" * 65536
    frame = f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n"
    sent, answer = 0, None
    with connect(server.port) as sock:
        sock.sendall(request_head("POST", "/jobs", "Content-Type: application/json", "Transfer-Encoding: chunked"))
        try:
            while sent < 100 * 1024 * 1024:
                if select.select([sock], [], [], 0)[0]:
                    break
                sock.sendall(frame)
                sent += len(chunk)
            answer = read_answer(sock)
        except (BrokenPipeError, ConnectionResetError):
            pass  # closed on us: the server stopped reading
    print(f"{server.process.name}: sent {sent / 1024 / 1024:.1f} MiB of a 100 MiB chunked body before the cut-off")
    assert sent < 16 * 1024 * 1024
    if answer is not None:
        assert answer.status == 413


def test_headers_sent_too_slowly_are_cut_off_with_408(server: Server) -> None:
    with connect(server.port) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n")
        answer = trickle(sock, b"X-Slow: " + b"a" * 1000)
    assert answer is not None, "the connection was closed without an answer"
    assert answer.status == 408
    assert "did not arrive" in answer.body["error"]


def test_a_body_sent_too_slowly_is_cut_off_with_408(server: Server) -> None:
    with connect(server.port) as sock:
        sock.sendall(request_head("POST", "/jobs", "Content-Type: application/json", "Content-Length: 1000"))
        answer = trickle(sock, b"{" + b" " * 998 + b"}")
    assert answer is not None, "the connection was closed without an answer"
    assert answer.status == 408
    assert "body" in answer.body["error"]


def trickle(sock: socket.socket, data: bytes) -> Answer | None:
    """Send `data` a byte at a time until the server answers or closes; fail if it lets us send it all."""
    started = time.monotonic()
    for byte in data:
        if select.select([sock], [], [], TRICKLE_S)[0]:
            return read_answer(sock)
        try:
            sock.sendall(bytes([byte]))
        except (BrokenPipeError, ConnectionResetError):
            return None
        assert time.monotonic() - started < GIVE_UP_S, "the server let a slow client hold its connection"
    pytest.fail("the server waited for the whole slow request")


@pytest.mark.parametrize(
    ("raw", "status", "error"),
    [
        (b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nno colon here\r\n\r\n", 400, "malformed HTTP request"),
        (b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03" + b"\x00" * 64 + b"\r\n\r\n", 400, "malformed HTTP request"),
        (
            b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\nContent-Length: 7\r\n\r\n",
            400,
            "malformed",
        ),
        (
            b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Big: " + b"a" * 100_000,
            400,
            "malformed HTTP request",
        ),  # no end
        (b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Big: " + b"a" * 40_000 + b"\r\n\r\n", 431, "limit is 16384"),
    ],
)
def test_a_malformed_request_gets_a_json_error(server: Server, raw: bytes, status: int, error: str) -> None:
    with connect(server.port) as sock:
        sock.sendall(raw)
        answer = read_answer(sock)
    assert answer is not None
    assert answer.status == status
    assert answer.headers["content-type"] == "application/json"
    assert error in answer.body["error"]


def test_a_request_with_both_a_length_and_a_transfer_encoding_is_refused_and_its_connection_closed(
    server: Server,
) -> None:
    """RFC 9112 6.1: a front end that reads such a request by its Content-Length and this server by its
    Transfer-Encoding disagree on where it ends; what follows must not be served as a request of its own."""
    smuggled = b"GET /jobs?tenantId=victim HTTP/1.1\r\nHost: localhost\r\n\r\n"
    ambiguous = request_head(
        "POST", "/jobs", "Content-Type: application/json", "Content-Length: 5", "Transfer-Encoding: chunked"
    )
    with connect(server.port) as sock:
        sock.sendall(ambiguous + b"0\r\n\r\n" + smuggled)
        received = b""
        while chunk := sock.recv(65536):  # until the server closes the connection
            received += chunk
    assert received.startswith(b"HTTP/1.1 400 ")
    assert b"Content-Length or Transfer-Encoding" in received
    assert b"\r\nconnection: close\r\n" in received.lower()
    assert received.count(b"HTTP/1.1 ") == 1, "the bytes after the ambiguous request were served as a request"


def test_every_listener_is_on_loopback_by_default(server: Server) -> None:
    for port in (server.port, server.process.metrics_port):
        assert listening_addresses(port) == {"127.0.0.1"}, port


def listening_addresses(port: int) -> set[str]:
    found = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        address, _, hex_port = fields[1].partition(":")
        if fields[3] == "0A" and int(hex_port, 16) == port:
            found.add(socket.inet_ntoa(bytes.fromhex(address)[::-1]))
    return found


@pytest.mark.parametrize(("service", "variable"), [("dev", "API_PORT"), ("dev", "METRICS_PORT"), ("api", "API_PORT")])
def test_a_taken_port_ends_the_start_with_one_line_naming_its_holder(
    tmp_path: Path, service: str, variable: str
) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        env = {
            **os.environ,
            "JOBSCHED_DB": str(tmp_path / "x.db"),
            "MONGO_URI": "mongodb://127.0.0.1:1/",
            "API_PORT": str(free_port()),
            "METRICS_PORT": str(free_port()),
            variable: str(port),
        }
        done = subprocess.run(
            [sys.executable, "-m", f"services.{service}"],
            cwd=REPO_ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert f"port {port} on 127.0.0.1 is in use by pid {os.getpid()} (" in lines[0]
    assert variable in lines[0]
    assert lines[0].count(f"jobsched {service}") == 1, "the command is named once"
    assert not (tmp_path / "x.db.lock").exists(), "a start that failed left the database's lock file"
    assert not (tmp_path / "x.db.secrets-key").exists(), "a start that failed made a secrets key"
