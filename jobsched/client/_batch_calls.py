"""The batch calls (POST /batches, /batches/{id}/jobs, /seal, GET /batches, /batches/{id}/jobs), described once
for Client and AsyncClient as the calls of _calls.py are."""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, overload
from urllib.parse import quote

from jobsched.client._calls import Call, ManyOptions, create_many, json_payload
from jobsched.client.models import Batch, BatchMembers, Enqueued
from jobsched.handlers import JobType

P = TypeVar("P")


@dataclass(frozen=True)
class BatchCallback:
    """A batch's callback job: its type and payload (`callback(...)` makes one, typed by a JobType)."""

    job_type: str
    payload: dict[str, Any]


@overload
def callback(job_type: JobType[P, Any], payload: P) -> BatchCallback: ...


@overload
def callback(job_type: str, payload: dict[str, Any] | None = None) -> BatchCallback: ...


def callback(job_type: JobType[Any, Any] | str, payload: Any = None) -> BatchCallback:
    """A batch's onComplete or onSuccess job: a JobType with its handler's payload type (checked like
    `enqueue`'s), or a type's name with a dict. Its handler reads the batch with ctx.batch() and
    ctx.batch_results()."""
    if isinstance(job_type, JobType):
        return BatchCallback(job_type.name, job_type.encode(payload))
    return BatchCallback(job_type, json_payload(payload or {}))


def create_batch(
    idempotency_key: str | None,
    tenant_id: str | None,
    name: str | None,
    on_complete: BatchCallback | None,
    on_success: BatchCallback | None,
) -> Call[Batch]:
    body: dict[str, Any] = {
        "idempotencyKey": idempotency_key or f"batch-{uuid.uuid4().hex}",
        "tenantId": tenant_id,
        "name": name,
    }
    for field, made in (("onComplete", on_complete), ("onSuccess", on_success)):
        if made is not None:
            body[field] = {"jobType": made.job_type, "payload": made.payload}
    return Call("POST", "/batches", Batch.from_wire, body={k: v for k, v in body.items() if v is not None})


def add_to_batch(
    batch_id: str, job_type: str, payloads: Sequence[dict[str, Any]], options: ManyOptions
) -> Iterator[Call[list[Enqueued]]]:
    """create_many's calls, to the batch: its members are its tenant's (tenant_id is not sent)."""
    return create_many(job_type, payloads, None, {**options, "tenant_id": None}, path=f"{_path(batch_id)}/jobs")


def seal_batch(batch_id: str) -> Call[Batch]:
    return Call("POST", f"{_path(batch_id)}/seal", Batch.from_wire)


def get_batch(batch_id: str) -> Call[Batch]:
    return Call("GET", _path(batch_id), Batch.from_wire)


def batch_members(batch_id: str, status: str | None, limit: int | None, after: str | None) -> Call[BatchMembers]:
    params = {"status": status, "limit": str(limit) if limit is not None else None, "after": after}
    query = {k: v for k, v in params.items() if v is not None}
    return Call("GET", f"{_path(batch_id)}/jobs", BatchMembers.from_wire, params=query)


def list_batches(tenant_id: str | None, limit: int | None, before: str | Batch | None) -> Call[list[Batch]]:
    params = {
        "tenantId": tenant_id,
        "limit": str(limit) if limit is not None else None,
        "before": before.id if isinstance(before, Batch) else before,
    }
    return Call("GET", "/batches", _batches, params={k: v for k, v in params.items() if v is not None})


def _batches(body: Any) -> list[Batch]:
    return [Batch.from_wire(item) for item in body]


def _path(batch_id: str) -> str:
    return f"/batches/{quote(batch_id, safe='')}"
