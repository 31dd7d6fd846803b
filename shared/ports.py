"""Listening sockets: bind one with an error that says who holds the port, and find that holder."""

from __future__ import annotations

import errno
import os
import socket
from pathlib import Path


class ListenError(OSError):
    """A listener could not be opened; the message is one line for the operator."""


def listen(host: str, port: int, what: str, variable: str) -> socket.socket:
    """A bound, listening TCP socket, or ListenError naming the process that holds the port."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise ListenError(
                f"{what}: port {port} on {host} is in use by {holder_of(port)}; set {variable} to another port"
            ) from None
        raise ListenError(f"{what}: cannot listen on {host}:{port}: {exc.strerror}") from None
    sock.set_inheritable(True)
    return sock


def holder_of(port: int) -> str:
    """`pid N (command line)` of the process listening on `port`, as far as /proc shows it."""
    inodes = _listening_inodes(port)
    if inodes:
        for pid_dir in Path("/proc").iterdir():
            if pid_dir.name.isdigit() and _holds(pid_dir, inodes):
                return f"pid {pid_dir.name} ({_command(pid_dir)})"
    return "another process"


def _listening_inodes(port: int) -> set[str]:
    found: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            # local_address is HEX_IP:HEX_PORT; state 0A is LISTEN; field 9 is the socket's inode.
            if len(fields) > 9 and fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                found.add(fields[9])
    return found


def _holds(pid_dir: Path, inodes: set[str]) -> bool:
    try:
        for fd in os.scandir(pid_dir / "fd"):
            target = os.readlink(fd.path)
            if target.startswith("socket:[") and target[8:-1] in inodes:
                return True
    except OSError:  # gone meanwhile, or not ours to look at
        return False
    return False


def _command(pid_dir: Path) -> str:
    try:
        words = (pid_dir / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return "unknown command"
    text = " ".join(w.decode(errors="replace") for w in words if w)
    return text[:120] or "unknown command"
