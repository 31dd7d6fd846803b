"""The workflow endpoints' part of the OpenAPI document (routes/workflows.py; document.py merges it)."""

from __future__ import annotations

from typing import Any

from services.api.models.workflows import WorkflowRequest
from services.api.openapi.operator import OWN_TENANT, answer, error_answers
from shared.workflows import WorkflowStatus

REF = "#/components/schemas/{model}"
_STEP = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "jobId": {"type": "string"},
        "jobType": {"type": "string"},
        "after": {"type": "array", "items": {"type": "string"}},
        "status": {"type": "string", "description": "Its job's status (absent once the job was deleted)"},
    },
}
_WORKFLOW = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "tenantId": {"type": "string"},
        "idempotencyKey": {"type": "string"},
        "name": {"type": "string"},
        "createdAt": {"type": "string", "format": "date-time"},
        "status": {"type": "string", "enum": [s.value for s in WorkflowStatus]},
        "counts": {"type": "object", "additionalProperties": {"type": "integer"}, "description": "Steps by status"},
        "stepCount": {"type": "integer"},
        "steps": {"type": "array", "items": _STEP, "description": "Absent in a listing"},
    },
}
_ID = {"name": "id", "in": "path", "required": True, "schema": {"type": "string", "pattern": "^[0-9a-fA-F]{24}$"}}


def workflow_schemas() -> dict[str, Any]:
    return {"WorkflowRequest": WorkflowRequest.model_json_schema(ref_template=REF), "Workflow": _WORKFLOW}


def created_and_listed(model: str, summary: str, what: str, created: dict[str, Any] | None = None) -> dict[str, Any]:
    """POST (a `model`Request body, the `model` created, or `created`) and GET (the tenant's, newest first, paged)
    of a collection of workflows or batches."""
    one = {"$ref": REF.format(model=model)}
    return {
        "post": {
            "summary": summary,
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": {"$ref": REF.format(model=f"{model}Request")}}},
            },
            "responses": {"201": answer("Created", created or one), **error_answers(400, 409, 413, 503)},
        },
        "get": {
            "summary": f"The tenant's {what}s, newest first (a workflow without its steps)",
            "parameters": [
                OWN_TENANT,
                {"name": "limit", "in": "query", "schema": {"type": "integer", "maximum": 200}},
                {"name": "before", "in": "query", "schema": {"type": "string"}, "description": f"A {what}'s id"},
            ],
            "responses": {"200": answer(f"{model}s", {"type": "array", "items": one}), **error_answers(400)},
        },
    }


def workflow_paths() -> dict[str, Any]:
    workflow = {"$ref": REF.format(model="Workflow")}
    return {
        "/workflows": created_and_listed(
            "Workflow",
            "Create a workflow: named steps, each a one-off job, stored all or nothing; with cron or interval, a "
            "schedule firing it at each of its times (201: its template, a Job of type jobsched.workflow)",
            "workflow",
            created={"oneOf": [workflow, {"$ref": REF.format(model="Job")}]},
        ),
        "/workflows/{id}": {
            "get": {
                "summary": "A workflow, its status and each step's job",
                "parameters": [_ID],
                "responses": {"200": answer("The workflow", workflow), **error_answers(400, 404, 503)},
            },
            "delete": {
                "summary": "Cancel a workflow's unfinished steps (202: a running one was asked to stop)",
                "parameters": [_ID],
                "responses": {
                    "200": answer("Cancelled", workflow),
                    "202": answer("Cancel requested", workflow),
                    **error_answers(400, 404, 503),
                },
            },
        },
    }
