"""The benchmarks' and tests' process helpers."""

from __future__ import annotations

import socket

from loadtest.procs import free_port


def test_free_port_never_hands_out_a_port_twice_and_each_is_free() -> None:
    # The kernel offers a probed port again soon after: two services of one test once got the same one.
    ports = [free_port() for _ in range(1000)]
    assert len(set(ports)) == len(ports)
    # below the kernel's ephemeral range, where no outgoing connection can take one before its service binds it
    assert max(ports) < 32768
    with socket.socket() as s:
        s.bind(("127.0.0.1", ports[-1]))  # free when handed out
