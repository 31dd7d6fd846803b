"""POST /batches's body: the batch's key and name, its callbacks (each a POST /jobs body of a one-off job without
idempotencyKey, tenantId or dependencies: the batch sets them), and optionally its first members and its seal."""

from __future__ import annotations

from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field

from services.api.http.errors import ApiError
from services.api.models.workflows import STEP_REFUSES
from services.api.new_job import TypeDefaultsOf, batch_job
from shared.batches import MAX_ADDED
from shared.model import format_time, utc_now
from shared.store.base import NewJob

CALLBACK_REFUSES: Final = STEP_REFUSES | {"onParentFailure", "after", "name"}


class BatchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    idempotencyKey: str = Field(min_length=1, max_length=200, description="Unique among the tenant's batches")
    tenantId: str = Field(min_length=1, max_length=256, description="AUTH=required: the key's when omitted")
    name: str | None = Field(default=None, min_length=1, max_length=200, description="A label for people")
    onComplete: dict[str, Any] | None = Field(
        default=None, description="A job (POST /jobs body without idempotencyKey) run once every member has ended"
    )
    onSuccess: dict[str, Any] | None = Field(
        default=None, description="A job run once every member completed; cancelled when one did not"
    )
    jobs: list[dict[str, Any]] | None = Field(
        default=None, max_length=MAX_ADDED, description="The first members (POST /jobs bodies); more may be added"
    )
    seal: bool = Field(
        default=False,
        description="No more members after these (unless one was refused): the callbacks fire when all end",
    )


def callback_job(name: str, raw: dict[str, Any], tenant: str, type_defaults: TypeDefaultsOf) -> NewJob:
    """A callback as POST /jobs would make its job, or the 400 naming it (`name`: onComplete or onSuccess)."""
    refused = sorted(CALLBACK_REFUSES & raw.keys())
    if refused:
        raise ApiError(400, f"{name}: {refused[0]}: a callback cannot set it (the batch does)")
    body = {**raw, "idempotencyKey": name, "tenantId": tenant, "scheduledAt": format_time(utc_now())}
    try:
        job, _ = batch_job(body, type_defaults)
    except ApiError as exc:
        raise ApiError(exc.status, f"{name}: {exc.message}") from None
    return job
