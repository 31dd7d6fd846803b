"""jobsched.client (sync and async) against a running `jobsched dev`: every call, the typed errors, and the
retries on a real 503 (the store locked by another process), on refused connections and on a lost response."""

from __future__ import annotations

import asyncio
import sqlite3
import urllib.request
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import pytest

from jobsched.client import (
    AsyncClient,
    BadRequest,
    Client,
    Conflict,
    ConnectionFailed,
    DuplicateJob,
    DuplicateWorkflow,
    Job,
    NotFound,
    Retries,
    Unauthorized,
    Unavailable,
    WaitTimeout,
)
from tests.e2e.devmode import Dev
from tests.e2e.lossy_proxy import LossyProxy
from tests.support import free_port, wait_until

PATIENT = Retries(attempts=60, base_s=0.1, cap_s=0.5)


def test_every_call_of_the_sync_client(dev: Dev) -> None:
    dev.start()
    with Client(dev.base_url, tenant_id="client-t") as client:
        job = client.create("log-message", {"message": "hi"})
        assert (job.status, job.tenant_id, job.job_type) == ("pending", "client-t", "log-message")
        assert job.idempotency_key.startswith("log-message-")  # generated
        done = client.wait(job.id)
        assert done.status == "completed"
        assert done.finished
        assert client.get(job.id) == done
        [execution] = client.executions(job.id)
        assert (execution.attempt, execution.outcome, execution.job_id) == (1, "succeeded", job.id)

        later = client.create("noop", scheduled_at=datetime.now(UTC) + timedelta(hours=1), priority=3)
        assert client.cancel(later.id).status == "cancelled"
        with pytest.raises(Conflict) as refused:
            client.cancel(later.id)
        assert refused.value.status == 409
        assert "cancelled" in refused.value.message

        dead = client.create("flaky", {"failRate": 1}, max_attempts=1)
        assert client.wait(dead.id, "dlq").status == "dlq"
        assert client.retry(dead.id).status == "pending"
        assert client.wait(dead.id, ["dlq"]).attempts == 2

        template = client.create(
            "noop",
            cron="0 3 * * *",
            timezone="Europe/Berlin",
            idempotency_key="nightly",
            policy={"overlap": "skip", "remainingRuns": 5},
        )
        assert (template.cron, template.timezone, template.status) == ("0 3 * * *", "Europe/Berlin", "pending")
        assert (template.raw["overlap"], template.raw["remainingRuns"]) == ("skip", 5)

        ids = {j.id for j in client.list()}
        assert {job.id, later.id, dead.id, template.id} <= ids
        assert [j.id for j in client.list(status="cancelled")] == [later.id]
        assert len(client.list(limit=2)) == 2
        types = {t.name: t for t in client.job_types()}
        assert types["noop"].executors == 1
        assert types["noop"].last_seen_at is not None


def test_typed_errors_carry_the_apis_message_and_status(dev: Dev) -> None:
    dev.start()
    with Client(dev.base_url, tenant_id="client-t") as client:
        first = client.create("noop", idempotency_key="once", scheduled_at=datetime.now(UTC) + timedelta(hours=1))
        with pytest.raises(DuplicateJob) as duplicate:
            client.create("noop", idempotency_key="once")
        assert (duplicate.value.status, duplicate.value.job_id) == (409, first.id)
        assert "'once' already exists" in duplicate.value.message
        assert client.get(duplicate.value.job_id or "") == first  # the existing job is fetchable
        with pytest.raises(BadRequest) as bad:
            client.create("no-such-type")
        assert "unknown jobType 'no-such-type'; known types: flaky, http, log-message, noop, slow" in bad.value.message
        with pytest.raises(NotFound):
            client.get("66f9a1c2e4b0a3d5c8f12a01")
        with pytest.raises(WaitTimeout) as waited:
            client.wait(first.id, timeout=0.3)
        assert isinstance(waited.value.job, Job)
        assert waited.value.job.status == "pending"


def test_the_async_client_creates_waits_and_cancels_a_running_job(dev: Dev) -> None:
    dev.start()

    async def scenario() -> None:
        async with AsyncClient(dev.base_url, tenant_id="async-t") as client:
            quick = await client.create("noop")
            assert (await client.wait(quick.id)).status == "completed"
            slow = await client.create("slow", {"sleepMs": 60_000}, max_attempts=3)
            await client.wait(slow.id, "running", timeout=30)
            requested = await client.cancel(slow.id)
            assert (requested.status, requested.cancel_requested) == ("running", True)
            ended = await client.wait(slow.id, timeout=30)
            assert (ended.status, ended.attempts) == ("cancelled", 1)
            assert [e.outcome for e in await client.executions(slow.id)] == ["cancelled"]
            assert {t.name for t in await client.job_types()} >= {"noop", "slow"}
            assert [j.id for j in await client.list(status="cancelled")] == [slow.id]
            with pytest.raises(DuplicateJob):
                await client.create("noop", idempotency_key=quick.idempotency_key)

    asyncio.run(scenario())


def count_503(dev: Dev) -> float:
    """The creates answered 503 (a /readyz 503 while dev was starting is not the client's)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{dev.runs[-1].metrics_port}/metrics", timeout=5) as response:
        text = response.read().decode()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("api_requests_total{")
        and 'status="503"' in line
        and 'method="POST"' in line
        and 'route="/jobs"' in line
    )


def lock_store(dev: Dev) -> sqlite3.Connection:
    """Another process's write transaction on dev's database: its writes wait, then fail as unavailable."""
    holder = sqlite3.connect(dev.db, isolation_level=None, timeout=30)
    holder.execute("BEGIN IMMEDIATE")
    return holder


def test_a_create_that_meets_503s_is_retried_until_the_store_is_back(dev: Dev) -> None:
    dev.start()
    holder = lock_store(dev)
    with (
        Client(dev.base_url, tenant_id="retry-t", timeout=30, retries=PATIENT) as client,
        ThreadPoolExecutor(1) as pool,
    ):
        pending: Future[Job] = pool.submit(client.create, "noop", idempotency_key="through-503")
        wait_until(lambda: count_503(dev) >= 1, 60, "the API to answer 503 while the store is locked")
        assert not pending.done()
        holder.execute("ROLLBACK")
        holder.close()
        created = pending.result(timeout=60)
        assert created.idempotency_key == "through-503"
        assert [j.id for j in client.list()] == [created.id]


def test_503s_past_the_retries_are_unavailable(dev: Dev) -> None:
    dev.start()
    holder = lock_store(dev)
    try:
        with Client(dev.base_url, timeout=30, retries=Retries(attempts=2, base_s=0.05, cap_s=0.05)) as client:
            with pytest.raises(Unavailable) as unavailable:
                client.create("noop", tenant_id="t")
            assert unavailable.value.status == 503
            assert unavailable.value.message == "the job store is unavailable; retry later"
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert count_503(dev) == 2


def test_refused_connections_are_retried_until_the_server_is_up(dev: Dev) -> None:
    with Client(dev.base_url, tenant_id="early", retries=PATIENT) as client, ThreadPoolExecutor(1) as pool:
        early: Future[Job] = pool.submit(client.create, "noop", idempotency_key="before-start")
        dev.start()
        assert early.result(timeout=60).idempotency_key == "before-start"
    nowhere = Client(f"http://127.0.0.1:{free_port()}", retries=Retries(attempts=3, base_s=0.01, cap_s=0.01))
    with nowhere, pytest.raises(ConnectionFailed, match="ConnectError"):
        nowhere.get("66f9a1c2e4b0a3d5c8f12a01")


def test_a_create_whose_answer_was_lost_returns_the_job_it_made(dev: Dev) -> None:
    """The first try is processed but its answer lost; the retry's 409 names that job, which is returned."""
    dev.start()
    proxy = LossyProxy(dev.port, lose=1)
    try:
        with Client(f"http://127.0.0.1:{proxy.port}", tenant_id="lossy", retries=PATIENT) as client:
            job = client.create("noop", idempotency_key="answer-lost")
            assert job.idempotency_key == "answer-lost"
            assert proxy.requests == 3  # the lost create, the create answered 409, the get of the existing job
        assert [j["id"] for j in dev.http.get("/jobs", params={"tenantId": "lossy"}).json()] == [job.id]
        with Client(f"http://127.0.0.1:{proxy.port}", retries=PATIENT) as client, pytest.raises(DuplicateJob):
            client.create("noop", tenant_id="lossy", idempotency_key="answer-lost")  # a first try: no guessing
    finally:
        proxy.close()


def test_a_workflow_whose_answer_was_lost_is_returned_by_the_resend(dev: Dev) -> None:
    """As a create: the first submit is processed but its answer lost; the retry's 409 names the workflow."""
    dev.start()
    proxy = LossyProxy(dev.port, lose=1)
    try:
        with Client(f"http://127.0.0.1:{proxy.port}", tenant_id="lossy", retries=PATIENT) as client:
            flow = client.workflow("flow-answer-lost")
            flow.chain(flow.step("a", "noop"), flow.step("b", "noop"))
            workflow = flow.submit()
            assert [s.name for s in workflow.steps] == ["a", "b"]
            assert proxy.requests == 3  # the lost submit, the submit answered 409, the get of the existing one
            again = client.workflow("flow-answer-lost")
            again.step("a", "noop")
            with pytest.raises(DuplicateWorkflow) as taken:  # a first try: no guessing
                again.submit()
            assert taken.value.workflow_id == workflow.id
        assert [w["id"] for w in dev.http.get("/workflows", params={"tenantId": "lossy"}).json()] == [workflow.id]
    finally:
        proxy.close()


def test_a_retry_that_may_have_landed_is_not_sent_twice(dev: Dev) -> None:
    """A re-drive is not idempotent: after a lost answer the client reports the failure instead of resending."""
    dev.start()
    with Client(dev.base_url, tenant_id="redrive") as client:
        dead = client.create("flaky", {"failRate": 1}, max_attempts=1)
        client.wait(dead.id, "dlq")
    proxy = LossyProxy(dev.port, lose=1)
    try:
        with Client(f"http://127.0.0.1:{proxy.port}", retries=PATIENT) as client:
            with pytest.raises(ConnectionFailed):
                client.retry(dead.id)
            assert proxy.requests == 1
            # The lost re-drive ran once: one more attempt, back in the DLQ (a second re-drive would make three).
            wait_until(lambda: client.get(dead.id).attempts == 2, 30, "the re-driven attempt")
            again = client.wait(dead.id, "dlq")
            assert (again.attempts, len(client.executions(dead.id))) == (2, 2)
    finally:
        proxy.close()


def test_the_client_authenticates_with_its_api_key(dev: Dev) -> None:
    key = dev.new_api_key("acme")
    dev.start(AUTH="required")
    with Client(dev.base_url, api_key=key) as client:
        job = client.create("noop")  # the key's tenant
        assert job.tenant_id == "acme"
        assert client.wait(job.id).status == "completed"
        assert [j.id for j in client.list()] == [job.id]
        assert "noop" in {t.name for t in client.job_types()}
    with Client(dev.base_url) as anonymous, pytest.raises(Unauthorized) as refused:
        anonymous.get(job.id)
    assert refused.value.status == 401
