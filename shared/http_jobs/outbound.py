"""Where an `http` job may send its request. A job's URL is a tenant's text, and the executor sending it sits
inside the operator's network: without a check a tenant could reach the metadata service of the cloud it runs
in, the store, Kafka or any internal service (server-side request forgery).

By default every address that is not a public unicast one is refused: loopback, private (RFC 1918, unique
local), link-local (the metadata services' 169.254.169.254 and fd00:ec2::254 among them), shared (CGNAT),
multicast, unspecified and reserved ranges, and IPv4 inside IPv6 (mapped, NAT64, 6to4) is judged as the IPv4
address it carries. The check is made on the addresses the host name resolves to, and the connection goes to the
checked address itself (a second lookup could answer otherwise: DNS rebinding); a redirect, when a job asks to
follow one, is checked again. HTTP_JOBS_ALLOW (networks and host names) opens what an operator chooses.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Final

from jobsched.payloads import with_article

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
# A host name's addresses, as getaddrinfo gives them (a test passes its own, to make a name resolve anywhere).
Resolver = Callable[[str, int], list[str]]

# Ranges `ipaddress` does not already call private, loopback, link-local, multicast, reserved or unspecified.
_ALSO_BLOCKED: Final = tuple(
    ipaddress.ip_network(n)
    for n in ("100.64.0.0/10", "192.0.0.0/24", "198.18.0.0/15", "64:ff9b:1::/48", "2001::/23", "fd00:ec2::254/128")
)


class Refused(Exception):
    """The request may not go where it would: the message names the host and the address class (not the address
    a name resolves to), for lastError."""


def system_resolver(host: str, port: int) -> list[str]:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise OSError(f"{host} does not resolve: {exc}") from None
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


@dataclass(frozen=True)
class OutboundPolicy:
    """`allowed_networks` and `allowed_hosts` (lower-case names, or `.example.com` for a domain and its
    subdomains) are let through whatever their addresses."""

    allowed_networks: tuple[Network, ...] = ()
    allowed_hosts: frozenset[str] = frozenset()
    resolve: Resolver = system_resolver

    @classmethod
    def from_setting(cls, entries: Iterable[str], resolve: Resolver = system_resolver) -> OutboundPolicy:
        """From HTTP_JOBS_ALLOW's comma-separated entries: a network (10.1.0.0/16, 127.0.0.1) or a host name."""
        networks: list[Network] = []
        hosts: set[str] = set()
        for entry in (e.strip() for e in entries):
            if not entry:
                continue
            try:
                networks.append(ipaddress.ip_network(entry, strict=False))
            except ValueError:
                hosts.add(entry.lower().rstrip("."))
        return cls(tuple(networks), frozenset(hosts), resolve)

    def addresses(self, host: str, port: int, deadline: float) -> list[str]:
        """The addresses to connect to for `host`, each allowed; Refused, OSError (it does not resolve) or
        TimeoutError (no answer before `deadline`, a time.monotonic() value)."""
        literal = _literal(host)
        if literal is not None:
            self.check(host, literal)
            return [str(literal)]
        found = [ipaddress.ip_address(a.split("%", 1)[0]) for a in _resolved_by(self.resolve, host, port, deadline)]
        if not found:
            raise OSError(f"{host} resolves to no address")
        for address in found:
            self.check(host, address)
        return [str(a) for a in found]

    def check(self, host: str, address: IPAddress) -> None:
        if self._host_allowed(host) or any(address in network for network in self.allowed_networks):
            return
        blocked = blocked_class(address)
        if blocked is not None:
            # Only the class, never the address a name resolves to: the message reaches the tenant (lastError, the
            # API, logs), and answering with addresses would let a tenant map the operator's internal names.
            what = f"{host} is" if _literal(host) is not None else f"{host} resolves to"
            kind = with_article(f"{blocked} address")  # "an unspecified address"
            raise Refused(f"{what} {kind}, which http jobs may not reach (HTTP_JOBS_ALLOW opens it)")

    def _host_allowed(self, host: str) -> bool:
        name = host.lower().rstrip(".")
        return name in self.allowed_hosts or any(
            h.startswith(".") and (name.endswith(h) or name == h[1:]) for h in self.allowed_hosts
        )


def _resolved_by(resolve: Resolver, host: str, port: int, deadline: float) -> list[str]:
    """`resolve(host, port)`, waited for until `deadline` only: getaddrinfo takes no timeout, and a name whose
    servers never answer would hold the attempt for the resolver's own retries. The lookup is left to finish on its
    own thread (the system resolver's timeouts end it)."""
    answer: list[list[str]] = []
    failure: list[BaseException] = []

    def lookup() -> None:
        try:
            answer.append(resolve(host, port))
        except BaseException as exc:  # handed to the caller below
            failure.append(exc)

    thread = threading.Thread(target=lookup, name=f"resolve {host}", daemon=True)
    thread.start()
    thread.join(max(0.0, deadline - time.monotonic()))
    if failure:
        raise failure[0]
    if not answer:
        raise TimeoutError(f"{host} did not resolve in time")
    return answer[0]


def blocked_class(address: IPAddress) -> str | None:
    """Why an address is not a public one (None: it is)."""
    if isinstance(address, ipaddress.IPv6Address):
        embedded = address.ipv4_mapped or address.sixtofour or _nat64(address)
        if embedded is not None:
            return blocked_class(embedded)
    for name, test in (
        ("loopback", address.is_loopback),
        ("link-local", address.is_link_local),
        ("multicast", address.is_multicast),
        ("unspecified", address.is_unspecified),
        ("private", address.is_private),
        ("reserved", address.is_reserved),
    ):
        if test:
            return name
    if any(address in network for network in _ALSO_BLOCKED):
        return "non-public"
    return None


def _nat64(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if address in ipaddress.ip_network("64:ff9b::/96"):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def _literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None
