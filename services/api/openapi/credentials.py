"""The credential endpoints' part of the OpenAPI document (routes/credentials.py; document.py merges it)."""

from __future__ import annotations

from typing import Any

from services.api.openapi.operator import OWN_TENANT, answer, error_answers
from shared.http_jobs.credentials import MAX_VALUE_BYTES, NAME

_CREDENTIAL = {
    "type": "object",
    "description": "A credential as it may be known: never its value",
    "properties": {
        "name": {"type": "string"},
        "tenantId": {"type": "string"},
        "createdAt": {"type": "string", "format": "date-time"},
        "updatedAt": {"type": "string", "format": "date-time", "description": "of its value: the last rotation"},
    },
}
_NAME = {"name": "name", "in": "path", "required": True, "schema": {"type": "string", "pattern": NAME.pattern}}
_VALUE = {
    "type": "object",
    "required": ["value"],
    "additionalProperties": False,
    "properties": {"value": {"type": "string", "maxLength": MAX_VALUE_BYTES, "description": "printable ASCII"}},
}


def credential_paths() -> dict[str, Any]:
    return {
        "/credentials": {
            "get": {
                "summary": "The tenant's credentials for http jobs' headers, by name: names and times, never values",
                "parameters": [OWN_TENANT],
                "responses": {
                    "200": answer("Credentials", {"type": "array", "items": _CREDENTIAL}),
                    **error_answers(400, 503),
                },
            }
        },
        "/credentials/{name}": {
            "put": {
                "summary": "Set a credential (201 made, 200 its value replaced); 503 when the API has no secrets key",
                "parameters": [OWN_TENANT, _NAME],
                "requestBody": {"required": True, "content": {"application/json": {"schema": _VALUE}}},
                "responses": {
                    "201": answer("Made", _CREDENTIAL),
                    "200": answer("Replaced", _CREDENTIAL),
                    **error_answers(400, 409, 413, 503),
                },
            },
            "delete": {
                "summary": "Delete a credential: jobs that name it fail their next attempt",
                "parameters": [OWN_TENANT, _NAME],
                "responses": {"200": answer("Deleted", {"type": "object"}), **error_answers(400, 404, 503)},
            },
        },
    }
