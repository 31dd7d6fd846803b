"""The API's HTTP server: uvicorn with the socket bound by us, deadlines for request headers and for a client
that stops reading its response, Nagle's algorithm off, and JSON error bodies for requests too malformed to
reach the app. `jobsched api` and `jobsched dev` both serve this way.

- Headers: uvicorn closes idle keep-alive connections but has no deadline for a request's headers: a client
  that sends one byte every few seconds would hold its connection forever. Here every request's headers must be
  complete within `header_timeout_s` of the connection opening or of the previous response; a client that is
  still sending them then gets 408 and the connection is closed.
- Reading: a response the client does not read fills the socket's buffers, and then the route's writes wait
  (flow control) while its request keeps its in-flight slot. Once writing has waited `send_timeout_s` without
  the client taking any of what waits, the connection is reset: the route's writes return and the slot is free.
  A client that reads, however slowly, keeps its connection (writing resumes only once what waits is nearly
  all gone, which for a large answer read slowly can take longer than the deadline).
- TCP_NODELAY on every accepted connection: a response goes out as a few writes (head, body, end), and with
  Nagle's algorithm the last small one waits for the client's delayed ACK (40 ms on Linux) on every request
  of a kept-alive connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import socket
import struct
import termios
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from services.api.http.request_limits import ApiLimits
from shared import jsonsafe
from shared.ports import listen

KEEP_ALIVE_S = 5


class _JsonH11Protocol(H11Protocol):
    header_timeout_s: float = ApiLimits.header_timeout_s
    send_timeout_s: float = ApiLimits.send_timeout_s

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._header_deadline: asyncio.TimerHandle | None = None
        self._send_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        no_delay(transport)
        super().connection_made(transport)
        self._arm_header_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_header_deadline()
        self._cancel_send_deadline()
        super().connection_lost(exc)

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._send_deadline is None:
            self._arm_send_deadline()

    def resume_writing(self) -> None:
        self._cancel_send_deadline()
        super().resume_writing()

    def _arm_send_deadline(self) -> None:
        self._send_deadline = self.loop.call_later(self.send_timeout_s, self._check_reading, self._unsent())

    def _check_reading(self, unsent_before: int) -> None:
        self._send_deadline = None
        if self.transport.is_closing():
            return
        if self._unsent() < unsent_before:  # the client took some: it is reading
            self._arm_send_deadline()
            return
        # A reset, not a close: a closed socket still holds what the client is not reading and goes on offering
        # it; linger 0 makes the kernel drop it at once.
        sock = self.transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.transport.abort()

    def _unsent(self) -> int:
        """What waits for the client: in the transport's buffer, and in the socket's (which the kernel lets the
        transport refill only once a third of it is free: a slow reader's progress shows there first)."""
        sock = self.transport.get_extra_info("socket")
        in_socket = 0
        if sock is not None:
            with contextlib.suppress(OSError):
                in_socket = struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, b"\0\0\0\0"))[0]
        return self.transport.get_write_buffer_size() + in_socket

    def _cancel_send_deadline(self) -> None:
        if self._send_deadline is not None:
            self._send_deadline.cancel()
            self._send_deadline = None

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.cycle is not None and not self.cycle.response_complete:
            self._cancel_header_deadline()  # a request's headers are complete: the app has it

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and (self.cycle is None or self.cycle.response_complete):
            self._arm_header_deadline()

    def send_400_response(self, msg: str) -> None:
        self._send_error(400, "malformed HTTP request")

    def _arm_header_deadline(self) -> None:
        self._cancel_header_deadline()
        self._header_deadline = self.loop.call_later(self.header_timeout_s, self._headers_too_slow)

    def _cancel_header_deadline(self) -> None:
        if self._header_deadline is not None:
            self._header_deadline.cancel()
            self._header_deadline = None

    def _headers_too_slow(self) -> None:
        self._header_deadline = None
        if self.transport.is_closing():
            return
        if self.conn.our_state is h11.IDLE:
            self._send_error(408, f"the request did not arrive within {self.header_timeout_s:g}s")
        else:  # a response of this connection is complete; the client never finished its next request
            self.transport.close()

    def _send_error(self, status: int, message: str) -> None:
        body = jsonsafe.dumps({"error": message})
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
        ]
        try:
            for event in (h11.Response(status_code=status, headers=headers), h11.Data(data=body), h11.EndOfMessage()):
                self.transport.write(self.conn.send(event))
        except h11.LocalProtocolError:  # the connection's state allows no response any more
            pass
        self.transport.close()


def no_delay(transport: asyncio.BaseTransport) -> None:
    sock = transport.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def protocol(limits: ApiLimits) -> type[asyncio.Protocol]:
    deadlines = {"header_timeout_s": limits.header_timeout_s, "send_timeout_s": limits.send_timeout_s}
    return type("JsonH11Protocol", (_JsonH11Protocol,), deadlines)


def make_server(app: Any, host: str, port: int, limits: ApiLimits) -> uvicorn.Server:
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        http=protocol(limits),
        timeout_keep_alive=KEEP_ALIVE_S,
        h11_max_incomplete_event_size=limits.max_header_bytes,  # headers still arriving: 400 past this
        log_config=None,
        access_log=False,
    )
    return uvicorn.Server(config)


def bind(host: str, port: int, what: str) -> socket.socket:
    """The API's listening socket (ListenError names the holder of a taken port)."""
    return listen(host, port, what, "API_PORT")
