"""How one request of an http job reads its answer (shared/http_jobs/sending.py), against a loopback TCP server
that writes raw HTTP bytes: a body is whole only when its framing says it ended (all of its Content-Length, the
last chunk, or a clean close for a body delimited by the close); one cut short, by the receiver or by the deadline,
is no answer (Unanswered: the attempt fails and is retried). The response cap cuts a whole body on purpose:
`truncated`, never a failure."""

from __future__ import annotations

import select
import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from shared.http_jobs.outbound import OutboundPolicy
from shared.http_jobs.request import HttpRequest
from shared.http_jobs.sending import Response, Unanswered, send
from tests.support import wait_until

pytestmark = pytest.mark.unit

OK = b"HTTP/1.1 200 OK\r\n"
CHUNKED = OK + b"Transfer-Encoding: chunked\r\n\r\n"
LOOPBACK = OutboundPolicy.from_setting(["127.0.0.1"])
DRIP_EVERY_S = 0.2
DRIP_ROUNDS = 3
MAX_DRIPS = 150  # 30 s: a client that never lets go still ends the test's server


class RawReceiver:
    """A loopback TCP server for one connection: it reads the request's head, then lets `answer` write on the raw
    socket (any framing, cut wherever a test says) and closes it cleanly. `hung_up`: the client closed the
    connection while the answer was still writing to it."""

    def __init__(self, answer: Callable[[socket.socket, RawReceiver], None]) -> None:
        self.hung_up = threading.Event()
        self.body_writes = 0
        self._answer = answer
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True, name="raw-receiver").start()

    def close(self) -> None:
        self._listener.close()

    def _serve(self) -> None:
        try:
            conn, _ = self._listener.accept()  # one connection: send() makes one, and each test starts its receiver
        except OSError:
            return  # closed before any came
        with conn:
            head = b""
            while b"\r\n\r\n" not in head and (chunk := conn.recv(65536)):  # the GETs sent here have no body
                head += chunk
            try:
                self._answer(conn, self)
            except OSError:
                self.hung_up.set()

    def drip(self, conn: socket.socket, piece: bytes) -> None:
        """Write `piece` every DRIP_EVERY_S until the client lets go: the waits end as soon as it does."""
        for _ in range(MAX_DRIPS):
            conn.sendall(piece)
            self.body_writes += 1
            readable, _, _ = select.select([conn], [], [], DRIP_EVERY_S)
            if readable and not conn.recv(1):  # the client closed its side
                self.hung_up.set()
                return


@pytest.fixture
def serving() -> Iterator[Callable[[Callable[[socket.socket, RawReceiver], None]], RawReceiver]]:
    made: list[RawReceiver] = []

    def start(answer: Callable[[socket.socket, RawReceiver], None]) -> RawReceiver:
        made.append(RawReceiver(answer))
        return made[-1]

    yield start
    for receiver in made:
        receiver.close()


def get(receiver: RawReceiver, timeout_s: float = 5, max_body_bytes: int = 1024) -> Response:
    request = HttpRequest.from_payload(
        {"url": f"http://127.0.0.1:{receiver.port}/hook", "method": "GET", "timeoutSeconds": timeout_s}
    )
    return send(request, {}, LOOPBACK, time.monotonic() + timeout_s, max_body_bytes)


def writes(raw: bytes) -> Callable[[socket.socket, RawReceiver], None]:
    def answer(conn: socket.socket, receiver: RawReceiver) -> None:
        conn.sendall(raw)

    return answer


def drips(head: bytes, piece: bytes) -> Callable[[socket.socket, RawReceiver], None]:
    def answer(conn: socket.socket, receiver: RawReceiver) -> None:
        conn.sendall(head)
        receiver.drip(conn, piece)

    return answer


def chunked(body: bytes, size: int = 1000) -> bytes:
    pieces = [body[i : i + size] for i in range(0, len(body), size)]
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"


def test_a_body_shorter_than_its_content_length_is_no_answer(serving: Callable[..., RawReceiver]) -> None:
    receiver = serving(writes(OK + b"Content-Length: 1000\r\n\r\n" + b"0123456789"))
    with pytest.raises(Unanswered, match=r"^the response ended after 10 of 1000 bytes \(HTTP 200 OK\)$") as raised:
        get(receiver)
    assert not raised.value.timed_out  # the receiver ended it: a network failure, not the deadline


@pytest.mark.parametrize(
    "cut",
    [
        pytest.param(b"5\r\nhello\r\n", id="after-a-whole-chunk"),
        pytest.param(b"a\r\nhello", id="within-a-chunk"),
        pytest.param(b"5\r\nhello\r\n3", id="within-a-size-line"),
    ],
)
def test_a_chunked_body_without_its_last_chunk_is_no_answer(cut: bytes, serving: Callable[..., RawReceiver]) -> None:
    receiver = serving(writes(CHUNKED + cut))
    with pytest.raises(
        Unanswered, match=r"^the response ended after 5 bytes, without its last chunk \(HTTP 200 OK\)$"
    ) as raised:
        get(receiver)
    assert not raised.value.timed_out


@pytest.mark.parametrize(
    ("head", "piece"),
    [
        pytest.param(OK + b"Connection: close\r\n\r\n", b"x", id="to-the-close"),
        pytest.param(OK + b"Content-Length: 1000\r\n\r\n", b"x", id="content-length"),
        pytest.param(CHUNKED, b"1\r\nx\r\n", id="chunked"),
    ],
)
def test_a_body_dripping_past_the_deadline_is_no_answer_every_time(
    head: bytes, piece: bytes, serving: Callable[..., RawReceiver]
) -> None:
    # The receiver drips until the client lets go, so the deadline always falls within the body. Either the
    # socket's own timeout or the cutoff's shutdown (an empty read, as at an end) stops the read there, whichever
    # comes first: each time it is no answer. Rounds, because which one comes first varies from run to run.
    for _ in range(DRIP_ROUNDS):
        receiver = serving(drips(head, piece))
        with pytest.raises(Unanswered, match=r"^the response did not end within 0\.5s \(HTTP 200 OK\)$") as raised:
            get(receiver, timeout_s=0.5)
        assert raised.value.timed_out
        wait_until(receiver.hung_up.is_set, 30, "the receiver to see the connection closed at the deadline")
        assert receiver.body_writes >= 1  # the deadline came within the body, not before the head


@pytest.mark.parametrize(
    ("answer", "body"),
    [
        pytest.param(OK + b"Content-Length: 10\r\n\r\n0123456789", b"0123456789", id="content-length"),
        pytest.param(CHUNKED + chunked(b"0123456789", 4), b"0123456789", id="chunked"),
        pytest.param(OK + b"Connection: close\r\n\r\n0123456789", b"0123456789", id="to-a-clean-close"),
        pytest.param(CHUNKED + b"2\r\nok\r\n0\r\n", b"ok", id="no-trailer-end"),
        pytest.param(b"HTTP/1.1 204 No Content\r\n\r\n", b"", id="no-content"),
    ],
)
def test_a_body_that_ends_as_its_framing_says_is_whole(
    answer: bytes, body: bytes, serving: Callable[..., RawReceiver]
) -> None:
    response = get(serving(writes(answer)))
    assert (response.body, response.truncated) == (body, False)


@pytest.mark.parametrize(
    "answer",
    [
        pytest.param(OK + b"Content-Length: 5000\r\n\r\n" + b"a" * 5000, id="content-length"),
        pytest.param(CHUNKED + chunked(b"a" * 5000), id="chunked"),
        pytest.param(OK + b"Connection: close\r\n\r\n" + b"a" * 5000, id="to-the-close"),
    ],
)
def test_a_whole_body_larger_than_the_cap_is_kept_up_to_it_and_truncated(
    answer: bytes, serving: Callable[..., RawReceiver]
) -> None:
    response = get(serving(writes(answer)), max_body_bytes=1024)
    assert (response.status, response.body, response.truncated) == (200, b"a" * 1024, True)


def test_a_body_the_size_of_the_cap_is_not_truncated(serving: Callable[..., RawReceiver]) -> None:
    response = get(serving(writes(OK + b"Content-Length: 1024\r\n\r\n" + b"a" * 1024)), max_body_bytes=1024)
    assert (response.body, response.truncated) == (b"a" * 1024, False)
