"""A tenant's named credentials for its http jobs' headers (docs/http-jobs.md#credentials): a job names one
(credential_refs.py) instead of carrying its value, and the executor fills it in at send time, so that whoever may
read the tenant's jobs does not read the billing token.

Write-only: a value is set (made or replaced: a rotation) and deleted, never shown; what is listed is the names
and times. Values are sealed under the operator's key (shared/sealing.py) with the tenant and name as associated
data, so the store holds none in the clear and a sealed value moved to another tenant or name does not open.
Bounded: a name is NAME's characters, a value at most MAX_VALUE_BYTES of printable ASCII (it goes into a header),
a tenant has at most MAX_PER_TENANT.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Protocol

from shared.model import format_time
from shared.sealing import Keyring, Sealed

NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
NAME_RULE: Final = "1 to 128 letters, digits, '.', '_' or '-', starting with a letter or digit"
MAX_VALUE_BYTES: Final = 8 * 1024
MAX_PER_TENANT: Final = 100
SEALED_AS: Final = "credential"  # the kind in a sealed value's associated data


class BadCredential(ValueError):
    """A name or value that cannot be a credential's; the message says why."""


class ValueTooLarge(BadCredential):
    """A value over MAX_VALUE_BYTES (the API's 413)."""


class TooManyCredentials(Exception):
    def __init__(self, tenant_id: str) -> None:
        super().__init__(
            f"the tenant has {MAX_PER_TENANT} credentials, the most it may: delete one first (DELETE /credentials/NAME)"
        )
        self.tenant_id = tenant_id


class NoSuchCredential(LookupError):
    def __init__(self, tenant_id: str, name: str) -> None:
        super().__init__(f"no credential named {name!r}")
        self.tenant_id = tenant_id
        self.name = name


@dataclass(frozen=True)
class CredentialInfo:
    """What may be known of a credential: never its value."""

    tenantId: str
    name: str
    createdAt: datetime
    updatedAt: datetime  # of its value: the last rotation

    def to_wire(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "tenantId": self.tenantId,
            "createdAt": format_time(self.createdAt),
            "updatedAt": format_time(self.updatedAt),
        }


def checked_name(name: Any) -> str:
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise BadCredential(f"a credential's name is {NAME_RULE}")
    return name


def checked_value(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise BadCredential("a credential's value is a non-empty string")
    if len(value.encode("utf-8")) > MAX_VALUE_BYTES:
        raise ValueTooLarge(f"a credential's value is at most {MAX_VALUE_BYTES} bytes")
    if not (value.isascii() and value.isprintable()):
        raise BadCredential("a credential's value is printable ASCII (it is sent in a header): no line breaks")
    return value


def stored_time(now: datetime) -> datetime:
    """`now` as both stores keep times (milliseconds)."""
    return now.replace(microsecond=now.microsecond // 1000 * 1000)


class CredentialStore(Protocol):
    """Where sealed values are kept, beside the job store (credentials.py of shared/store/sqlite/ and of
    shared/store/mongo/)."""

    def put(self, tenant_id: str, name: str, sealed: Sealed, now: datetime) -> tuple[CredentialInfo, bool]:
        """Set the credential: made (True), or its value replaced (False; createdAt kept). TooManyCredentials when
        it is new and the tenant has MAX_PER_TENANT already (decided atomically)."""

    def listed(self, tenant_id: str) -> list[CredentialInfo]:
        """The tenant's credentials, by name."""

    def sealed(self, tenant_id: str, name: str) -> Sealed | None:
        """The credential's sealed value, or None when the tenant has none of that name."""

    def remove(self, tenant_id: str, name: str) -> bool:
        """Whether the tenant had that credential (it has not any more)."""

    def missing(self, tenant_id: str, names: Collection[str]) -> set[str]:
        """Which of `names` the tenant has no credential of."""


class Credentials:
    """The credentials as the API and the executors use them: a value checked and sealed on its way in, opened
    on its way out (to be sent); names and times for everything else. Sealing and opening raise
    sealing.KeyUnavailable when this process has no key."""

    def __init__(self, store: CredentialStore, keyring: Keyring) -> None:
        self.store = store
        self.keyring = keyring

    def set(self, tenant_id: str, name: str, value: str, now: datetime) -> tuple[CredentialInfo, bool]:
        checked_name(name)
        sealed = self.keyring.seal(checked_value(value), SEALED_AS, tenant_id, name)
        return self.store.put(tenant_id, name, sealed, stored_time(now))

    def value(self, tenant_id: str, name: str) -> str:
        """The value to send; NoSuchCredential when the tenant has none of that name (deleted since)."""
        sealed = self.store.sealed(tenant_id, name)
        if sealed is None:
            raise NoSuchCredential(tenant_id, name)
        return self.keyring.open(sealed, SEALED_AS, tenant_id, name)
