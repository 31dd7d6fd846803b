"""Running the local stack (deployments/local/stack.sh) from a test: its own state dir, ports, database, topic
prefix and election key, so it neither needs nor disturbs a `make up` stack or other tests."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

from pymongo import MongoClient
from pymongo.errors import PyMongoError

from loadtest.procs import free_ports
from tests.deployments.manifests import LOCAL_DIR

STACK_TIMEOUT_S = 240
STACK_PORTS = 32


def stack_env(root: Path, run_id: str, api_port: int) -> dict[str, str]:
    """The environment of a stack of its own under `root`."""
    return {
        **os.environ,
        "STACK_DIR": str(root / "stack"),
        "API_PORT": str(api_port),
        # A metrics port each, consecutive: the API, two schedulers, the reaper and an executor per type, built-in
        # or a plug-in's (stack.sh lists them): room to spare, as no later port may fall among them.
        "STACK_METRICS_PORT": str(free_ports(STACK_PORTS)),
        "MONGO_DB": f"e2e_{run_id}",
        "KAFKA_TOPIC_PREFIX": f"e2e-{run_id}-",
        "KAFKA_PARTITIONS": "2",
        "ELECTION_KEY": f"/jobsched-test/{run_id}/leader",
        "SCHEDULER_TICK": "200ms",
    }


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
