"""Credentials of http jobs through the whole product in one process (embedded, on SQLite), sending to a real HTTP
server on loopback: the header a job names is filled in at send time and the receiver gets it, a rotation
reaches the next request, a deleted one dead-letters the job naming it, a redirect to another origin goes without
it, a receiver's echo of it is not kept; the key made beside the database; and `jobsched credentials` reading the
value from stdin."""

from __future__ import annotations

import stat
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest

from jobsched.client import BadRequest, Client, Job
from jobsched.handlers import JobTypes
from jobsched.server import Embedded, Settings
from shared.sealing_keys import key_file_beside
from tests.e2e.devmode import JOBSCHED
from tests.e2e.test_http_jobs import Receiver, Reply
from tests.secret_traces import assert_absent, sqlite_bytes

pytestmark = pytest.mark.e2e
TOKEN = "sk_live_e2e_5f4dcc3b5aa765d61d8327deb882cf99"
REFERENCE = {"credential": "billing-token", "prefix": "Bearer "}


@dataclass
class Node:
    """The product in this process, a client of tenant acme, and a loopback receiver to send to."""

    embedded: Embedded
    client: Client
    receiver: Receiver


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    settings = Settings(
        scheduler_tick=timedelta(milliseconds=50),
        auth="off",
        log_level="WARNING",
        http_jobs_allow=("127.0.0.1", "localhost"),
    )
    database = tmp_path_factory.mktemp("credentials") / "jobs.db"
    embedded = Embedded(database, settings=settings, handlers=JobTypes(), host="127.0.0.1", port=0)
    receiver = Receiver()
    try:
        with embedded, Client(embedded.url, tenant_id="acme") as client:
            yield Node(embedded, client, receiver)
    finally:
        receiver.server.shutdown()
        receiver.server.server_close()


def send(client: Client, payload: dict[str, Any], **options: Any) -> Job:
    made = client.create("http", payload, **options)
    assert made.id is not None
    return client.wait(made.id, timeout=60)


def test_the_receiver_gets_the_credential_and_the_job_keeps_only_its_name(node: Node) -> None:
    receiver = node.receiver
    client = node.client
    receiver.script["/charge"] = [Reply(200, b"charged")]
    client.set_credential("billing-token", TOKEN)
    done = send(client, {"url": receiver.url("/charge"), "headers": {"Authorization": REFERENCE, "X-Trace": "t"}})
    assert done.status == "completed", done.last_error
    [seen] = receiver.requests_to("/charge")
    assert (seen.headers["Authorization"], seen.headers["X-Trace"]) == (f"Bearer {TOKEN}", "t")
    assert done.payload["headers"]["Authorization"] == REFERENCE
    client.set_credential("billing-token", TOKEN + "-rotated")  # a rotation: the next request carries the new one
    again = send(client, {"url": receiver.url("/charge"), "headers": {"Authorization": REFERENCE}})
    assert again.status == "completed"
    assert receiver.requests_to("/charge")[-1].headers["Authorization"] == f"Bearer {TOKEN}-rotated"
    assert [c.name for c in client.credentials()] == ["billing-token"]


def test_a_credential_deleted_since_the_job_was_made_dead_letters_it_naming_the_credential(
    node: Node,
) -> None:
    receiver = node.receiver
    client = node.client
    receiver.script["/later"] = [Reply(200)]
    client.set_credential("short-lived", "v-1")
    made = client.create(
        "http",
        {"url": receiver.url("/later"), "headers": {"X-Key": {"credential": "short-lived"}}},
        scheduled_at="2099-01-01T00:00:00Z",  # not due: its credential goes before it runs
        max_attempts=5,
    )
    assert made.id is not None
    client.delete_credential("short-lived")
    client.update(made.id, scheduled_at="2000-01-01T00:00:00Z")  # due now: it runs without its credential
    done = client.wait(made.id, timeout=60)
    assert (done.status, done.attempts) == ("dlq", 1)  # not retried: it will not come back by waiting
    assert done.last_error is not None
    assert "payload.headers.X-Key: no credential named 'short-lived'" in done.last_error
    [attempt] = client.executions(made.id)
    assert attempt.outcome == "failed"
    assert receiver.requests_to("/later") == []  # nothing was sent


def test_a_redirect_to_another_origin_goes_without_the_credential(node: Node) -> None:
    receiver = node.receiver
    client = node.client
    client.set_credential("billing-token", TOKEN)
    elsewhere = receiver.url("/landed").replace("127.0.0.1", "localhost")
    receiver.script["/same"] = [Reply(307, b"", {"Location": "/landed-here"})]
    receiver.script["/landed-here"] = [Reply(200)]
    receiver.script["/away"] = [Reply(307, b"", {"Location": elsewhere})]
    receiver.script["/landed"] = [Reply(200)]
    for path in ("/same", "/away"):
        done = send(
            client, {"url": receiver.url(path), "headers": {"Authorization": REFERENCE}, "followRedirects": True}
        )
        assert done.status == "completed", done.last_error
    assert receiver.requests_to("/landed-here")[-1].headers["Authorization"] == f"Bearer {TOKEN}"
    assert "Authorization" not in receiver.requests_to("/landed")[-1].headers


def test_a_receiver_that_echoes_the_credential_does_not_put_it_in_the_result(node: Node) -> None:
    receiver = node.receiver
    client = node.client
    client.set_credential("billing-token", TOKEN)
    receiver.script["/echo"] = [Reply(401, f"invalid token Bearer {TOKEN}".encode(), {"WWW-Authenticate": TOKEN})]
    done = send(client, {"url": receiver.url("/echo"), "headers": {"Authorization": REFERENCE}})
    assert done.status == "dlq"
    assert done.result is not None
    assert done.result["body"] == "invalid token Bearer [credential]"
    for text in (str(done.raw), str([a.raw for a in client.executions(done.id)])):
        assert_absent(TOKEN, text, "the job and its attempts")


def test_the_embedded_mode_keeps_its_key_beside_the_database_and_no_value_in_it(node: Node) -> None:
    database = node.embedded.path
    key_file = key_file_beside(database)
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    node.client.set_credential("at-rest", TOKEN + "-at-rest")
    assert_absent(TOKEN + "-at-rest", sqlite_bytes(database), "the SQLite file")


def test_the_cli_reads_the_value_from_stdin_never_from_its_arguments(node: Node) -> None:
    def jobsched(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        command = [JOBSCHED, "--url", node.client.base_url, "--tenant", "cli", "credentials", *args]
        return subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=60, check=False)

    made = jobsched("set", "cli-token", stdin=TOKEN + "-cli\n")
    assert made.returncode == 0, made.stderr
    assert "cli-token" in made.stdout
    listed = jobsched("list", "-o", "json")
    assert listed.returncode == 0, listed.stderr
    assert '"name": "cli-token"' in listed.stdout
    assert '"tenantId": "cli"' in listed.stdout
    empty = jobsched("set", "cli-empty", stdin="")
    assert empty.returncode == 2
    assert "no value given" in empty.stderr
    extra = jobsched("set", "cli-token", TOKEN)  # a value as an argument is no option
    assert extra.returncode == 2
    deleted = jobsched("delete", "cli-token")
    assert (deleted.returncode, deleted.stdout.strip()) == (0, "deleted: cli-token")
    gone = jobsched("delete", "cli-token")
    assert gone.returncode == 3
    for done in (made, listed, empty, deleted, gone):
        assert_absent(TOKEN + "-cli", done.stdout + done.stderr, "the command's output")
    with Client(node.client.base_url, tenant_id="cli") as cli:
        assert cli.credentials() == []


def test_a_job_naming_a_credential_it_lacks_is_refused_when_created(node: Node) -> None:
    receiver = node.receiver
    with pytest.raises(BadRequest, match=r"payload\.headers\.Authorization: no credential named 'never-set'"):
        node.client.create(
            "http", {"url": receiver.url("/x"), "headers": {"Authorization": {"credential": "never-set"}}}
        )
