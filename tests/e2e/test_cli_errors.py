"""Every command fails like a tool, not like a traceback: a bad argument, a bad setting or an unreachable
dependency is one line on stderr and a non-zero exit. The tools find a running local stack by its env file."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from pymongo.database import Database

from shared.store.sqlite import SqliteJobStore
from shared.store.sqlite.migrations import LATEST
from tests.support import REPO_ROOT, free_port

UNREACHABLE_MONGO = "mongodb://127.0.0.1:1/?directConnection=true"


def run(module: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in ("MONGO_URI", "MONGO_DB", "STACK_DIR")}
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=REPO_ROOT,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def one_line(done: subprocess.CompletedProcess[str]) -> str:
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    return lines[0]


@pytest.mark.parametrize(
    ("module", "args", "env", "code", "says"),
    [
        (
            "seed",
            ["--count", "5"],
            {"MONGO_URI": UNREACHABLE_MONGO, "MONGO_TIMEOUT": "1s"},
            1,
            "cannot reach the store at mongodb://",
        ),
        ("seed", ["--count", "-1"], {}, 2, "--count must be 0 or more"),
        ("seed", ["--bogus"], {}, 2, "unrecognized arguments: --bogus"),
        ("seed", ["--count", "5"], {"MONGO_TIMEOUT": "soon"}, 2, "MONGO_TIMEOUT"),
        ("loadtest", ["--duration", "1s", "--base-url", "http://127.0.0.1:1"], {}, 1, "cannot reach the API"),
        ("loadtest", ["--duration", "forever"], {}, 2, "invalid duration"),
        ("loadtest", ["--rate", "0"], {}, 2, "--rate must be positive"),
        ("services.executor", ["--type", "fax"], {}, 2, "unknown job type 'fax'"),
        ("services.executor", ["--zzz"], {}, 2, "unrecognized arguments"),
        ("services.dev", [], {"SCHEDULER_TICK": "often"}, 2, "SCHEDULER_TICK"),
        ("services.api", [], {"API_PORT": "eighty"}, 2, "API_PORT"),
        ("services.embedded", ["--db", "jobs.db"], {}, 2, "the database path must be absolute, not 'jobs.db'"),
        ("services.cli", ["backup", "/nonexistent/b.db", "--db", "/nonexistent/j.db"], {}, 1, "does not exist"),
        ("services.cli", ["restore", "/nonexistent/b.db", "--db", "/nonexistent/j.db"], {}, 1, "does not exist"),
        ("services.cli", ["nothing"], {}, 2, "jobsched: unknown command 'nothing'; one of: standalone, dev"),
        ("services.cli", [], {}, 2, "see jobsched --help"),
    ],
)
def test_a_bad_argument_setting_or_dependency_is_one_line_and_a_non_zero_exit(
    tmp_path: Path, module: str, args: list[str], env: dict[str, str], code: int, says: str
) -> None:
    isolated = {"STACK_DIR": str(tmp_path / "no-stack"), "JOBSCHED_DB": str(tmp_path / "dev.db")}
    done = run(module, *args, **isolated, **env)
    assert done.returncode == code, done.stderr[-3000:]
    assert says in one_line(done)


def test_seed_finds_a_running_local_stack_by_its_env_file(
    tmp_path: Path, mongo_uri: str, mongo_db: Database[dict[str, object]]
) -> None:
    stack = tmp_path / "stack"
    stack.mkdir()
    (stack / "env").write_text(
        f"export MONGO_URI={mongo_uri}\nexport MONGO_DB={mongo_db.name}\nexport JOBSCHED_API_URL=http://127.0.0.1:{free_port()}\n"
    )
    done = run("seed", "--count", "3", "--run-id", "stack", STACK_DIR=str(stack))
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"using the local stack's settings from {stack / 'env'}" in done.stderr
    assert "inserted 6" in done.stdout  # 3 one-off jobs and the 3 templates
    assert mongo_db["jobs"].count_documents({"idempotencyKey": {"$regex": "^seed-stack-"}}) == 6


def test_jobsched_help_lists_every_command_and_succeeds(tmp_path: Path) -> None:
    from jobsched.commands import GROUPS as OPERATOR_GROUPS
    from services.cli import OTHER_COMMANDS, SERVICES

    done = run("services.cli", "--help", STACK_DIR=str(tmp_path / "no-stack"))
    assert done.returncode == 0, done.stderr
    listed = [line.split()[0] for line in done.stdout.splitlines() if line.startswith("  ")]
    assert sorted(listed) == sorted([*SERVICES, *OTHER_COMMANDS, *OPERATOR_GROUPS])


def test_dev_refuses_a_database_file_a_later_jobsched_migrated(tmp_path: Path) -> None:
    db = tmp_path / "dev.db"
    store = SqliteJobStore(db)
    store.ensure_schema()
    store.close()
    with contextlib.closing(sqlite3.connect(db)) as conn:
        conn.execute(f"PRAGMA user_version = {LATEST + 1}")
    written = db.read_bytes()
    ports = {"API_PORT": str(free_port()), "METRICS_PORT": str(free_port())}
    done = run("services.dev", STACK_DIR=str(tmp_path / "no-stack"), JOBSCHED_DB=str(db), **ports)
    assert done.returncode == 1, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    # After the log of the start so far (the secrets key made beside the file), the reason on one line.
    assert done.stderr.strip().splitlines()[-1] == (
        f"jobsched dev: the database's schema is version {LATEST + 1}; this jobsched knows versions up to {LATEST}: "
        f"run a jobsched that knows version {LATEST + 1} or later (downgrades are not supported)"
    )
    assert db.read_bytes() == written
