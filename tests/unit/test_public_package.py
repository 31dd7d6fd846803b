"""The public `jobsched` package: job type collections, payload types, typed enqueueing and the testing helpers
(jobsched/handlers.py, payloads.py, testing.py)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, TypedDict

import pytest
from pydantic import BaseModel, ConfigDict, Field

import jobsched
from jobsched import HandlerContext, JobTypes, PayloadMismatch, testing
from jobsched.handlers import DuplicateHandler, ParentResult
from tests.support import REPO_ROOT


@dataclass(frozen=True)
class Report:
    day: str
    pages: int = 1


class Model(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    user_name: str = Field(alias="userName")


class Greeting(TypedDict):
    who: str


jobs = JobTypes()


@jobs.handler("write-report", timeout=60, max_attempts=5)
def write_report(report: Report, ctx: HandlerContext) -> str:
    return f"{report.day}: {report.pages} pages (attempt {ctx.attempt})"


@jobs.handler("greet")
async def greet(payload: Greeting, ctx: HandlerContext) -> str:
    return f"hello {payload['who']}"


@jobs.handler("by-model")
def by_model(payload: Model, ctx: HandlerContext) -> str:
    return payload.user_name


def test_the_decorated_function_is_still_the_function_and_knows_its_type() -> None:
    assert write_report(Report("2026-12-04"), testing.context()) == "2026-12-04: 1 pages (attempt 1)"
    assert write_report.name == "write-report"
    assert (write_report.defaults.timeout_s, write_report.defaults.max_attempts) == (60, 5)
    assert not write_report.is_async
    assert greet.is_async
    assert jobs.names() == ["by-model", "greet", "write-report"]
    assert jobs["greet"] is greet


def test_a_name_is_one_type_per_collection() -> None:
    collection = JobTypes()
    collection.handler("once")(lambda payload, ctx: None)
    with pytest.raises(DuplicateHandler, match="'once' is registered twice"):
        collection.handler("once")(lambda payload, ctx: None)
    other = JobTypes([write_report])
    other.include(jobs)  # the same JobType twice is no conflict
    assert "write-report" in other


def test_payloads_travel_as_json_objects_and_come_back_as_the_handler_types() -> None:
    assert write_report.encode(Report("2026-12-04", 3)) == {"day": "2026-12-04", "pages": 3}
    assert by_model.encode(Model(userName="x")) == {"userName": "x"}  # by alias: what model_validate reads
    assert greet.encode({"who": "ada"}) == {"who": "ada"}
    # The executors call `fn` with the stored object: it builds the handler's type first.
    assert write_report.fn({"day": "d", "pages": 2}, testing.context()) == "d: 2 pages (attempt 1)"
    assert by_model.fn({"userName": "m"}, testing.context()) == "m"
    # Keys the type does not have are ignored: an enqueuer may be deployed before the executors.
    assert write_report.fn({"day": "d", "colour": "red"}, testing.context()) == "d: 1 pages (attempt 1)"


def test_a_payload_of_another_type_is_refused_before_it_is_sent() -> None:
    with pytest.raises(TypeError, match="the payload must be a Report, not dict"):
        write_report.encode({"day": "d"})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="must be a dict"):
        greet.encode(["who"])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("stored", "reason"),
    [
        ({"pages": 2}, r"does not fit Report: 'day' is missing"),
        ({"day": 7}, r"does not fit Report.day: expected str, got a number"),
        ({"day": "d", "pages": True}, r"does not fit Report.pages: expected int, got a boolean"),
        ({"day": "d", "pages": "999"}, r"does not fit Report.pages: expected int, got a string"),
    ],
)
def test_a_stored_payload_that_does_not_fit_fails_the_attempt_with_its_reason(
    stored: dict[str, Any], reason: str
) -> None:
    with pytest.raises(PayloadMismatch, match=reason):
        write_report.fn(stored, testing.context())


def test_a_model_checks_its_own_fields() -> None:
    with pytest.raises(PayloadMismatch, match="does not fit Model"):
        by_model.fn({"nom": "m"}, testing.context())


def test_testing_run_calls_a_handler_as_an_executor_does() -> None:
    assert testing.run(write_report, Report("2026-12-04", 2)) == "2026-12-04: 2 pages (attempt 1)"
    assert testing.run(greet, {"who": "ada"}) == "hello ada"
    third = testing.context("write-report", attempt=3)
    assert testing.run(write_report, {"day": "d"}, third) == "d: 1 pages (attempt 3)"
    with pytest.raises(TypeError, match="not JSON serializable"):  # what the API would refuse as a payload
        testing.run(greet, {"who": datetime.now(UTC)})


def test_testing_arun_awaits_on_the_running_loop() -> None:
    async def in_a_loop() -> Any:
        return await testing.arun(greet, {"who": "grace"})

    assert asyncio.run(in_a_loop()) == "hello grace"


def test_testing_context_carries_a_cancellation_signal() -> None:
    cancelled = threading.Event()
    ctx = testing.context("write-report", cancelled=cancelled, tenant_id="acme")
    assert (ctx.job_type, ctx.tenant_id, ctx.attempt, ctx.cancelled.is_set()) == ("write-report", "acme", 1, False)
    cancelled.set()
    assert ctx.cancelled.is_set()
    assert ctx.deadline > ctx.scheduled_at


def test_the_old_client_import_path_still_works_with_a_warning() -> None:
    import sys

    sys.modules.pop("jobsched_client", None)
    with pytest.warns(DeprecationWarning, match="jobsched_client is deprecated"):
        import jobsched_client
    assert jobsched_client.Client is jobsched.Client
    assert jobsched_client.JobType is jobsched.ServedType


def test_a_context_gives_its_parents_results_read_once_in_dependsOn_order() -> None:
    reads: list[tuple[str, ...]] = []
    ctx = testing.context(parent_results={"b": 2, "a": {"rows": 1}})
    assert ctx.parents == ("b", "a")
    assert ctx.parent_results() == {"b": 2, "a": {"rows": 1}}

    def read(ids: Sequence[str]) -> dict[str, ParentResult]:
        reads.append(tuple(ids))
        return {"a": ParentResult(None, 1)}

    counted = replace(ctx, parents=("a", "gone"), read_results=read)
    assert counted.parent_results() == {"a": 1, "gone": None}
    counted.parent_results()["a"] = "changed"  # a copy: the next call reads the same
    assert counted.parent_results() == {"a": 1, "gone": None}
    assert reads == [("a", "gone")]
    assert testing.context().parent_results() == {}


def test_a_server_process_loads_no_client_and_the_client_names_load_when_used() -> None:
    """The package's client names are imported on first use, so the processes that import jobsched for its handlers
    (the embedded node, every service) start without the HTTP client and its models."""
    probe = (
        "import sys, services.embedded.commands, services.executor.__main__; "
        "loaded = 'jobsched.client' in sys.modules or 'httpx' in sys.modules; "
        "import jobsched; client = jobsched.Client; "
        "print(loaded, client.__module__, 'Client' in dir(jobsched))"
    )
    shown = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=REPO_ROOT)
    assert shown.stdout.split() == ["False", "jobsched.client.sync", "True"]
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        getattr(jobsched, "Nope")  # noqa: B009
