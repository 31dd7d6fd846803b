"""The tenant a request names for a resource that is a tenant's own beside its jobs (signing secrets, credentials):
in the query, or with AUTH=required the key's when omitted (the authentication wrapper adds it)."""

from __future__ import annotations

from typing import Final

from services.api.auth.tenancy import check_tenant, current_principal
from services.api.http.errors import ApiError

MAX_TENANT_CHARS: Final = 256  # as a job's tenantId


def own_tenant(value: object, what: str) -> str:
    """`value` as the tenant whose `what` a request reads or changes: 400 when it is no tenant's name, 403 when
    it is not the key's (checked by the wrapper already, and again here: these stores have no tenant guard)."""
    if not isinstance(value, str) or not value or len(value) > MAX_TENANT_CHARS:
        raise ApiError(400, f"tenantId: the tenant whose {what} these are (1 to {MAX_TENANT_CHARS} characters)")
    principal = current_principal.get()
    if principal is not None:
        check_tenant(principal, value)
    return value
