"""A real HTTP/1.1 relay in front of a server that loses chosen responses: the request reaches the server and
is processed, the client gets its connection closed instead of the answer (what a network failure after the
server committed looks like)."""

from __future__ import annotations

import socket
import threading


def _read_message(conn: socket.socket) -> bytes | None:
    """One HTTP/1.1 message (headers and a Content-Length body) from `conn`; None at end of stream."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        body += chunk
    return head + b"\r\n\r\n" + body


class LossyProxy:
    def __init__(self, target_port: int, lose: int) -> None:
        """Relay to 127.0.0.1:`target_port`, losing the responses of the first `lose` requests."""
        self._target = ("127.0.0.1", target_port)
        self._to_lose = lose
        self._lock = threading.Lock()
        self.requests = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True, name="lossy-proxy").start()

    def close(self) -> None:
        self._listener.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._relay, args=(client,), daemon=True).start()

    def _relay(self, client: socket.socket) -> None:
        with client, socket.create_connection(self._target) as server:
            while (request := _read_message(client)) is not None:
                server.sendall(request)
                response = _read_message(server)
                with self._lock:
                    self.requests += 1
                    lose = self._to_lose > 0
                    self._to_lose -= lose
                if response is None or lose:
                    return  # the server has answered; the client never hears it
                client.sendall(response)
