"""How a signing secret is kept: sealed under the operator's key (shared/sealing.py), bound to its tenant and id,
like the credentials. Both stores keep the same three fields and go through here, so they agree on every case:

- a process with a key writes `keyId` and `sealed`, and an empty `secret`;
- a process without one writes `secret` in the clear, as every version before the key did: a deployment that
  has not configured a key yet keeps signing its requests (credentials, new, are refused without a key);
- a secret written in the clear (before the key, or without one) is read as it is, and sealed in place the first
  time a process with the key uses the signing secrets (`sealed_in_place`: the stores' migration).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from shared.sealing import Keyring, Sealed

SEALED_AS: Final = "signing-secret"  # the kind in a sealed value's associated data


@dataclass(frozen=True)
class KeptSecret:
    """A secret's value as a store keeps it: in the clear (`secret`), or sealed (`key_id` and `sealed`)."""

    secret: str
    key_id: str | None
    sealed: bytes | None


def kept(tenant_id: str, secret_id: str, secret: str, keyring: Keyring) -> KeptSecret:
    if not keyring.available:
        return KeptSecret(secret, None, None)
    done = keyring.seal(secret, SEALED_AS, tenant_id, secret_id)
    return KeptSecret("", done.key_id, done.blob)


def opened(tenant_id: str, secret_id: str, value: KeptSecret, keyring: Keyring) -> str:
    """The secret's value; sealing.KeyUnavailable (naming the variable) for a sealed one and no key here."""
    if value.sealed is None:
        return value.secret
    return keyring.open(Sealed(value.key_id or "", value.sealed), SEALED_AS, tenant_id, secret_id)


def sealed_in_place(tenant_id: str, secret_id: str, value: KeptSecret, keyring: Keyring) -> KeptSecret | None:
    """What a secret kept in the clear becomes under the key; None when there is nothing to do (already sealed,
    or no key here)."""
    if value.sealed is not None or not keyring.available:
        return None
    return kept(tenant_id, secret_id, value.secret, keyring)
