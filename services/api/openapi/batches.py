"""The batch endpoints' part of the OpenAPI document (routes/batches.py; document.py merges it)."""

from __future__ import annotations

from typing import Any

from services.api.models.batches import BatchRequest
from services.api.openapi.operator import answer, error_answers
from services.api.openapi.workflows import created_and_listed
from shared.batches import BatchStatus
from shared.model import Status

REF = "#/components/schemas/{model}"
_BATCH = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "tenantId": {"type": "string"},
        "idempotencyKey": {"type": "string"},
        "name": {"type": "string"},
        "createdAt": {"type": "string", "format": "date-time"},
        "sealed": {"type": "boolean"},
        "status": {"type": "string", "enum": [s.value for s in BatchStatus]},
        "total": {"type": "integer", "description": "Members"},
        "counts": {"type": "object", "additionalProperties": {"type": "integer"}, "description": "Members by status"},
        "callbacks": {
            "type": "object",
            "properties": {"onComplete": {"type": "string"}, "onSuccess": {"type": "string"}},
            "description": "The callbacks' job ids",
        },
        "firedAt": {"type": "string", "format": "date-time"},
    },
}
_ID = {"name": "id", "in": "path", "required": True, "schema": {"type": "string", "pattern": "^[0-9a-fA-F]{24}$"}}
_ADDED = {
    "type": "object",
    "description": "As POST /jobs/batch answers: counts, and one result per job in order",
    "properties": {
        "created": {"type": "integer"},
        "duplicates": {"type": "integer"},
        "refused": {"type": "integer"},
        "results": {"type": "array", "items": {"type": "object"}},
    },
}

_MEMBER_QUERY = [
    {"name": "status", "in": "query", "schema": {"type": "string", "enum": [s.value for s in Status]}},
    {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 100}},
    {"name": "after", "in": "query", "schema": {"type": "string"}, "description": "The `next` of the page before"},
]
_MEMBERS = {
    "type": "object",
    "properties": {
        "jobs": {
            "type": "array",
            "items": {"type": "object", "properties": {"jobId": {"type": "string"}, "status": {"type": "string"}}},
        },
        "next": {"type": ["string", "null"], "description": "The following page's `after`; null after the last"},
    },
}


def batch_schemas() -> dict[str, Any]:
    return {"BatchRequest": BatchRequest.model_json_schema(ref_template=REF), "Batch": _BATCH}


def batch_paths() -> dict[str, Any]:
    batch = {"$ref": REF.format(model="Batch")}
    members = {
        "type": "object",
        "required": ["jobs"],
        "properties": {"jobs": {"type": "array", "maxItems": 1000, "items": {"$ref": REF.format(model="JobRequest")}}},
    }
    return {
        "/batches": created_and_listed(
            "Batch", "Create a batch with its callbacks, optionally its first members and its seal", "batch"
        ),
        "/batches/{id}": {
            "get": {
                "summary": "A batch and its progress (members counted by status)",
                "parameters": [_ID],
                "responses": {"200": answer("The batch", batch), **error_answers(400, 404, 503)},
            }
        },
        "/batches/{id}/jobs": {
            "get": {
                "summary": "The batch's members, by status then id, in pages (`next` is the following page's `after`)",
                "parameters": [_ID, *_MEMBER_QUERY],
                "responses": {"200": answer("A page of members", _MEMBERS), **error_answers(400, 404, 503)},
            },
            "post": {
                "summary": "Add members (up to 1,000), each answered on its own; 409 once the batch is sealed",
                "parameters": [_ID],
                "requestBody": {"required": True, "content": {"application/json": {"schema": members}}},
                "responses": {"200": answer("Added", _ADDED), **error_answers(400, 404, 409, 413, 503)},
            },
        },
        "/batches/{id}/seal": {
            "post": {
                "summary": "No more members: the callbacks fire once every member has ended",
                "parameters": [_ID],
                "responses": {"200": answer("Sealed", batch), **error_answers(400, 404, 503)},
            }
        },
    }
