"""A credential named in an http job's headers instead of its value (credentials.py):

    "headers": {"Authorization": {"credential": "billing-token", "prefix": "Bearer "}}

is sent as `Authorization: Bearer <the credential's value>`, the value filled in by the executor at send time
(credential_filling.py). The payload keeps the reference only, wherever it goes: the stored job, its runs, the
API's answers, the console, the logs.

A reference is a whole header value: an object with `credential` (the name) and an optional `prefix` (printable
ASCII put before the value), nothing else. That is checked with the rest of the payload (request.py); whether
the tenant has the credential is checked by the API before the job is stored (services/api/credential_check.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from shared.http_jobs.credentials import NAME, NAME_RULE

MAX_PREFIX_CHARS: Final = 256
_FIELDS: Final = frozenset({"credential", "prefix"})
SHAPE: Final = '{"credential": NAME, "prefix"?: TEXT}'


@dataclass(frozen=True)
class CredentialRef:
    name: str
    prefix: str = ""

    @classmethod
    def of(cls, value: dict[str, Any]) -> CredentialRef:
        """The reference a header's object value makes; ValueError (its message for the payload's 400) for any
        other object."""
        unknown = set(value) - _FIELDS
        if unknown:
            raise ValueError(f"a credential reference is {SHAPE}; unknown: {', '.join(sorted(unknown))[:200]}")
        name = value.get("credential")
        if not isinstance(name, str) or not NAME.fullmatch(name):
            raise ValueError(f"a credential reference is {SHAPE}, the name {NAME_RULE}")
        prefix = value.get("prefix", "")
        if (
            not isinstance(prefix, str)
            or len(prefix) > MAX_PREFIX_CHARS
            or not (prefix.isascii() and prefix.isprintable())
        ):
            raise ValueError(
                f"a credential reference's prefix is printable ASCII of at most {MAX_PREFIX_CHARS} characters"
            )
        return cls(name, prefix)


def referenced(payload: Any) -> dict[str, str]:
    """Header name -> credential name, for each reference an http payload's headers make. Lenient: anything that
    is not a reference is left to the payload's own check."""
    headers = payload.get("headers") if isinstance(payload, dict) else None
    if not isinstance(headers, dict):
        return {}
    return {
        str(header): value["credential"]
        for header, value in headers.items()
        if isinstance(value, dict) and isinstance(value.get("credential"), str)
    }
