"""Secrets kept in the store, sealed: AES-256-GCM under the operator's key (JOBSCHED_SECRETS_KEY, or the file
JOBSCHED_SECRETS_KEY_FILE names; shared/sealing_keys.py says where a process takes it from), so that the
database alone (a copy, a backup, a dump, a replica's disk) gives none of them away.

A value is sealed with what it belongs to as associated data (its kind, tenant and name): a ciphertext copied into
another tenant's or another name's place does not open there, so whoever can write to the database but does not
hold the key cannot make one tenant's secret be sent for another. Beside each value the store keeps the id of the
key that sealed it (a digest of the key, which tells nothing of it), so that a later change of key can tell which
values still need the old one.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import logging
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

log = logging.getLogger("jobsched.secrets")
KEY_BYTES: Final = 32  # AES-256
NONCE_BYTES: Final = 12  # random per value: 2^-32 collision odds only after ~2^32 values under one key
KEY_VARIABLE: Final = "JOBSCHED_SECRETS_KEY"
KEY_FILE_VARIABLE: Final = "JOBSCHED_SECRETS_KEY_FILE"
SET_A_KEY: Final = f"set {KEY_VARIABLE} (or {KEY_FILE_VARIABLE}) to a key (openssl rand -base64 32)"
_AAD_VERSION: Final = "jobsched-sealed-v1"


class SealingError(Exception):
    """A secret cannot be sealed or opened here; the message says why, for an operator."""


class KeyUnavailable(SealingError):
    """This process has no key (the message names the variable), or not the one a value was sealed with."""


class Undecryptable(SealingError):
    """A value does not open under its key for what it is said to belong to: moved or altered."""


@dataclass(frozen=True)
class Sealed:
    """A value as the store keeps it: the id of the key that sealed it, and the nonce followed by the ciphertext
    and its tag."""

    key_id: str
    blob: bytes


def key_id_of(key: bytes) -> str:
    """A stable name for a key, revealing nothing of it (a domain-separated digest)."""
    return hashlib.sha256(b"jobsched secrets key id\0" + key).hexdigest()[:16]


def key_from_text(text: str, source: str) -> bytes:
    """The key written as base64 (standard or URL-safe, padding optional) of 32 bytes; ValueError naming `source`."""
    cleaned = "".join(text.split()).replace("-", "+").replace("_", "/")
    try:
        key = base64.b64decode(cleaned + "=" * (-len(cleaned) % 4), validate=True)
    except (binascii.Error, ValueError):
        key = b""
    if len(key) != KEY_BYTES:
        raise ValueError(f"{source} is not a key: expected {KEY_BYTES} bytes in base64 (openssl rand -base64 32)")
    return key


def new_key_text() -> str:
    return base64.b64encode(os.urandom(KEY_BYTES)).decode("ascii")


class Keyring:
    """The key a process seals and opens secrets with, or none: then `problem` says why (it names the variable),
    and every seal or open raises KeyUnavailable with it, so that a process without a key starts and refuses
    only what needs one."""

    def __init__(self, key: bytes | None, problem: str = "") -> None:
        if key is not None and len(key) != KEY_BYTES:
            raise ValueError(f"a secrets key is {KEY_BYTES} bytes")
        # The cipher is made at the first seal or open: importing OpenSSL's bindings costs a process ~8 MB, which
        # one that never meets a secret (no http job, no credential) does not pay.
        self._key = key
        self._aead: AESGCM | None = None
        self._key_id = key_id_of(key) if key is not None else ""
        self.problem = "" if key is not None else problem or f"no secrets key is configured: {SET_A_KEY}"
        self._warned = False

    @classmethod
    def missing(cls, problem: str = "") -> Keyring:
        return cls(None, problem)

    @property
    def available(self) -> bool:
        return self._key is not None

    @property
    def key_id(self) -> str:
        self._usable()
        return self._key_id

    def seal(self, plaintext: str, *belongs_to: str) -> Sealed:
        aead = self._usable()
        nonce = os.urandom(NONCE_BYTES)
        return Sealed(self._key_id, nonce + aead.encrypt(nonce, plaintext.encode("utf-8"), _aad(belongs_to)))

    def open(self, sealed: Sealed, *belongs_to: str) -> str:
        aead = self._usable()
        if sealed.key_id != self._key_id:
            raise KeyUnavailable(
                f"a secret was sealed with key {sealed.key_id}, not this process's key {self._key_id}: "
                f"give it the key the secrets were written with ({KEY_VARIABLE})"
            )
        from cryptography.exceptions import InvalidTag

        nonce, ciphertext = sealed.blob[:NONCE_BYTES], sealed.blob[NONCE_BYTES:]
        try:
            return aead.decrypt(nonce, ciphertext, _aad(belongs_to)).decode("utf-8")
        except (InvalidTag, ValueError):
            raise Undecryptable(
                "a stored secret does not open for what it is kept as: it was altered or moved in the database"
            ) from None

    def _usable(self) -> AESGCM:
        if self._key is None:
            if not self._warned:  # once: the refusals themselves say it to whoever asked
                self._warned = True
                log.warning(
                    "a secret was refused: no key", extra={"action": "secrets_key_missing", "error": self.problem}
                )
            raise KeyUnavailable(self.problem)
        if self._aead is None:
            from cryptography.hazmat.primitives.ciphers.aead import AESGCM

            self._aead = AESGCM(self._key)
        return self._aead


def _aad(belongs_to: tuple[str, ...]) -> bytes:
    """What a value is bound to, unambiguously (a JSON array: no two different lists encode alike)."""
    return json.dumps([_AAD_VERSION, *belongs_to], ensure_ascii=True, separators=(",", ":")).encode("ascii")
