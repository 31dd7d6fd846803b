"""Where an http job's request may go (shared/http_jobs/outbound.py): every address class that is not public is
refused, also behind a name that resolves to it, before any connection is made; HTTP_JOBS_ALLOW opens networks
and names."""

from __future__ import annotations

import ipaddress
import socket
import threading
import time

import pytest

from jobsched.payloads import with_article
from shared.http_jobs.outbound import OutboundPolicy, Refused, blocked_class
from shared.http_jobs.request import BadHttpRequest, HttpRequest
from shared.http_jobs.sending import Unanswered, send

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("127.0.0.1", "loopback"),
        ("127.8.9.10", "loopback"),
        ("::1", "loopback"),
        ("10.0.0.1", "private"),
        ("172.16.5.4", "private"),
        ("192.168.1.1", "private"),
        ("fd12:3456::1", "private"),
        ("169.254.169.254", "link-local"),  # the cloud metadata service
        ("fe80::1", "link-local"),
        ("fd00:ec2::254", "private"),  # AWS's IPv6 metadata service
        ("100.64.0.1", "non-public"),  # shared address space (CGNAT)
        ("198.18.0.1", "private"),
        ("224.0.0.1", "multicast"),
        ("ff02::1", "multicast"),
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
        ("240.0.0.1", "private"),
        ("::ffff:127.0.0.1", "loopback"),  # IPv4-mapped: judged as the IPv4 address
        ("::ffff:10.0.0.1", "private"),
        ("64:ff9b::a00:1", "private"),  # NAT64 of 10.0.0.1
        ("2002:a00:1::", "private"),  # 6to4 of 10.0.0.1
    ],
)
def test_non_public_addresses_are_refused_by_class(address: str, kind: str) -> None:
    assert blocked_class(ipaddress.ip_address(address)) == kind


@pytest.mark.parametrize("address", ["93.184.215.14", "1.1.1.1", "2606:4700:4700::1111", "::ffff:8.8.8.8"])
def test_public_addresses_pass(address: str) -> None:
    assert blocked_class(ipaddress.ip_address(address)) is None


def test_a_public_looking_name_that_resolves_to_a_private_address_is_refused_before_connecting() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    port = listener.getsockname()[1]
    resolved: list[str] = []

    def rebinding_resolver(host: str, port: int) -> list[str]:
        resolved.append(host)
        return ["93.184.215.14", "127.0.0.1"]  # one public answer does not make the other one safe

    policy = OutboundPolicy(resolve=rebinding_resolver)
    request = HttpRequest.from_payload({"url": f"http://billing.example.com:{port}/charge"})
    with pytest.raises(Refused, match=r"billing\.example\.com resolves to a loopback address"):
        send(request, {}, policy, time.monotonic() + 5, 1024)
    assert resolved == ["billing.example.com"]
    with pytest.raises(TimeoutError):
        listener.accept()  # nothing connected
    listener.close()


@pytest.mark.parametrize(
    ("host", "resolved", "kind"),
    [
        ("localhost", "127.0.0.1", "loopback"),
        ("db.corp.invalid", "10.20.30.40", "private"),
        ("metadata.corp.invalid", "169.254.169.254", "link-local"),
        ("v6.corp.invalid", "fd12:3456::7", "private"),
        ("any.corp.invalid", "0.0.0.0", "unspecified"),
    ],
)
def test_a_refusal_names_the_class_never_the_address_a_name_resolves_to(host: str, resolved: str, kind: str) -> None:
    """The message reaches the tenant (lastError): the addresses behind a name would map the operator's network."""
    policy = OutboundPolicy(resolve=lambda name, port: [resolved])
    with pytest.raises(Refused) as refused:
        policy.addresses(host, 80, time.monotonic() + 5)
    said = str(refused.value)
    kind = with_article(f"{kind} address")  # an unspecified one
    assert said == f"{host} resolves to {kind}, which http jobs may not reach (HTTP_JOBS_ALLOW opens it)"
    assert resolved not in said
    with pytest.raises(Refused) as literal:  # an address in the URL is the tenant's own text: named as given
        policy.addresses(resolved, 80, time.monotonic() + 5)
    assert str(literal.value).startswith(f"{resolved} is {kind}")


def test_a_name_that_never_resolves_ends_the_attempt_at_its_deadline() -> None:
    release = threading.Event()
    outlived: list[bool] = []

    def silent_resolver(host: str, port: int) -> list[str]:  # a name whose servers never answer
        outlived.append(not release.wait(60))
        return ["93.184.215.14"]

    request = HttpRequest.from_payload({"url": "http://slow-dns.example.com/hook", "timeoutSeconds": 1})
    with pytest.raises(Unanswered, match=r"slow-dns\.example\.com did not resolve within 1s") as raised:
        send(request, {}, OutboundPolicy(resolve=silent_resolver), time.monotonic() + 0.2, 1024)
    assert raised.value.timed_out
    assert outlived == []  # send returned while the lookup was still waiting
    release.set()


def test_a_resolver_failure_within_the_deadline_is_the_attempts_error() -> None:
    def failing_resolver(host: str, port: int) -> list[str]:
        raise OSError(f"{host} does not resolve: Name or service not known")

    request = HttpRequest.from_payload({"url": "http://gone.example.com/hook"})
    with pytest.raises(OSError, match=r"gone\.example\.com does not resolve"):
        send(request, {}, OutboundPolicy(resolve=failing_resolver), time.monotonic() + 5, 1024)


def test_the_allow_list_opens_networks_names_and_domains() -> None:
    def resolver(host: str, port: int) -> list[str]:
        return {"billing.internal": ["10.20.0.5"], "api.corp.internal": ["10.30.0.7"], "other.lan": ["10.9.9.9"]}[host]

    policy = OutboundPolicy.from_setting(["127.0.0.1", "10.20.0.0/16", ".corp.internal", " "], resolve=resolver)
    assert policy.addresses("127.0.0.1", 80, time.monotonic() + 5) == ["127.0.0.1"]
    assert policy.addresses("billing.internal", 80, time.monotonic() + 5) == ["10.20.0.5"]  # by its network
    assert policy.addresses("api.corp.internal", 80, time.monotonic() + 5) == ["10.30.0.7"]  # by its domain
    with pytest.raises(Refused):
        policy.addresses("127.0.0.2", 80, time.monotonic() + 5)
    with pytest.raises(Refused):
        policy.addresses("other.lan", 80, time.monotonic() + 5)


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        ([], "payload is an object"),
        ({"url": "http:///nohost"}, "names a host"),
        ({"url": "http://example.com:99999/"}, "not a URL"),
        ({"url": "http://exa mple.com/"}, "without spaces"),
        ({"url": "https://example.com/", "extra": 1}, "unknown fields"),
        ({"url": "https://example.com/", "headers": {"Jobsched-Attempt": "9"}}, "set by jobsched"),
        # CGI and WSGI receivers read `_` as `-`: these reach them as jobsched's own headers.
        ({"url": "https://example.com/", "headers": {"Jobsched_Signature": "t=1"}}, "Jobsched_Signature is set by"),
        ({"url": "https://example.com/", "headers": {"Idempotency_Key": "k"}}, "Idempotency_Key is set by"),
        ({"url": "https://example.com/", "headers": {"jobsched_job_id": "j"}}, "jobsched_job_id is set by"),
        ({"url": "https://example.com/", "headers": {"Transfer_Encoding": "chunked"}}, "set by jobsched"),
        ({"url": "https://example.com/", "headers": {"bad name": "x"}}, "not a header name"),
        ({"url": "https://example.com/", "body": 5}, "payload.body is a string"),
        ({"url": "https://example.com/", "followRedirects": "yes"}, "true or false"),
        ({"url": "https://example.com/", "timeoutSeconds": 901}, "at most 900"),
    ],
)
def test_a_payload_that_is_not_a_request_says_why(payload: object, reason: str) -> None:
    with pytest.raises(BadHttpRequest, match=reason):
        HttpRequest.from_payload(payload)


def test_a_request_keeps_what_the_payload_asks() -> None:
    request = HttpRequest.from_payload(
        {"url": "https://Billing.example.com:8443/a/b?c=1", "method": "PUT", "json": {"é": 1}}
    )
    where = (request.scheme, request.host, request.port, request.target)
    assert where == ("https", "billing.example.com", 8443, "/a/b?c=1")
    assert request.body == '{"é":1}'.encode()
    assert request.headers == {"Content-Type": "application/json"}
    assert (request.timeout_s, request.follow_redirects) == (30.0, False)
