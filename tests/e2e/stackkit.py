"""Running the local stack (deployments/local/stack.sh) from a test: its own state dir, ports, database, topic
prefix and election key, so it neither needs nor disturbs a `make up` stack or other tests."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path
from typing import Any

from pymongo import MongoClient
from pymongo.errors import PyMongoError

from shared.handlers.builtin import builtin_types
from tests.deployments.manifests import LOCAL_DIR
from tests.support import free_port

BUILTIN_TYPES = builtin_types(demo=True)  # what the binaries serve by default


STACK_TIMEOUT_S = 240


def stack_env(root: Path, run_id: str, api_port: int) -> dict[str, str]:
    """The environment of a stack of its own under `root`."""
    return {
        **os.environ,
        "STACK_DIR": str(root / "stack"),
        "API_PORT": str(api_port),
        "STACK_METRICS_PORT": str(port_block(4 + len(BUILTIN_TYPES.names()))),
        "MONGO_DB": f"e2e_{run_id}",
        "KAFKA_TOPIC_PREFIX": f"e2e-{run_id}-",
        "KAFKA_PARTITIONS": "2",
        "ELECTION_KEY": f"/jobsched-test/{run_id}/leader",
        "SCHEDULER_TICK": "200ms",
    }


def port_block(size: int) -> int:
    """The first of `size` consecutive free loopback ports."""
    for _ in range(50):
        base = free_port()
        if base + size > 65535:
            continue
        sockets = []
        try:
            for port in range(base, base + size):
                s = socket.socket()
                sockets.append(s)
                s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for s in sockets:
                s.close()
    raise AssertionError(f"no block of {size} free ports")


def script(name: str, command: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(LOCAL_DIR / name), command],
        env=env,
        capture_output=True,
        text=True,
        timeout=STACK_TIMEOUT_S,
        check=False,
    )


def logs_tail(folder: Path) -> str:
    return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-1500:]}" for p in sorted(folder.glob("*.log")))


def drop_database(server_exports: str, name: str) -> None:
    """The stack's database, while the servers are still up (`down` may stop them)."""
    mongo_uri = server_exports.rpartition("MONGO_URI=")[2].strip()
    client: MongoClient[dict[str, Any]] = MongoClient(mongo_uri, serverSelectionTimeoutMS=3000)
    try:
        client.drop_database(name)
    except PyMongoError:
        pass  # best effort: the database name is unique to this run
    finally:
        client.close()
