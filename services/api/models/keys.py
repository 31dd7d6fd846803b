"""The request body of POST /api-keys (routes/keys.py)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from shared.keys.base import Role


class KeyRequest(BaseModel):
    """POST /api-keys."""

    model_config = ConfigDict(extra="forbid", strict=True)

    tenantId: str = Field(min_length=1, max_length=256, description="The tenant the key acts for")
    role: Role = Field(description="reader: GET only; writer: also changes; admin: every tenant and the keys")
    name: str | None = Field(default=None, max_length=200, description="What the key is for (shown in lists)")
