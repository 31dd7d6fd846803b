"""The OpenAPI document, generated from the pydantic models the API validates with, and a docs page."""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter

from services.api.openapi.batches import batch_paths, batch_schemas
from services.api.openapi.credentials import credential_paths
from services.api.openapi.operator import LIST_PARAMETERS, operator_paths, operator_schemas
from services.api.openapi.schedules import patch_operation, schedule_paths, schedule_schemas
from services.api.openapi.workflows import workflow_paths, workflow_schemas
from shared.job_requests import STATUS_VALUES, ErrorBody, JobRequest
from shared.model import Execution, Job

REF = "#/components/schemas/{model}"
_JOB_TYPE: dict[str, Any] = {
    "type": "object",
    "required": ["name", "executors", "lastSeenAt"],
    "properties": {
        "name": {"type": "string"},
        "executors": {"type": "integer", "description": "Executors serving it now"},
        "lastSeenAt": {"type": ["string", "null"], "description": "Last announcement; null if never announced"},
    },
}
_DELETED: dict[str, Any] = {
    "type": "object",
    "required": ["id", "idempotencyKey", "status", "deleted", "runsDeleted"],
    "properties": {
        "id": {"type": "string"},
        "idempotencyKey": {"type": "string", "description": "Free again in the job's tenant"},
        "status": {"type": "string", "description": "The status the job had"},
        "deleted": {"type": "boolean", "const": True},
        "runsDeleted": {"type": "integer", "description": "A template's runs deleted with it"},
    },
}

_BATCH_REQUEST: dict[str, Any] = {
    "type": "object",
    "required": ["jobs"],
    "additionalProperties": False,
    "properties": {
        "tenantId": {"type": "string", "description": "The tenant of every job that names none"},
        "jobs": {"type": "array", "minItems": 1, "maxItems": 1000, "items": {"$ref": REF.format(model="JobRequest")}},
    },
}
_BATCH_RESULTS: dict[str, Any] = {
    "type": "object",
    "required": ["created", "duplicates", "refused", "results"],
    "properties": {
        "created": {"type": "integer"},
        "duplicates": {"type": "integer"},
        "refused": {"type": "integer"},
        "results": {
            "type": "array",
            "description": "One per job, in order",
            "items": {
                "type": "object",
                "required": ["status"],
                "properties": {
                    "status": {
                        "type": "integer",
                        "description": "201 created; 409 key held (by id); 400/413 refused as POST /jobs would; 503"
                        " not written (send it again)",
                    },
                    "id": {"type": ["string", "null"], "description": "The job created, or the one holding its key"},
                    "error": {"type": "string"},
                },
            },
        },
    },
}


def _schemas() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, schema in (
        ("JobRequest", JobRequest.model_json_schema(ref_template=REF)),
        ("Job", TypeAdapter(Job).json_schema(mode="serialization", ref_template=REF)),
        ("Execution", TypeAdapter(Execution).json_schema(mode="serialization", ref_template=REF)),
        ("Error", ErrorBody.model_json_schema(ref_template=REF)),
    ):
        out.update(schema.pop("$defs", {}))
        out[name] = schema
    out["Job"]["properties"]["runs"] = {
        "type": "integer",
        "description": "Attempts started (each in /executions): attempts, plus the open or completing one (runs only)",
    }
    return {**out, **schedule_schemas()}


def json_response(ref: str, description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": {"$ref": REF.format(model=ref)}}}}


def _errors(*codes: int) -> dict[str, Any]:
    text = {400: "Bad input", 404: "Unknown job", 409: "Conflict", 413: "Payload too large", 503: "Store unavailable"}
    return {str(c): json_response("Error", text[c]) for c in codes}


def openapi_document() -> dict[str, Any]:
    job_id = {
        "name": "id",
        "in": "path",
        "required": True,
        "schema": {"type": "string", "pattern": "^[0-9a-fA-F]{24}$"},
    }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "jobsched",
            "version": "0.1.0",
            "description": 'One-off and recurring jobs. Errors are {"error": message}.',
        },
        "paths": {
            "/jobs": {
                "post": {
                    "summary": "Create a one-off job (scheduledAt) or a recurring template (cron or interval)",
                    "requestBody": {
                        "required": True,
                        "content": {"application/json": {"schema": {"$ref": REF.format(model="JobRequest")}}},
                    },
                    "responses": {
                        "201": json_response("Job", "Created (status pending)"),
                        **_errors(400, 409, 413, 503),
                    },
                },
                "get": {
                    "summary": "List a tenant's jobs, newest first",
                    "parameters": [
                        {"name": "tenantId", "in": "query", "required": True, "schema": {"type": "string"}},
                        {"name": "status", "in": "query", "schema": {"type": "string", "enum": STATUS_VALUES}},
                        {
                            "name": "limit",
                            "in": "query",
                            "description": "Default 100, max 5000; invalid or non-positive → 100",
                            "schema": {"type": "string"},
                        },
                        *LIST_PARAMETERS,
                    ],
                    "responses": {
                        "200": {
                            "description": "Jobs",
                            "content": {
                                "application/json": {
                                    "schema": {"type": "array", "items": {"$ref": REF.format(model="Job")}}
                                }
                            },
                        },
                        **_errors(400, 503),
                    },
                },
            },
            "/jobs/batch": {
                "post": {
                    "summary": "Create up to 1,000 jobs (or templates) in one request; each is created or refused on"
                    " its own",
                    "requestBody": {"required": True, "content": {"application/json": {"schema": _BATCH_REQUEST}}},
                    "responses": {
                        "200": {
                            "description": "One result per job",
                            "content": {"application/json": {"schema": _BATCH_RESULTS}},
                        },
                        **_errors(400, 413, 503),
                    },
                },
            },
            "/jobs/{id}": {
                "get": {
                    "summary": "Get a job",
                    "parameters": [job_id],
                    "responses": {"200": json_response("Job", "The job"), **_errors(400, 404, 503)},
                },
                "delete": {
                    "summary": "Cancel a job: pending, queued or buffered at once; claimed or running by asking its"
                    " executor",
                    "parameters": [job_id],
                    "responses": {
                        "200": json_response("Job", "Cancelled"),
                        "202": json_response("Job", "Running: cancellation requested (cancelRequested: true)"),
                        **_errors(400, 404, 409, 503),
                    },
                },
                "patch": patch_operation(),
            },
            **schedule_paths(),
            "/jobs/{id}/executions": {
                "get": {
                    "summary": "The job's attempts, oldest first (attempt, worker, times, outcome, error)",
                    "parameters": [job_id],
                    "responses": {
                        "200": {
                            "description": "Attempts",
                            "content": {
                                "application/json": {
                                    "schema": {"type": "array", "items": {"$ref": REF.format(model="Execution")}}
                                }
                            },
                        },
                        **_errors(400, 404, 503),
                    },
                },
            },
            "/jobs/{id}/retry": {
                "post": {
                    "summary": "Re-drive a dlq job: back to pending, due now, with a fresh attempt budget",
                    "parameters": [job_id],
                    "responses": {"200": json_response("Job", "Pending again"), **_errors(400, 404, 409, 503)},
                },
            },
            "/jobs/{id}/delete": {
                "post": {
                    "summary": "Delete a finished job (completed, dlq or cancelled) and its attempt records, freeing"
                    " its idempotency key; a finished template goes with all of its runs (409 while one has not"
                    " finished)",
                    "parameters": [job_id],
                    "responses": {
                        "200": {
                            "description": "Deleted",
                            "content": {"application/json": {"schema": _DELETED}},
                        },
                        **_errors(400, 404, 409, 503),
                    },
                },
            },
            "/job-types": {
                "get": {
                    "summary": "The job types accepted: live executors (count) and the last announcement of each",
                    "responses": {
                        "200": {
                            "description": "Job types",
                            "content": {"application/json": {"schema": {"type": "array", "items": _JOB_TYPE}}},
                        },
                        **_errors(503),
                    },
                }
            },
            "/healthz": {
                "get": {
                    "summary": "Liveness (does not check the store)",
                    "responses": {
                        "200": {"description": "ok", "content": {"text/plain": {"schema": {"type": "string"}}}}
                    },
                }
            },
            "/readyz": {
                "get": {
                    "summary": "Readiness (checks the store)",
                    "responses": {
                        "200": {"description": "ok", "content": {"text/plain": {"schema": {"type": "string"}}}},
                        **_errors(503),
                    },
                }
            },
            **operator_paths(),
            **credential_paths(),
            **workflow_paths(),
            **batch_paths(),
        },
        "components": {"schemas": {**_schemas(), **operator_schemas(), **workflow_schemas(), **batch_schemas()}},
    }
