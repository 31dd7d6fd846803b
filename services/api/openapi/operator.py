"""The operator endpoints' part of the OpenAPI document, and GET /jobs's optional filters (docs.py merges them)."""

from __future__ import annotations

from typing import Any

from services.api.models.operator import RedriveRequest

REF = "#/components/schemas/{model}"
TENANT = {
    "name": "tenantId",
    "in": "query",
    "description": "One tenant; every tenant when omitted",
    "schema": {"type": "string"},
}
CURSOR = "`<createdAt>_<id>` of the job at the edge of the page in hand"

LIST_PARAMETERS: list[dict[str, Any]] = [
    {"name": "jobType", "in": "query", "description": "Only this job type", "schema": {"type": "string"}},
    {
        "name": "templateId",
        "in": "query",
        "description": "Only the runs of this template",
        "schema": {"type": "string"},
    },
    {"name": "before", "in": "query", "description": f"The next (older) page: {CURSOR}", "schema": {"type": "string"}},
    {
        "name": "after",
        "in": "query",
        "description": f"The previous (newer) page: {CURSOR}",
        "schema": {"type": "string"},
    },
]

_SESSION = {
    "type": "object",
    "properties": {
        "auth": {"type": "string", "enum": ["off", "required"]},
        "role": {"type": "string", "enum": ["reader", "writer", "admin"]},
        "tenantId": {"type": ["string", "null"]},
    },
}
_COUNTS = {"type": "object", "additionalProperties": {"type": "object", "additionalProperties": {"type": "integer"}}}
_PER_MINUTE = {"type": "array", "items": {"type": "integer"}}
_HISTORY = {
    "type": "object",
    "description": "Parallel arrays, one value per minute from `since` to `until` (now's minute)",
    "properties": {
        "tenantId": {"type": ["string", "null"]},
        "jobType": {"type": ["string", "null"]},
        "range": {"type": "string"},
        "since": {"type": "string", "format": "date-time"},
        "until": {"type": "string", "format": "date-time"},
        "stepSeconds": {"type": "integer"},
        "completed": {**_PER_MINUTE, "description": "jobs completed"},
        "failed": {**_PER_MINUTE, "description": "attempts failed, timed out or lost"},
        "dlq": {**_PER_MINUTE, "description": "jobs dead-lettered"},
        "started": {**_PER_MINUTE, "description": "attempts started"},
        "latenessP50Ms": {
            "type": "array",
            "items": {"type": ["integer", "null"]},
            "description": "a bound (ms) half the minute's starts were at most as late as (started - due)",
        },
        "latenessP99Ms": {"type": "array", "items": {"type": ["integer", "null"]}, "description": "as p50, for 99 %"},
        "waiting": {**_PER_MINUTE, "description": "runs due and not started, sampled once in the minute"},
        "running": {**_PER_MINUTE, "description": "jobs claimed or running, sampled once in the minute"},
    },
}
_OVERVIEW = {
    "type": "object",
    "properties": {
        "at": {"type": "string", "format": "date-time"},
        "tenantId": {"type": ["string", "null"]},
        "statuses": {"type": "array", "items": {"type": "string"}, "description": "every status, in order"},
        "jobTypes": {"type": "array", "items": {"type": "string"}},
        "byType": {**_COUNTS, "description": "jobType → status → jobs"},
        "totals": {"type": "object", "additionalProperties": {"type": "integer"}, "description": "status → jobs"},
        "lastHour": {**_COUNTS, "description": "jobType → completed (jobs), failed (attempts), dlq (jobs)"},
        "dlq": {"type": "integer"},
        "schedules": {
            "type": "object",
            "properties": {"active": {"type": "integer"}, "paused": {"type": "integer"}},
            "description": "pending templates: firing (active) and paused",
        },
        "tenants": {"type": "array", "items": {"type": "string"}},
    },
}
_GROUP = {
    "type": "object",
    "properties": {
        "error": {"type": "string"},
        "count": {"type": "integer"},
        "statuses": {"type": "array", "items": {"type": "string"}, "description": "every status, in order"},
        "jobTypes": {"type": "array", "items": {"type": "string"}},
        "jobs": {"type": "array", "items": {"$ref": REF.format(model="Job")}, "description": "the most recent 20"},
    },
}
_REDRIVEN = {
    "type": "object",
    "properties": {
        "redriven": {"type": "array", "items": {"type": "string"}},
        "refused": {
            "type": "array",
            "items": {"type": "object", "properties": {"id": {"type": "string"}, "error": {"type": "string"}}},
        },
        "more": {"type": "boolean", "description": "the group has dead letters left: send the request again"},
    },
}


_SECRET = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "tenantId": {"type": "string"},
        "secret": {"type": "string", "description": "the HMAC key of the Jobsched-Signature header"},
        "createdAt": {"type": "string", "format": "date-time"},
    },
}
OWN_TENANT = {**TENANT, "required": True, "description": "The tenant (a key's own with AUTH=required)"}


def answer(description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def error_answers(*codes: int) -> dict[str, Any]:
    text = {400: "Bad input", 404: "Not found", 409: "Conflict", 413: "Body too large", 503: "Store unavailable"}
    return {str(c): answer(text[c], {"$ref": REF.format(model="Error")}) for c in codes}


def operator_schemas() -> dict[str, Any]:
    return {"RedriveRequest": RedriveRequest.model_json_schema(ref_template=REF)}


def operator_paths() -> dict[str, Any]:
    return {
        "/session": {
            "get": {
                "summary": "What the caller may do: auth (off or required), role, tenantId (null: every tenant)",
                "responses": {"200": answer("The caller", _SESSION)},
            }
        },
        "/overview": {
            "get": {
                "summary": "Jobs by type and status, the last hour's outcomes, the DLQ size, the schedules",
                "parameters": [TENANT],
                "responses": {"200": answer("Counts", _OVERVIEW), **error_answers(503)},
            }
        },
        "/history": {
            "get": {
                "summary": "Per minute: completed, failed, dead-lettered, started, start lateness, waiting, running",
                "parameters": [
                    TENANT,
                    {
                        "name": "jobType",
                        "in": "query",
                        "description": "One job type; all when omitted",
                        "schema": {"type": "string"},
                    },
                    {
                        "name": "range",
                        "in": "query",
                        "description": "How far back from now's minute",
                        "schema": {"type": "string", "enum": ["1h", "6h", "24h"], "default": "1h"},
                    },
                ],
                "responses": {"200": answer("Minutes", _HISTORY), **error_answers(400, 503)},
            }
        },
        "/dlq": {
            "get": {
                "summary": "Dead letters grouped by lastError, largest group first (at most 100 groups)",
                "parameters": [TENANT],
                "responses": {"200": answer("Groups", {"type": "array", "items": _GROUP}), **error_answers(503)},
            }
        },
        "/dlq/redrive": {
            "post": {
                "summary": "Re-drive the jobs named, or every dead letter with one lastError (5000 a request)",
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": {"$ref": REF.format(model="RedriveRequest")}}},
                },
                "responses": {"200": answer("What moved", _REDRIVEN), **error_answers(400, 413, 503)},
            }
        },
        "/signing-secrets": {
            "get": {
                "summary": "The tenant's live signing secrets of http jobs, oldest first (a writer key)",
                "parameters": [OWN_TENANT],
                "responses": {"200": answer("Secrets", {"type": "array", "items": _SECRET}), **error_answers(400, 503)},
            },
            "post": {
                "summary": 'A new signing secret for {"tenantId"}; 409 when it has two (remove one first)',
                "responses": {"201": answer("The secret", _SECRET), **error_answers(400, 409, 503)},
            },
        },
        "/signing-secrets/{secret_id}": {
            "delete": {
                "summary": "Remove a signing secret: requests are no longer signed with it",
                "parameters": [
                    OWN_TENANT,
                    {"name": "secret_id", "in": "path", "required": True, "schema": {"type": "string"}},
                ],
                "responses": {"200": answer("Removed", {"type": "object"}), **error_answers(400, 404, 503)},
            }
        },
    }
