"""An executor's progress reports (services/executor/progress.py): the last report of each running attempt waits
for the heartbeat; a report the store cannot keep is dropped and logged once; an ended attempt's is forgotten."""

from __future__ import annotations

import logging

import pytest

from jobsched.handlers import JobLogger
from jobsched.outcomes import MAX_PROGRESS_BYTES
from services.executor.progress import ProgressReports
from shared.model import Job, Status
from tests.unit.test_job_from_fields import a_job

pytestmark = pytest.mark.unit


def job(job_id: str) -> Job:
    return a_job().evolve(id=job_id, status=Status.RUNNING)


def logger() -> JobLogger:
    return JobLogger(logging.getLogger("jobsched.handler"), {"jobId": "x"})


def test_only_the_last_report_of_each_attempt_waits_for_the_heartbeat() -> None:
    reports = ProgressReports()
    first, second = job("a" * 24), job("b" * 24)
    report_first, report_second = reports.reporter(first, logger()), reports.reporter(second, logger())
    for done in range(1, 4):
        report_first({"done": done})
    report_second("halfway")
    taken = {r.job.id: r.value for r in reports.take()}
    assert taken == {first.id: {"done": 3}, second.id: "halfway"}
    assert reports.take() == []  # written once


def test_a_report_a_store_cannot_keep_is_dropped_and_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    reports = ProgressReports()
    report = reports.reporter(job("c" * 24), logger())
    with caplog.at_level(logging.WARNING, "jobsched.handler"):
        report({"done": 1})
        report(object())  # not JSON: refused at once, the last report stands
        assert [r.value for r in reports.take()] == [{"done": 1}]
        report("x" * MAX_PROGRESS_BYTES)  # too large: refused at the beat, nothing written
        assert reports.take() == []
        report({"$where": 1})
        assert reports.take() == []
        report({"done": 2})
        assert [r.value for r in reports.take()] == [{"done": 2}]
    [warning] = caplog.records  # one for the attempt, whatever it reported afterwards
    assert warning.getMessage().startswith("progress not kept: not JSON")


def test_a_report_is_a_snapshot_of_the_value_when_it_was_made() -> None:
    reports = ProgressReports()
    report = reports.reporter(job("e" * 24), logger())
    pages = {"done": [1]}
    report(pages)
    pages["done"].append(2)
    assert [r.value for r in reports.take()] == [{"done": [1]}]


def test_an_ended_attempts_unwritten_report_is_forgotten() -> None:
    reports = ProgressReports()
    export = job("d" * 24)
    reports.reporter(export, logger())({"done": 9})
    reports.forget(export)
    assert reports.take() == []
