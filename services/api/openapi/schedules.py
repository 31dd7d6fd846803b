"""The schedule endpoints' part of the OpenAPI document (docs.py merges it)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from services.api.models.schedules import (
    ApplyRequest,
    BackfillRequest,
    PauseRequest,
    RunPatch,
    TemplatePatch,
    TriggerRequest,
)

REF = "#/components/schemas/{model}"
MODELS: dict[str, type[BaseModel]] = {
    "PauseRequest": PauseRequest,
    "TriggerRequest": TriggerRequest,
    "BackfillRequest": BackfillRequest,
    "TemplatePatch": TemplatePatch,
    "RunPatch": RunPatch,
    "ApplyRequest": ApplyRequest,
}
ERRORS = {400: "Bad input", 404: "Unknown job", 409: "Conflict", 413: "Payload too large", 503: "Store unavailable"}
JOB_ID = {"name": "id", "in": "path", "required": True, "schema": {"type": "string", "pattern": "^[0-9a-fA-F]{24}$"}}
COUNT = {"name": "count", "in": "query", "description": "1 to 100, default 10", "schema": {"type": "integer"}}


def schedule_schemas() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, model in MODELS.items():
        schema = model.model_json_schema(ref_template=REF, by_alias=True)
        out.update(schema.pop("$defs", {}))
        out[name] = schema
    return out


def _body(*models: str) -> dict[str, Any]:
    refs = [{"$ref": REF.format(model=m)} for m in models]
    schema = refs[0] if len(refs) == 1 else {"oneOf": refs}
    return {"required": False, "content": {"application/json": {"schema": schema}}}


def _answer(description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _errors(*codes: int) -> dict[str, Any]:
    error = {"$ref": REF.format(model="Error")}
    return {str(c): _answer(ERRORS[c], error) for c in codes}


JOB = {"$ref": REF.format(model="Job")}
JOBS = {"type": "array", "items": JOB}
TIMES = {"type": "array", "items": {"type": "string", "format": "date-time"}}
NAMES = {"type": "array", "items": {"type": "string"}}
APPLIED = {
    "type": "object",
    "properties": {
        **{k: NAMES for k in ("added", "changed", "unchanged", "removed", "conflicts", "ended", "resumed")},
        "changes": {
            "type": "object",
            "description": "Per changed schedule: each field that differs, as [stored, declared]",
            "additionalProperties": {"type": "object"},
        },
        "dryRun": {"type": "boolean"},
    },
}


def _post(summary: str, body: dict[str, Any] | None, answer: dict[str, Any], *errors: int) -> dict[str, Any]:
    operation: dict[str, Any] = {
        "summary": summary,
        "parameters": [JOB_ID],
        "responses": {**answer, **_errors(*errors)},
    }
    if body is not None:
        operation["requestBody"] = body
    return {"post": operation}


def schedule_paths() -> dict[str, Any]:
    backfilled = {
        "type": "object",
        "properties": {k: {"type": "integer"} for k in ("spawned", "existing", "skipped")},
    }
    return {
        "/jobs/{id}/pause": _post(
            "Pause a template: it spawns nothing until resumed",
            _body("PauseRequest"),
            {"200": _answer("The paused template", JOB)},
            400,
            404,
            409,
            503,
        ),
        "/jobs/{id}/resume": _post(
            "Resume a template at its first fire time after now",
            None,
            {"200": _answer("The template", JOB)},
            400,
            404,
            409,
            503,
        ),
        "/jobs/{id}/trigger": _post(
            "One run of the template now, under its overlap policy (or the request's)",
            _body("TriggerRequest"),
            {"201": _answer("The new run", JOB), "200": _answer("The run of this idempotencyKey", JOB)},
            400,
            404,
            409,
            413,
            503,
        ),
        "/jobs/{id}/backfill": _post(
            "One run per fire time in [from, to), keyed like scheduled runs",
            _body("BackfillRequest"),
            {"200": _answer("How many runs were spawned, existed already, or were skipped", backfilled)},
            400,
            404,
            409,
            503,
        ),
        "/jobs/{id}/runs": {
            "get": {
                "summary": "The template's runs, newest planned time first",
                "parameters": [JOB_ID, {"name": "limit", "in": "query", "schema": {"type": "string"}}],
                "responses": {"200": _answer("Runs", JOBS), **_errors(400, 404, 503)},
            }
        },
        "/jobs/{id}/upcoming": {
            "get": {
                "summary": "The template's next fire times (none while paused or ended)",
                "parameters": [JOB_ID, COUNT],
                "responses": {"200": _answer("Fire times", TIMES), **_errors(400, 404, 409, 503)},
            }
        },
        "/schedules/preview": {
            "get": {
                "summary": "The next fire times of a cron or interval schedule, with the daylight-saving rules",
                "parameters": [
                    {"name": name, "in": "query", "schema": {"type": "string"}}
                    for name in ("cron", "interval", "timezone")
                ]
                + [COUNT],
                "responses": {"200": _answer("Fire times", TIMES), **_errors(400)},
            }
        },
        "/schedules/apply": {
            "post": {
                "summary": "Make the tenant's schedules what a file declares (jobsched schedules apply): create,"
                " update in place, report or pause or cancel the dropped ones; dryRun only says what it would do",
                "requestBody": {**_body("ApplyRequest"), "required": True},
                "responses": {
                    "200": _answer("What was (or would be) done, by schedule name", APPLIED),
                    **_errors(400, 413, 503),
                },
            }
        },
    }


def patch_operation() -> dict[str, Any]:
    return {
        "summary": "Update a template (schedule, policy, what its runs copy) or a pending one-off job",
        "parameters": [JOB_ID],
        "requestBody": {**_body("TemplatePatch", "RunPatch"), "required": True},
        "responses": {"200": _answer("The updated job", JOB), **_errors(400, 404, 409, 413, 503)},
    }
