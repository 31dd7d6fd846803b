"""Issuing and revoking keys, the same for the CLI and the API, each logged for audit (never the key)."""

from __future__ import annotations

import logging

from shared.keys import tokens
from shared.keys.base import ApiKey, KeyStore, PrefixTaken, Role
from shared.model import utc_now

log = logging.getLogger("jobsched.audit")
# A 48-bit prefix collides once in ~16 million keys; the unique insert catches it, and a new draw fixes it.
ISSUE_TRIES = 3


def issue_key(keys: KeyStore, tenant_id: str, role: Role, name: str | None, *, by: str) -> tuple[str, ApiKey]:
    """Create a key; return it (shown once, then only its digest exists) and its record. `by` says who asked
    (an admin key's prefix, or `cli`), for the audit log."""
    for _ in range(ISSUE_TRIES):
        key, prefix = tokens.new_key()
        record = ApiKey(prefix, tenant_id, role, tokens.digest(key), utc_now(), name)
        try:
            keys.insert(record)
        except PrefixTaken:
            continue
        audit("API key created", "key_created", record, by)
        return key, record
    raise PrefixTaken(prefix)


def revoke_key(keys: KeyStore, prefix: str, *, by: str) -> ApiKey | None:
    """Revoke the key with this prefix; None when there is none. Every API replica refuses it once it has
    reloaded the keys (AUTH_REFRESH)."""
    record = keys.revoke(prefix, utc_now())
    if record is not None:
        audit("API key revoked", "key_revoked", record, by)
    return record


def install_bootstrap_key(keys: KeyStore, key: str, tenant_id: str) -> ApiKey:
    """Make sure the operator's bootstrap admin key (from a secret) exists; idempotent. A revoked bootstrap key
    stays revoked: restarting never brings it back. Raise ValueError for a malformed key, or PrefixTaken when
    its prefix belongs to a different key."""
    prefix = tokens.prefix_of(key)
    if prefix is None:
        raise ValueError(f"the bootstrap key is not an API key: expected {tokens.FORMAT_HINT}")
    record = ApiKey(prefix, tenant_id, Role.ADMIN, tokens.digest(key), utc_now(), "bootstrap")
    try:
        keys.insert(record)
    except PrefixTaken:
        existing = keys.find(prefix)
        if existing is None or not tokens.matches(key, existing.keyHash):
            raise
        return existing
    audit("bootstrap admin key installed", "key_created", record, "bootstrap")
    return record


def audit(message: str, action: str, record: ApiKey, by: str) -> None:
    log.info(
        message,
        extra={
            "action": action,
            "tenantId": record.tenantId,
            "keyPrefix": record.prefix,
            "role": record.role.value,
            "by": by,
        },
    )
