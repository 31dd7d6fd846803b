"""A credential named in an http job's headers (credential_refs.py) as the payload check reads it, and as the
executor fills it in (credential_filling.py): the outcome when it is gone or cannot be opened, the origin it is
sent to, and what of the response is kept."""

from __future__ import annotations

import pytest

from jobsched.outcomes import GiveUp, RetryAfter
from shared.http_jobs.credential_filling import REDACTED, filled, kept_across, redacted
from shared.http_jobs.credential_refs import CredentialRef, referenced
from shared.http_jobs.credentials import NoSuchCredential
from shared.http_jobs.request import BadHttpRequest, HttpRequest, parsed_url
from shared.http_jobs.sending import Response
from shared.sealing import KeyUnavailable

URL = "https://billing.example.com/charge"


def test_a_header_may_name_a_credential_instead_of_a_value() -> None:
    payload = {
        "url": URL,
        "headers": {
            "Authorization": {"credential": "billing-token", "prefix": "Bearer "},
            "X-Api": {"credential": "k"},
        },
    }
    request = HttpRequest.from_payload(payload)
    assert request.credentials == {
        "Authorization": CredentialRef("billing-token", "Bearer "),
        "X-Api": CredentialRef("k"),
    }
    assert request.headers == {}  # a reference is never a header's literal value
    assert referenced(payload) == {"Authorization": "billing-token", "X-Api": "k"}
    assert referenced({"url": URL, "headers": {"A": "literal"}}) == {}
    assert referenced("not a payload") == {}


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ({}, "a credential reference is"),
        ({"credential": "bad name"}, "the name 1 to 128 letters"),
        ({"credential": 7}, "the name"),
        ({"credential": "ok", "value": "sk_live"}, "unknown: value"),
        ({"credential": "ok", "prefix": "Bearer\r\n"}, "prefix is printable ASCII"),
        ({"credential": "ok", "prefix": "x" * 257}, "prefix is printable ASCII of at most 256"),
    ],
)
def test_a_reference_that_is_not_one_is_refused_naming_the_header(value: dict[str, object], reason: str) -> None:
    with pytest.raises(BadHttpRequest, match=f"payload.headers.Authorization: .*{reason}"):
        HttpRequest.from_payload({"url": URL, "headers": {"Authorization": value}})
    with pytest.raises(BadHttpRequest, match="set by jobsched"):  # a reserved header stays reserved
        HttpRequest.from_payload({"url": URL, "headers": {"Jobsched-Signature": {"credential": "ok"}}})


def test_filled_in_at_send_time_or_an_outcome_that_says_why_not() -> None:
    values = {("acme", "billing-token"): "sk_live_1"}

    def lookup(tenant: str, name: str) -> str:
        if (tenant, name) == ("acme", "locked"):
            raise KeyUnavailable("no secrets key is configured: set JOBSCHED_SECRETS_KEY")
        if (tenant, name) not in values:
            raise NoSuchCredential(tenant, name)
        return values[tenant, name]

    done = filled({"Authorization": CredentialRef("billing-token", "Bearer ")}, "acme", lookup)
    assert (done.headers, done.values) == ({"Authorization": "Bearer sk_live_1"}, ("sk_live_1",))
    with pytest.raises(GiveUp, match=r"payload\.headers\.Authorization: no credential named 'gone'"):
        filled({"Authorization": CredentialRef("gone")}, "acme", lookup)
    with pytest.raises(GiveUp, match="no credential named 'billing-token'"):  # another tenant's is not its own
        filled({"Authorization": CredentialRef("billing-token")}, "other", lookup)
    with pytest.raises(RetryAfter, match=r"credential 'locked' cannot be read here: .*JOBSCHED_SECRETS_KEY"):
        filled({"Authorization": CredentialRef("locked")}, "acme", lookup)


def test_a_redirect_keeps_the_references_on_their_origin_only() -> None:
    request = HttpRequest.from_payload({"url": URL, "headers": {"Authorization": {"credential": "t"}}})

    def to(url: str) -> HttpRequest:
        return kept_across(request, HttpRequest(**{**vars(request), **parsed_url(url)}))

    assert to("https://BILLING.example.com/elsewhere").credentials == request.credentials
    for other in ("https://evil.example.com/", "http://billing.example.com/", "https://billing.example.com:8443/"):
        assert to(other).credentials == {}, other


def test_what_a_receiver_echoes_of_a_value_is_not_kept() -> None:
    echoed = Response(
        400,
        "Bad token sk_live_1",
        {"www-authenticate": 'Bearer error="sk_live_1"', "content-type": "text/plain"},
        b"invalid token: Bearer sk_live_1 (and sk_live_1 again)",
        False,
        "203.0.113.7",
    )
    clean = redacted(echoed, ["sk_live_1"])
    assert clean.reason == f"Bad token {REDACTED}"
    assert clean.headers["www-authenticate"] == f'Bearer error="{REDACTED}"'
    assert clean.body == f"invalid token: Bearer {REDACTED} (and {REDACTED} again)".encode()
    assert (clean.status, clean.address, clean.truncated) == (400, "203.0.113.7", False)
    assert redacted(echoed, []) is echoed
