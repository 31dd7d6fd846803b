"""The API key format, and how a key is kept and checked without the store ever holding it.

A key reads `jsk_<prefix>_<secret>`: `prefix` is 12 hex characters (48 random bits) that name the key in
lists, logs and `revoke`; `secret` is 32 random bytes in URL-safe base64 (256 bits). Only the SHA-256 digest
of the whole key is stored. A slow password hash (bcrypt, scrypt, argon2) exists to make guessing a
low-entropy password expensive; a 256-bit random secret cannot be guessed whatever the hash costs, so a
slow hash would only add its cost (tens of milliseconds of CPU) to every request, and hand anyone who sends
garbage keys a cheap way to burn the API's CPU.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from typing import Final

MARK: Final = "jsk"
PREFIX_BYTES: Final = 6
SECRET_BYTES: Final = 32
# A bootstrap key comes from an operator's secret, not from new_key(): at least 128 bits' worth of base64.
MIN_SECRET_CHARS: Final = 22
_FORMAT: Final = re.compile(rf"{MARK}_([0-9a-f]{{{PREFIX_BYTES * 2}}})_([A-Za-z0-9_-]{{{MIN_SECRET_CHARS},}})")
FORMAT_HINT: Final = (
    f"{MARK}_<{PREFIX_BYTES * 2} lowercase hex>_<{MIN_SECRET_CHARS} or more URL-safe base64 characters>"
)


def new_key() -> tuple[str, str]:
    """A fresh random key and its prefix."""
    prefix = secrets.token_hex(PREFIX_BYTES)
    return f"{MARK}_{prefix}_{secrets.token_urlsafe(SECRET_BYTES)}", prefix


def prefix_of(key: str) -> str | None:
    """The prefix of a well-formed key, None for anything else."""
    found = _FORMAT.fullmatch(key)
    return found.group(1) if found else None


def digest(key: str) -> str:
    """What the store keeps of a key: SHA-256, hex."""
    return hashlib.sha256(key.encode()).hexdigest()


# Compared against when the presented prefix is unknown, so an unknown prefix costs what a wrong secret does.
DUMMY_DIGEST: Final = digest(f"{MARK}_{'0' * PREFIX_BYTES * 2}_{'0' * MIN_SECRET_CHARS}")


def matches(key: str, stored_digest: str) -> bool:
    """Constant-time comparison of a presented key with a stored digest."""
    return hmac.compare_digest(digest(key), stored_digest)
