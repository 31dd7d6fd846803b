"""The API's HTTP server in this process (the server `jobsched api` and `jobsched dev` run, on its own listening
socket): what it does to every connection it accepts."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path

import pytest

from services.api.app import create_app
from services.api.http.request_limits import ApiLimits
from services.api.http.server import bind, make_server
from shared.store.sqlite import SqliteJobStore
from tests.support import backend_beside, wait_until


@pytest.fixture
def port(tmp_path: Path) -> Iterator[int]:
    store = SqliteJobStore(tmp_path / "api.db")
    store.ensure_schema()
    listener = bind("127.0.0.1", 0, "test api")
    port = listener.getsockname()[1]
    server = make_server(create_app(backend_beside(store)), "127.0.0.1", port, ApiLimits())
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    wait_until(lambda: server.started, 10, "the API server to start")
    yield port
    server.should_exit = True
    thread.join(10)
    store.close()


def test_every_accepted_connection_has_nagles_algorithm_off(port: int) -> None:
    """With Nagle's algorithm on, the last small write of each response on a kept-alive connection waits for
    the client's delayed ACK (40 ms on Linux): every request after the first would take 40 ms more."""
    with socket.create_connection(("127.0.0.1", port)) as client:
        for _ in range(3):  # the same connection, kept alive
            client.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
            assert read_response(client) == (b"HTTP/1.1 200 OK", b"ok")
        accepted = server_side_of(client)
        assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
        accepted.close()


def test_the_listening_socket_is_declared_tcp() -> None:
    """asyncio turns Nagle's algorithm off only on sockets declared IPPROTO_TCP; accepted ones inherit that."""
    listener = bind("127.0.0.1", 0, "test")
    try:
        assert listener.proto == socket.IPPROTO_TCP
    finally:
        listener.close()


def read_response(sock: socket.socket) -> tuple[bytes, bytes]:
    """The status line and body of one response (with Content-Length), however the server wrote it."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(4096)
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")
    )
    while len(body) < length:
        body += sock.recv(4096)
    return head.split(b"\r\n")[0], body


def server_side_of(client: socket.socket) -> socket.socket:
    """The server's socket of this connection, found among this process's open files (the server runs here)."""
    wanted = (client.getpeername(), client.getsockname())
    for name in os.listdir("/proc/self/fd"):
        try:
            copy = os.dup(int(name))
        except OSError:  # closed meanwhile
            continue
        try:
            candidate = socket.socket(fileno=copy)
        except OSError:  # not a socket
            os.close(copy)
            continue
        with suppress(OSError):
            if (candidate.getsockname(), candidate.getpeername()) == wanted:
                return candidate
        candidate.close()
    raise AssertionError("no socket of this process is the server's side of the connection")
