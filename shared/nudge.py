"""Nudges: "a job is due now, tick now" from the API to the scheduler, so a job due at once does not wait
for the next claim tick. Only a hint: the tick it triggers claims like any other (same query, same guards,
only inside a trusted term), so a lost, duplicated or forged nudge costs at most one early tick, and a job
whose nudge is lost starts at the next regular tick as it would without nudges.

In one process (`jobsched dev`) the API calls the scheduler's `nudge` directly. Between processes a nudge is
one UDP datagram from the API to every scheduler address it is given (the standbys ignore it): no connection
to keep, no broker or election round trip, nothing that can block or fail a create request.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
from collections.abc import Callable, Sequence

log = logging.getLogger("jobsched.nudge")
DATAGRAM = b"nudge"


def parse_address(text: str) -> tuple[str, int]:
    """`host:port` (IPv4 or a name; port 1-65535); ValueError otherwise."""
    host, sep, port = text.strip().rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{text!r} is not host:port")
    return host, int(port)


class NudgeSender:
    """Called from the API's event loop, so it never blocks there and never raises: the call only flags a nudge,
    and a thread of its own sends one datagram to each target for every burst of calls (resolving names there,
    and again at each send, so a scheduler that moved is found). A failed send is only logged."""

    def __init__(self, targets: Sequence[tuple[str, int]]) -> None:
        self._targets = list(targets)
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._pending = threading.Event()
        self._closed = False
        self._thread = threading.Thread(target=self._serve, daemon=True, name="nudge-sender")
        self._thread.start()

    def __call__(self) -> None:
        self._pending.set()

    def _serve(self) -> None:
        while True:
            self._pending.wait()
            if self._closed:
                return
            self._pending.clear()
            for target in self._targets:
                try:
                    self._socket.sendto(DATAGRAM, target)
                except OSError as exc:  # unresolvable name, nobody listening (ICMP): the next tick covers it
                    log.debug("nudge not sent", extra={"action": "nudge_failed", "target": target, "error": str(exc)})

    def close(self) -> None:
        self._closed = True
        self._pending.set()
        self._thread.join(5)
        self._socket.close()


class NudgeListener:
    """Calls `on_nudge` for every datagram received on `address`, from a daemon thread."""

    def __init__(self, address: tuple[str, int], on_nudge: Callable[[], None]) -> None:
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._socket.bind(address)
        self._on_nudge = on_nudge
        self._closed = False
        self.port = int(self._socket.getsockname()[1])
        self._thread = threading.Thread(target=self._serve, daemon=True, name="nudges")
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                self._socket.recv(64)
            except OSError:
                return
            if self._closed:
                return
            self._on_nudge()

    def close(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):  # not connected: nothing to shut down
            self._socket.shutdown(socket.SHUT_RDWR)  # wakes the thread's recv
        self._socket.close()
