"""The OpenAPI document with AUTH=required: the bearer scheme, the auth errors of each operation, /api-keys."""

from __future__ import annotations

import copy
from collections.abc import Collection
from typing import Any

from services.api.models.keys import KeyRequest
from services.api.openapi.document import REF, json_response

SCHEME = "apiKey"
AUTH_ERRORS = {
    "401": "Missing, unknown or revoked API key (WWW-Authenticate: Bearer)",
    "403": "The key's role or tenant does not allow this",
    "429": "The key's rate limit is spent (Retry-After says when to retry)",
}
KEY_FIELDS: dict[str, Any] = {
    "type": "object",
    "required": ["prefix", "tenantId", "role", "createdAt"],
    "properties": {
        "prefix": {"type": "string", "description": "The key's public part: `jsk_<prefix>_...`"},
        "tenantId": {"type": "string"},
        "role": {"type": "string", "enum": ["reader", "writer", "admin"]},
        "name": {"type": "string"},
        "createdAt": {"type": "string", "format": "date-time"},
        "lastUsedAt": {"type": "string", "format": "date-time", "description": "Within a few seconds"},
        "revokedAt": {"type": "string", "format": "date-time"},
    },
}


def secured(document: dict[str, Any], public_paths: Collection[str]) -> dict[str, Any]:
    doc = copy.deepcopy(document)
    doc["info"]["description"] += (
        " Every operation but health, readiness and these documents needs `Authorization: Bearer <API key>`;"
        " a key acts for its tenant (an omitted tenantId is the key's; another tenant's jobs are 404)."
    )
    doc["security"] = [{SCHEME: []}]
    components = doc["components"]
    components["securitySchemes"] = {
        SCHEME: {
            "type": "http",
            "scheme": "bearer",
            "description": "An API key (`jobsched keys create`, or POST /api-keys with an admin key)",
        }
    }
    components["schemas"].update(
        KeyRequest=KeyRequest.model_json_schema(ref_template=REF),
        ApiKey=KEY_FIELDS,
        CreatedApiKey={
            **KEY_FIELDS,
            "required": ["key", *KEY_FIELDS["required"]],
            "properties": {"key": {"type": "string", "description": "Shown once"}, **KEY_FIELDS["properties"]},
        },
    )
    doc["paths"].update(_key_paths())
    for path, item in doc["paths"].items():
        for operation in item.values():
            if path in public_paths:
                operation["security"] = []
            else:
                operation["responses"].update({code: _error(text) for code, text in AUTH_ERRORS.items()})
    return doc


def _error(description: str) -> dict[str, Any]:
    return json_response("Error", description)


def _key_paths() -> dict[str, Any]:
    prefix = {"name": "prefix", "in": "path", "required": True, "schema": {"type": "string"}}
    return {
        "/api-keys": {
            "post": {
                "summary": "Create an API key (admin); the key is in this response only",
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": {"$ref": REF.format(model="KeyRequest")}}},
                },
                "responses": {"201": json_response("CreatedApiKey", "Created"), "400": _error("Bad input")},
            },
            "get": {
                "summary": "List API keys, revoked ones included, newest first (admin)",
                "parameters": [{"name": "tenantId", "in": "query", "schema": {"type": "string"}}],
                "responses": {
                    "200": {
                        "description": "Keys",
                        "content": {
                            "application/json": {
                                "schema": {"type": "array", "items": {"$ref": REF.format(model="ApiKey")}}
                            }
                        },
                    }
                },
            },
        },
        "/api-keys/{prefix}": {
            "delete": {
                "summary": "Revoke an API key (admin); every API replica refuses it within AUTH_REFRESH",
                "parameters": [prefix],
                "responses": {"200": json_response("ApiKey", "Revoked"), "404": _error("Unknown key")},
            }
        },
    }
