"""One tenant cannot lock the others out of the API, over real sockets, in both binaries that serve it
(`jobsched dev` on SQLite, `jobsched api` on the MongoDB store).

The attacks of the issue that found this: a key whose connections send their headers and then trickle a
body (each holds its request in flight until the body deadline), and a key whose connections ask for large
listings and never read them (each holds its request while the server waits to write). A key's requests hold
at most its share of what is in flight; a client that stops reading is cut off after the send deadline;
health probes never count."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import httpx2 as httpx
import pytest

from shared.keys.base import KeyStore, Role
from shared.keys.manage import issue_key
from shared.store.mongo.keys import MongoKeyStore
from shared.store.sqlite.keys import SqliteKeyStore
from tests.conftest import Launch
from tests.e2e.devmode import Dev
from tests.support import free_port, wait_until

PAYLOAD_BYTES = 60_000
LISTED_JOBS = 200  # a 12 MB listing: far more than the socket buffers between a client that reads nothing and us
SMALL_WINDOW = 4096


@dataclass
class Api:
    port: int
    keys: KeyStore | None

    def key(self, tenant: str, role: Role = Role.WRITER) -> str:
        assert self.keys is not None
        return issue_key(self.keys, tenant, role, f"{tenant} {role.value}", by="tests")[0]

    def client(self, key: str | None = None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return httpx.Client(base_url=f"http://127.0.0.1:{self.port}", headers=headers, timeout=30)


StartApi = Callable[..., Api]


@pytest.fixture(params=["dev", pytest.param("api", marks=pytest.mark.servers)])
def start_api(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StartApi]:
    """Starts the binary with the given settings (AUTH=required gets a key store to mint keys in)."""
    with ExitStack() as cleanup:

        def start(**settings: str) -> Api:
            keys: KeyStore | None = None
            if request.param == "dev":
                dev = Dev(tmp_path)
                cleanup.callback(dev.http.close)
                cleanup.callback(dev.start(**settings).stop)
                port = dev.port
                if settings.get("AUTH") == "required":
                    keys = SqliteKeyStore(dev.db)
            else:
                launch: Launch = request.getfixturevalue("launch")
                port = free_port()
                process = launch("api", API_PORT=str(port), **settings)
                with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=5) as http:
                    wait_until(lambda: _ready(http, process.process.poll()), 60, "the API to be ready")
                if settings.get("AUTH") == "required":
                    env = request.getfixturevalue("product_env")
                    keys = MongoKeyStore.connect(env["MONGO_URI"], env["MONGO_DB"])
                    cleanup.callback(keys.close)
            if keys is not None:
                keys.ensure_schema()
            return Api(port, keys)

        yield start


def _ready(http: httpx.Client, exited: int | None) -> bool:
    assert exited is None, "the API exited during start-up"
    try:
        return http.get("/readyz").status_code == 200
    except httpx.HTTPError:
        return False


def seed_listing(api: Api, key: str | None, tenant: str, jobs: int = LISTED_JOBS, size: int = PAYLOAD_BYTES) -> None:
    """Future jobs of `tenant` with large payloads: by default its listing is far larger than socket buffers."""
    with api.client(key) as http:
        for i in range(jobs):
            body = {
                "idempotencyKey": f"big-{i}",
                "tenantId": tenant,
                "jobType": "noop",
                "payload": {"filler": "x" * size},
                "scheduledAt": "2099-01-01T00:00:00Z",
            }
            assert http.post("/jobs", json=body).status_code == 201


def open_unread_listing(port: int, key: str | None, tenant: str, window: int = SMALL_WINDOW) -> socket.socket:
    """A connection that asks for the tenant's whole listing and does not read it (yet)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, window)  # before connecting: the window it offers
    sock.connect(("127.0.0.1", port))
    auth = f"Authorization: Bearer {key}\r\n" if key else ""
    request = f"GET /jobs?tenantId={tenant}&limit=5000 HTTP/1.1\r\nHost: localhost\r\n{auth}\r\n"
    sock.sendall(request.encode())
    return sock


def open_trickled_body(port: int, key: str | None) -> socket.socket:
    """A connection that sends a create's headers and the first byte of its 200-byte body, then nothing."""
    sock = socket.create_connection(("127.0.0.1", port))
    auth = f"Authorization: Bearer {key}\r\n" if key else ""
    head = (
        f"POST /jobs HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n{auth}Content-Length: 200\r\n\r\n"
    )
    sock.sendall(head.encode() + b"{")
    return sock


def refused_for_its_share(http: httpx.Client, method: str, url: str) -> bool:
    response = http.request(method, url, json={} if method == "POST" else None, params={"limit": "1"})
    if response.status_code == 503:
        assert "their share" in response.json()["error"], response.text
        return True
    assert response.status_code in (200, 400), response.text  # admitted: its share is not full yet
    return False


def test_one_tenants_unread_listings_and_trickled_bodies_leave_the_api_to_the_others(start_api: StartApi) -> None:
    api = start_api(
        AUTH="required",
        API_MAX_IN_FLIGHT="24",
        API_MAX_IN_FLIGHT_PER_KEY="8",
        API_BODY_TIMEOUT="5m",  # the attack holds what it can for the whole test: only the shares protect
        API_SEND_TIMEOUT="5m",
        RATE_LIMIT="0",
    )
    reader_a, writer_a, writer_b = api.key("tenant-a", Role.READER), api.key("tenant-a"), api.key("tenant-b")
    for key in (reader_a, writer_a, writer_b):  # the keys work (made after the API started): only shares remain
        with api.client(key) as http:
            wait_until(lambda: http.get("/jobs", params={"limit": "1"}).status_code == 200, 30, "the key to work")
    seed_listing(api, writer_a, "tenant-a")
    with ExitStack() as held, api.client(reader_a) as a_reads, api.client(writer_a) as a_writes:
        # 24 connections of tenant A, as many as the API serves at once: more than enough to starve everyone.
        for _ in range(12):
            held.enter_context(open_unread_listing(api.port, reader_a, "tenant-a"))
            held.enter_context(open_trickled_body(api.port, writer_a))
        wait_until(
            lambda: refused_for_its_share(a_reads, "GET", "/jobs"), 30, "tenant A's reader key to hold its share"
        )
        wait_until(lambda: refused_for_its_share(a_writes, "POST", "/jobs"), 30, "tenant A's writer to hold its share")
        with api.client(writer_b) as b, api.client() as probe:
            for i in range(5):
                job = {
                    "idempotencyKey": f"b-{i}",
                    "jobType": "noop",
                    "payload": {},
                    "scheduledAt": "2099-01-01T00:00:00Z",
                }
                created = b.post("/jobs", json=job)
                assert created.status_code == 201, created.text
                assert b.get(f"/jobs/{created.json()['id']}").status_code == 200
                assert b.get("/jobs").status_code == 200
                assert probe.get("/healthz").status_code == 200
                assert probe.get("/readyz").status_code == 200


def test_a_client_that_stops_reading_is_cut_off_and_its_place_given_back(start_api: StartApi) -> None:
    api = start_api(API_MAX_IN_FLIGHT="1", API_SEND_TIMEOUT="1s")
    seed_listing(api, None, "tenant-a")
    with api.client() as http, open_unread_listing(api.port, None, "tenant-a") as unread:
        listing = "/jobs?tenantId=tenant-a&limit=1"
        wait_until(lambda: http.get(listing).status_code == 503, 30, "the unread listing to hold the only place")
        wait_until(lambda: http.get(listing).status_code == 200, 30, "the server to cut the reader off")
        with pytest.raises(ConnectionResetError):  # reset, not ended: the client knows it was cut off
            read_to_the_end(unread)


def test_a_client_that_reads_slowly_keeps_its_connection(tmp_path: Path) -> None:
    """Writing waits longer than the send deadline for a slow reader to take each large job (the server resumes
    writing only once what waits is nearly gone), but the client takes some of it every time: it is reading,
    and gets the whole answer. (The answer is larger than the socket buffers, so writing does wait.)"""
    dev = Dev(tmp_path)
    process = dev.start(API_SEND_TIMEOUT="100ms")
    try:
        seed_listing(Api(dev.port, None), None, "tenant-a", jobs=24, size=250_000)
        with open_unread_listing(dev.port, None, "tenant-a", window=65536) as slow:
            received = b""
            while not received.endswith(b"\r\n0\r\n\r\n"):  # the chunked answer's last chunk
                chunk = slow.recv(65536)
                assert chunk, "the server ended the answer before its last chunk"
                received += chunk
                time.sleep(0.03)  # about 2 MB/s: a 250 KB job takes longer than the deadline to be read
    finally:
        process.stop()
        dev.http.close()
    assert received.count(b'"filler"') == 24


def read_to_the_end(sock: socket.socket) -> None:
    while sock.recv(1 << 20):
        pass


def test_probes_answer_while_every_place_is_held(start_api: StartApi) -> None:
    api = start_api(API_MAX_IN_FLIGHT="2", API_BODY_TIMEOUT="5m")
    with ExitStack() as held, api.client() as http:
        held.enter_context(open_trickled_body(api.port, None))
        held.enter_context(open_trickled_body(api.port, None))
        wait_until(lambda: http.get("/jobs", params={"tenantId": "t"}).status_code == 503, 30, "the places held")
        assert http.get("/healthz").status_code == 200
        assert http.get("/readyz").status_code == 200
