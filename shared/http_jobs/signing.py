"""How an `http` job's request is signed, so that its receiver can tell it came from jobsched, unaltered, lately.

    Jobsched-Signature: t=1764849600,v1=5257a869e7ecebeda32affa62cdca3fa51cad7e77a0e56ff536d0ce8e108d8bd

`t` is the unix time of the send, each `v1` the hex HMAC-SHA256, under one of the tenant's live signing secrets,
of `<t>.<body>` (the body's bytes as sent). A tenant has up to two live secrets, so that a new one can be put in
place before the old one goes (rotation): the request carries a `v1` for each, and a receiver accepts the
request when any `v1` matches a secret it knows and `t` is within its replay window (five minutes in the
documented snippet). The job id (`Idempotency-Key`) and the attempt (`Jobsched-Attempt`) go beside it.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence
from typing import Final

SIGNATURE_HEADER: Final = "Jobsched-Signature"
ATTEMPT_HEADER: Final = "Jobsched-Attempt"
JOB_ID_HEADER: Final = "Jobsched-Job-Id"
IDEMPOTENCY_HEADER: Final = "Idempotency-Key"


def signature(secret: str, timestamp: int, body: bytes) -> str:
    return hmac.new(secret.encode("utf-8"), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()


def signature_header(secrets: Sequence[str], timestamp: int, body: bytes) -> str:
    """The Jobsched-Signature value for a request sent at `timestamp` (unix seconds) with `body`."""
    return ",".join([f"t={timestamp}", *(f"v1={signature(s, timestamp, body)}" for s in secrets)])


def headers_for(job_id: str, attempt: int, secrets: Sequence[str], timestamp: int, body: bytes) -> dict[str, str]:
    """What jobsched adds to every request of an http job: who sent it and its signature (when the tenant has a
    secret: it always has, see SigningSecrets.live)."""
    added = {IDEMPOTENCY_HEADER: job_id, JOB_ID_HEADER: job_id, ATTEMPT_HEADER: str(attempt)}
    if secrets:
        added[SIGNATURE_HEADER] = signature_header(secrets, timestamp, body)
    return added
