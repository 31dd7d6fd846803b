"""Checks on a template's runs through the API, shared by the jobsched dev and the distributed tests."""

from __future__ import annotations

import itertools
from datetime import datetime
from typing import Any

import httpx2 as httpx

from shared.model import parse_time

FINAL = ("completed", "dlq", "cancelled")


def create_template(http: httpx.Client, key: str, **fields: Any) -> dict[str, Any]:
    body = {"idempotencyKey": key, "tenantId": "schedules", "jobType": "noop", **fields}
    response = http.post("/jobs", json=body)
    assert response.status_code == 201, response.text
    template: dict[str, Any] = response.json()
    return template


def runs(http: httpx.Client, template_id: str) -> list[dict[str, Any]]:
    """The template's runs, oldest planned first."""
    found: list[dict[str, Any]] = http.get(f"/jobs/{template_id}/runs", params={"limit": "5000"}).json()
    return found[::-1]


def count(http: httpx.Client, template_id: str, *statuses: str) -> int:
    return sum(r["status"] in statuses for r in runs(http, template_id))


def attempt_spans(http: httpx.Client, template_id: str) -> list[tuple[datetime, datetime | None, str]]:
    """(start, end or None while running, run id) of every attempt of the template's runs, by start."""
    spans = []
    for run in runs(http, template_id):
        for attempt in http.get(f"/jobs/{run['id']}/executions").json():
            if "startedAt" in attempt:
                end = parse_time(attempt["finishedAt"]) if "finishedAt" in attempt else None
                spans.append((parse_time(attempt["startedAt"]), end, run["id"]))
    return sorted(spans, key=lambda s: s[0])


def assert_never_overlapped(spans: list[tuple[datetime, datetime | None, str]]) -> None:
    """Each attempt started after the one before it had ended."""
    for (_, end, before), (start, _, after) in itertools.pairwise(spans):
        assert end is not None, f"run {before} still runs while run {after} started"
        assert start >= end, f"run {after} started at {start} while run {before} ran until {end}"


def assert_one_run_per_planned_time(found: list[dict[str, Any]]) -> None:
    planned = [r["plannedAt"] for r in found]
    assert len(planned) == len(set(planned)), f"a planned time has two runs: {sorted(planned)}"
