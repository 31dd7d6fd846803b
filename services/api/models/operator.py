"""The request body of POST /dlq/redrive (routes/operator.py)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

REDRIVE_IDS_MAX = 1000


LAST_ERROR_MAX = 4096


class RedriveRequest(BaseModel):
    """POST /dlq/redrive: the jobs named, or every dead letter with one lastError (optionally of one tenant)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    jobIds: list[str] | None = Field(default=None, min_length=1, max_length=REDRIVE_IDS_MAX)
    # Longer than any stored error (an attempt's is cut to 2,000 characters plus the exception's name).
    lastError: str | None = Field(default=None, max_length=LAST_ERROR_MAX)
    tenantId: str | None = Field(default=None, min_length=1, max_length=256)
