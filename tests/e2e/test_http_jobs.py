"""The `http` job type through the whole product in one process (embedded: scheduler, executors and API on
SQLite), sending to real HTTP servers the tests start on loopback (opened by HTTP_JOBS_ALLOW): what each response
makes of the attempt and the job, what the receiver gets (verified with the snippets docs/http-jobs.md gives),
and the addresses refused by default."""

from __future__ import annotations

import json
import re
import select
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from jobsched.client import Client, Conflict, Job, NotFound
from jobsched.handlers import JobTypes
from jobsched.payloads import with_article
from jobsched.server import Embedded, Settings
from tests.support import wait_until

pytestmark = pytest.mark.e2e
DOC = Path(__file__).resolve().parents[2] / "docs" / "http-jobs.md"
DRIP_EVERY_S = 0.2
MAX_DRIPS = 150  # 30 s: a client that never lets go still ends the drip


@dataclass
class Reply:
    status: int = 200
    body: bytes = b"ok"
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    raw: bytes | None = None  # written as it is instead (status line, headers, body, cut wherever it is), then closed
    drip: bytes = b""  # after `raw`, written every DRIP_EVERY_S until the client lets go of the connection


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    at: float


class Receiver:
    """A loopback HTTP server: per path, the replies to give in turn (the last one repeats); what it was sent;
    `let_go`: the paths whose drip the client closed the connection under."""

    def __init__(self) -> None:
        self.script: dict[str, list[Reply]] = {}
        self.seen: list[Seen] = []
        self.let_go: list[str] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                path = self.path
                receiver.seen.append(Seen(self.command, path, dict(self.headers), body, time.time()))
                replies = receiver.script.get(path, [Reply(404, b"no such path")])
                reply = replies.pop(0) if len(replies) > 1 else replies[0]
                time.sleep(reply.delay_s)
                if reply.raw is not None:
                    self.close_connection = True
                    self.wfile.write(reply.raw)
                    if reply.drip:
                        self._drip(reply.drip)
                    return
                self.send_response(reply.status)
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(reply.body)))
                self.end_headers()
                self.wfile.write(reply.body)

            def _drip(self, piece: bytes) -> None:
                for _ in range(MAX_DRIPS):
                    self.wfile.write(piece)
                    # Waits for the next piece's time, or for the client to close the connection (readable, empty).
                    readable, _, _ = select.select([self.connection], [], [], DRIP_EVERY_S)
                    if readable and not self.connection.recv(1):
                        receiver.let_go.append(self.path)
                        return

            do_GET = do_POST = do_PUT = _serve

            def log_message(self, *args: Any) -> None:
                return None

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request: Any, client_address: Any) -> None:
                return None  # a client gone before the reply (the timeout test's): nothing to tell

        self.server = Server(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def requests_to(self, path: str) -> list[Seen]:
        return [s for s in self.seen if s.path == path]


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    made = Receiver()
    yield made
    made.server.shutdown()
    made.server.server_close()


def node(allow: tuple[str, ...]) -> Iterator[Client]:
    settings = Settings(scheduler_tick=timedelta(milliseconds=50), auth="off", http_jobs_allow=allow)
    with tempfile.TemporaryDirectory(prefix="jobsched-http-") as directory:
        embedded = Embedded(
            Path(directory) / "jobs.db", settings=settings, handlers=JobTypes(), host="127.0.0.1", port=0
        )
        with embedded, Client(embedded.url, tenant_id="acme") as client:
            yield client


@pytest.fixture(scope="module")
def client() -> Iterator[Client]:
    yield from node(("127.0.0.1",))


def send(client: Client, payload: dict[str, Any], **options: Any) -> Job:
    made = client.create("http", payload, **options)
    assert made.id is not None
    return client.wait(made.id, timeout=60)


def test_a_2xx_completes_the_job_and_the_receiver_can_verify_it_with_the_documented_snippets(
    client: Client, receiver: Receiver
) -> None:
    receiver.script["/charge"] = [Reply(201, b'{"charged": true}', {"Content-Type": "application/json"})]
    done = send(client, {"url": receiver.url("/charge"), "json": {"invoice": 42}, "headers": {"X-Trace": "t-1"}})
    assert done.status == "completed"
    assert done.result is not None
    assert (done.result["status"], done.result["body"], done.result["headers"]["content-type"]) == (
        201,
        '{"charged": true}',
        "application/json",
    )
    [seen] = receiver.requests_to("/charge")
    assert (seen.method, seen.body, seen.headers["X-Trace"]) == ("POST", b'{"invoice":42}', "t-1")
    assert seen.headers["Content-Type"] == "application/json"
    assert (seen.headers["Idempotency-Key"], seen.headers["Jobsched-Attempt"]) == (done.id, "1")
    secrets = [s["secret"] for s in httpx.get(f"{client.base_url}/signing-secrets", params={"tenantId": "acme"}).json()]
    assert len(secrets) == 1
    signature = seen.headers["Jobsched-Signature"]
    assert re.fullmatch(r"t=\d+,v1=[0-9a-f]{64}", signature)
    python_verify = documented_python_verify()
    assert python_verify(seen.body, signature, secrets)
    assert not python_verify(seen.body + b" ", signature, secrets)  # a body changed on the way
    assert not python_verify(seen.body, signature, ["whsec_another"])
    assert node_verifies(seen.body, signature, secrets)
    assert not node_verifies(seen.body, signature, ["whsec_another"])


def test_a_rotation_signs_with_both_live_secrets_then_with_the_new_one(client: Client, receiver: Receiver) -> None:
    receiver.script["/rotate"] = [Reply(200)]
    verify = documented_python_verify()

    def signatures_after_a_job() -> int:
        send(rotating, {"url": receiver.url("/rotate")})
        return receiver.requests_to("/rotate")[-1].headers["Jobsched-Signature"].count("v1=")

    with Client(client.base_url, tenant_id="rotating") as rotating:
        assert rotating.signing_secrets() == []  # made on the tenant's first http job
        assert signatures_after_a_job() == 1
        [first] = rotating.signing_secrets()
        second = rotating.add_signing_secret()
        with pytest.raises(Conflict, match="remove one first"):
            rotating.add_signing_secret()
        wait_until(lambda: signatures_after_a_job() == 2, 30, "requests signed with both live secrets")
        last = receiver.requests_to("/rotate")[-1]
        for secret in (first.secret, second.secret):
            assert verify(last.body, last.headers["Jobsched-Signature"], [secret])
        rotating.remove_signing_secret(first.id)
        with pytest.raises(NotFound):
            rotating.remove_signing_secret(first.id)
        wait_until(lambda: signatures_after_a_job() == 1, 30, "requests signed with the new secret only")
        last = receiver.requests_to("/rotate")[-1]
        assert verify(last.body, last.headers["Jobsched-Signature"], [second.secret])
        assert not verify(last.body, last.headers["Jobsched-Signature"], [first.secret])


def test_a_500_is_retried_with_backoff_then_succeeds(client: Client, receiver: Receiver) -> None:
    receiver.script["/flaky"] = [Reply(500, b"database is down"), Reply(200, b"done")]
    done = send(client, {"url": receiver.url("/flaky"), "method": "PUT", "body": "x"}, max_attempts=3)
    assert (done.status, done.attempts, done.result["status"]) == ("completed", 1, 200)
    failed, succeeded = client.executions(done.id)
    assert (failed.outcome, failed.error, failed.result["status"]) == (
        "failed",
        "HTTP 500 Internal Server Error: database is down",
        500,
    )
    assert succeeded.outcome == "succeeded"
    first, second = receiver.requests_to("/flaky")
    assert [first.headers["Jobsched-Attempt"], second.headers["Jobsched-Attempt"]] == ["1", "2"]
    assert first.headers["Idempotency-Key"] == second.headers["Idempotency-Key"] == done.id
    assert second.at - first.at >= 1.9  # the backoff's first retry: 2 s


def test_a_429_is_retried_no_sooner_than_its_retry_after(client: Client, receiver: Receiver) -> None:
    receiver.script["/busy"] = [Reply(429, b"slow down", {"Retry-After": "4"}), Reply(200)]
    done = send(client, {"url": receiver.url("/busy")})
    assert done.status == "completed"
    first, second = receiver.requests_to("/busy")
    assert second.at - first.at >= 3.9  # not the backoff's 2 s


def test_a_404_goes_to_the_dlq_at_once(client: Client, receiver: Receiver) -> None:
    receiver.script["/gone"] = [Reply(404, b"no such invoice\nat all")]
    done = send(client, {"url": receiver.url("/gone")}, max_attempts=5)
    assert (done.status, done.attempts) == ("dlq", 1)
    assert done.last_error == "gave up: HTTP 404 Not Found: no such invoice at all"
    assert done.result["status"] == 404
    assert len(receiver.requests_to("/gone")) == 1


def test_a_request_past_its_timeout_fails_at_its_deadline(client: Client, receiver: Receiver) -> None:
    receiver.script["/slow"] = [Reply(200, delay_s=5)]
    started = time.monotonic()
    done = send(client, {"url": receiver.url("/slow"), "timeoutSeconds": 0.5}, max_attempts=1)
    assert (done.status, done.last_error) == ("dlq", "no response within 0.5s")
    [record] = client.executions(done.id)
    assert record.duration_ms is not None
    assert record.duration_ms < 2500
    assert time.monotonic() - started < 4.5  # not the server's 5 s


def test_a_response_cut_short_fails_the_attempt_and_is_retried(client: Client, receiver: Receiver) -> None:
    receiver.script["/cut"] = [
        Reply(raw=b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n0123456789"),
        Reply(200, b"whole"),
    ]
    done = send(client, {"url": receiver.url("/cut")}, max_attempts=2)
    assert (done.status, done.attempts, done.result["body"], done.result["truncated"]) == (
        "completed",
        1,
        "whole",
        False,
    )
    cut, whole = client.executions(done.id)
    assert (cut.outcome, cut.error, cut.result) == (
        "failed",
        "the response ended after 10 of 1000 bytes (HTTP 200 OK)",
        None,
    )
    assert whole.outcome == "succeeded"
    receiver.script["/unfinished"] = [Reply(raw=b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")]
    unfinished = send(client, {"url": receiver.url("/unfinished")}, max_attempts=1)
    assert (unfinished.status, unfinished.last_error, unfinished.result) == (
        "dlq",
        "the response ended after 5 bytes, without its last chunk (HTTP 200 OK)",
        None,
    )


def test_a_response_dripping_past_its_timeout_fails_at_its_deadline_every_time(
    client: Client, receiver: Receiver
) -> None:
    # The receiver drips until the client lets go, so each deadline falls within a body, framed each way; all of the
    # jobs run at once. The attempt fails whether the socket's timeout or the cutoff's shutdown stops the read.
    framings = {
        "/drip-to-the-close": (b"Connection: close\r\n", b"x"),
        "/drip-content-length": (b"Content-Length: 1000\r\n", b"x"),
        "/drip-chunked": (b"Transfer-Encoding: chunked\r\n", b"1\r\nx\r\n"),
    }
    made = []
    for path, (head, piece) in framings.items():
        receiver.script[path] = [Reply(raw=b"HTTP/1.1 200 OK\r\n" + head + b"\r\n", drip=piece)]
        made.append(client.create("http", {"url": receiver.url(path), "timeoutSeconds": 0.5}, max_attempts=1))
    for job in made:
        assert job.id is not None
        done = client.wait(job.id, timeout=60)
        assert (done.status, done.last_error, done.result) == (
            "dlq",
            "the response did not end within 0.5s (HTTP 200 OK)",
            None,
        ), done.payload["url"]
    wait_until(lambda: sorted(receiver.let_go) == sorted(framings), 30, "every drip let go at its deadline")


def test_a_whole_body_that_ends_at_a_clean_close_completes_the_job(client: Client, receiver: Receiver) -> None:
    receiver.script["/to-the-close"] = [Reply(raw=b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + b"a" * 3000)]
    done = send(client, {"url": receiver.url("/to-the-close")}, max_attempts=1)
    assert done.status == "completed"
    assert (done.result["bodyBytes"], done.result["body"], done.result["truncated"]) == (3000, "a" * 2000, True)


def test_a_redirect_is_not_followed_unless_the_job_asks(client: Client, receiver: Receiver) -> None:
    receiver.script["/moved"] = [Reply(302, b"", {"Location": "/final"})]
    receiver.script["/final"] = [Reply(200, b"arrived")]
    stayed = send(client, {"url": receiver.url("/moved")})
    assert stayed.status == "dlq"
    assert "a redirect to /final, not followed" in (stayed.last_error or "")
    assert receiver.requests_to("/final") == []
    followed = send(client, {"url": receiver.url("/moved"), "method": "POST", "body": "x", "followRedirects": True})
    assert followed.status == "completed"
    assert followed.result["url"] == receiver.url("/final")
    [hop] = receiver.requests_to("/final")
    assert (hop.method, hop.body) == ("GET", b"")  # a 302 becomes a GET
    receiver.script["/loop"] = [Reply(307, b"", {"Location": "/loop"})]
    looped = send(client, {"url": receiver.url("/loop"), "followRedirects": True})
    assert looped.status == "dlq"
    assert "a redirect to /loop, not followed after 5 redirects" in (looped.last_error or "")
    assert len(receiver.requests_to("/loop")) == 6  # the first request and five hops


def test_a_payload_that_is_not_a_request_is_refused_when_created(client: Client) -> None:
    url = f"{client.base_url}/jobs"
    base = {"idempotencyKey": "bad-http", "tenantId": "acme", "jobType": "http", "scheduledAt": "2026-12-04T00:00:00Z"}
    for payload, reason in (
        ({}, "payload.url is the absolute"),
        ({"url": "ftp://example.com/x"}, "http:// or https://"),
        ({"url": "http://user:pw@example.com/"}, "no user or password"),
        ({"url": "https://example.com/", "method": "TRACE"}, "payload.method"),
        ({"url": "https://example.com/", "headers": {"Host": "x"}}, "set by jobsched"),
        ({"url": "https://example.com/", "headers": {"X-A": "a\r\nb"}}, "printable ASCII"),
        ({"url": "https://example.com/", "body": "a", "json": {}}, "give one"),
        ({"url": "https://example.com/", "timeoutSeconds": 0}, "timeoutSeconds"),
    ):
        answer = httpx.post(url, json={**base, "payload": payload})
        assert answer.status_code == 400, payload
        assert reason in answer.json()["error"], answer.json()
    assert httpx.get(f"{client.base_url}/jobs", params={"tenantId": "acme", "jobType": "http"}).status_code == 200


def test_every_blocked_address_class_is_refused_before_connecting(receiver: Receiver) -> None:
    receiver.script["/never"] = [Reply(200)]
    port = receiver.port
    targets = {
        f"http://127.0.0.1:{port}/never": "loopback",
        f"http://[::1]:{port}/never": "loopback",
        f"http://[::ffff:127.0.0.1]:{port}/never": "loopback",
        f"http://localhost:{port}/never": "loopback",
        f"http://2130706433:{port}/never": "loopback",  # 127.0.0.1 as one number: resolved, then judged
        "http://10.1.2.3/never": "private",
        "http://192.168.0.1/never": "private",
        "http://169.254.169.254/latest/meta-data/": "link-local",
        "http://100.64.0.1/": "non-public",
        "http://0.0.0.0/": "unspecified",
    }
    for client in node(()):  # the default: no HTTP_JOBS_ALLOW
        for url, kind in targets.items():
            done = send(client, {"url": url}, max_attempts=3)
            assert (done.status, done.attempts) == ("dlq", 1), url
            said = f"{with_article(kind + ' address')}, which http jobs may not reach"  # an unspecified one
            assert said in (done.last_error or ""), done.last_error
            if "://localhost" in url or "://2130706433" in url:  # names: what they resolve to is not the tenant's
                assert "resolves to" in (done.last_error or ""), done.last_error
                assert "127.0.0.1" not in (done.last_error or ""), done.last_error
                assert "::1" not in (done.last_error or ""), done.last_error
    assert receiver.requests_to("/never") == []


def documented_snippet(language: str, marker: str) -> str:
    blocks = re.findall(rf"```{language}\n(.*?)```", DOC.read_text(), re.DOTALL)
    [found] = [str(b) for b in blocks if marker in b]
    return found


def documented_python_verify() -> Any:
    namespace: dict[str, Any] = {}
    exec(documented_snippet("python", "def verify"), namespace)  # the receiver's code, as the docs give it
    return namespace["verify"]


def node_verifies(body: bytes, header: str, secrets: list[str]) -> bool:
    script = documented_snippet("js", "function verify") + (
        "\nconst body = require('node:fs').readFileSync(0);"
        "\nprocess.exit(verify(body, process.argv[1], JSON.parse(process.argv[2])) ? 0 : 3);\n"
    )
    done = subprocess.run(
        ["node", "-e", script, header, json.dumps(secrets)], input=body, capture_output=True, timeout=30, check=False
    )
    assert done.returncode in (0, 3), done.stderr
    return done.returncode == 0
