"""The executor's side of credential references (credential_refs.py): the values filled into a request's
headers at send time, and kept from going anywhere else.

- A credential the tenant no longer has (deleted since the job was created) fails the attempt without a retry:
  it will not come back by itself, and the job's lastError names the header and the credential.
- One this executor cannot open (no key, another key: the message names the variable) fails the attempt with a
  retry: it is the operator's to fix, and a retry after the fix sends the request.
- The values are sent to the URL's origin only: a redirect to another scheme, host or port drops them (as
  browsers drop an Authorization header).
- What the receiver answers is read with the values blanked out, so a receiver that echoes a request's headers
  into its body does not put them in the attempt's result or lastError.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from jobsched.outcomes import GiveUp, RetryAfter
from shared.http_jobs.credential_refs import CredentialRef
from shared.http_jobs.credentials import NoSuchCredential
from shared.http_jobs.request import HttpRequest
from shared.http_jobs.sending import Response
from shared.sealing import SealingError

# A tenant's credential's value by (tenant, name): Credentials.value.
Lookup = Callable[[str, str], str]
REDACTED: Final = "[credential]"


@dataclass(frozen=True)
class Filled:
    """The headers the references stand for, and the values in them (for redacted)."""

    headers: dict[str, str]
    values: tuple[str, ...]


def filled(refs: Mapping[str, CredentialRef], tenant_id: str, lookup: Lookup) -> Filled:
    headers: dict[str, str] = {}
    values: list[str] = []
    for header, ref in refs.items():
        try:
            value = lookup(tenant_id, ref.name)
        except NoSuchCredential:
            raise GiveUp(
                f"payload.headers.{header}: no credential named {ref.name!r} (deleted since the job was created?"
                f" PUT /credentials/{ref.name} sets it; then retry the job)"
            ) from None
        except SealingError as exc:
            raise RetryAfter(
                0, f"payload.headers.{header}: credential {ref.name!r} cannot be read here: {exc}"
            ) from None
        headers[header] = ref.prefix + value
        values.append(value)
    return Filled(headers, tuple(values))


def kept_across(before: HttpRequest, after: HttpRequest) -> HttpRequest:
    """The request a redirect asks for, with its credential references only when it stays on their origin."""
    if (before.scheme, before.host.lower(), before.port) == (after.scheme, after.host.lower(), after.port):
        return after
    return dataclasses.replace(after, credentials={})


def redacted(response: Response, values: Iterable[str]) -> Response:
    """`response` with every credential value sent blanked out of its reason, headers and body."""
    secrets = sorted({v for v in values if v}, key=len, reverse=True)  # the longest first: one may hold another
    if not secrets:
        return response

    def clean(text: str) -> str:
        for secret in secrets:
            text = text.replace(secret, REDACTED)
        return text

    body = response.body
    for secret in secrets:
        body = body.replace(secret.encode("ascii"), REDACTED.encode("ascii"))
    headers = {name: clean(value) for name, value in response.headers.items()}
    return dataclasses.replace(response, reason=clean(response.reason), headers=headers, body=body)
