"""`jobsched standalone`, the embedded mode as a service: an absolute data path, a graceful stop, and a backup
taken while jobs run that restores with every job intact."""

from __future__ import annotations

import sqlite3
import subprocess
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from shared.model import TERMINAL, format_time, utc_now
from tests.e2e.devmode import JOBSCHED, NO_SERVERS, Dev
from tests.support import wait_until

pytestmark = pytest.mark.e2e
FINAL = {s.value for s in TERMINAL}
Completed = subprocess.CompletedProcess[str]


def jobsched(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run([JOBSCHED, *args], capture_output=True, text=True, timeout=120, cwd=cwd, env=env)


def create(node: Dev, key: str, job_type: str, payload: dict[str, Any], due_in: timedelta) -> str:
    body = {
        "idempotencyKey": key,
        "tenantId": "ops",
        "jobType": job_type,
        "payload": payload,
        "scheduledAt": format_time(utc_now() + due_in),
    }
    response = node.http.post("/jobs", json=body)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def jobs_in(path: Path) -> dict[str, tuple[str, str, int]]:
    """id → (status, payload, scheduledAt) as the file holds them."""
    with sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True) as db:
        rows = db.execute("SELECT id, status, payload, scheduledAt FROM jobs").fetchall()
    return {row[0]: (row[1], row[2], row[3]) for row in rows}


def test_a_backup_taken_while_jobs_run_restores_every_job(standalone: Dev, tmp_path: Path) -> None:
    node = standalone
    service = node.start()
    future = [create(node, f"later-{i}", "log-message", {"message": f"m{i}"}, timedelta(days=1)) for i in range(50)]
    future_as_created = {j: node.http.get(f"/jobs/{j}").json() for j in future}
    # Long enough to be running still when the backup command, a process of its own, has copied the file.
    running = [create(node, f"slow-{i}", "slow", {"sleepMs": 8000}, timedelta(0)) for i in range(5)]
    done = [create(node, f"now-{i}", "noop", {"n": i}, timedelta(0)) for i in range(100)]
    wait_until(
        lambda: all(node.http.get(f"/jobs/{j}").json()["status"] == "running" for j in running), 30, "slow jobs running"
    )

    backup = tmp_path / "backups" / "jobsched-backup.db"
    backup.parent.mkdir()
    made = jobsched("backup", str(backup), "--db", str(node.db))
    assert made.returncode == 0, made.stderr
    assert f"{backup}: " in made.stdout
    assert oct(backup.stat().st_mode & 0o777) == "0o600"  # every tenant's payloads are in it
    assert not Path(f"{backup}-wal").exists()  # one self-contained file
    in_backup = jobs_in(backup)
    assert set(future + running + done) <= set(in_backup)
    assert all(in_backup[j][0] == "running" for j in running)

    refused = jobsched("restore", str(backup), "--db", str(node.db))
    assert refused.returncode == 1
    assert "in use" in refused.stderr

    # Work goes on after the backup; a restore brings back the backup's state, not this.
    create(node, "after-backup", "noop", {}, timedelta(days=2))
    wait_until(
        lambda: all(node.http.get(f"/jobs/{j}").json()["status"] == "completed" for j in running), 30, "slow jobs done"
    )
    assert service.terminate() == 0
    assert "embedded_stopped" in service.log_text()

    restored = jobsched("restore", str(backup), "--db", str(node.db))
    assert restored.returncode == 0, restored.stderr
    assert jobs_in(node.db) == in_backup
    replaced = jobs_in(Path(f"{node.db}.before-restore"))
    # It says what it undoes: the backup's unfinished jobs run, those finished since run again, later ones are gone.
    unfinished = {j for j, (status, _, _) in in_backup.items() if status not in FINAL}
    finished_since = {j for j in unfinished if replaced[j][0] in FINAL}
    assert unfinished >= set(future + running)
    assert finished_since >= set(running)
    said = (
        f"{len(unfinished)} unfinished jobs are pending again and run when due; {len(finished_since)} of them had"
        " finished since the backup and will run again; 1 job created since the backup is gone"
    )
    assert said in restored.stdout

    node.start()
    listed = {j["id"]: j for j in node.http.get("/jobs", params={"tenantId": "ops", "limit": "500"}).json()}
    assert set(listed) == set(in_backup)  # the job created after the backup is not there
    for job_id in future:
        assert listed[job_id] == future_as_created[job_id]
    # The attempts the backup caught running are closed as interrupted and run again; every due job ends.
    wait_until(
        lambda: all(node.http.get(f"/jobs/{j}").json()["status"] == "completed" for j in running + done),
        60,
        "every due job of the backup to complete after the restore",
    )
    assert node.http.get(f"/jobs/{done[7]}").json()["payload"] == {"n": 7}


def test_a_relative_database_path_is_refused(tmp_path: Path) -> None:
    env = {**NO_SERVERS, "PATH": "/usr/bin:/bin"}
    by_flag = jobsched("standalone", "--db", "jobs.db", cwd=tmp_path, env=env)
    by_variable = jobsched("standalone", cwd=tmp_path, env={**env, "JOBSCHED_DB": "data/jobs.db"})
    for refused in (by_flag, by_variable):
        assert refused.returncode == 2
        assert "must be absolute" in refused.stderr
    assert list(tmp_path.iterdir()) == []  # nothing created in the working directory


def test_a_damaged_backup_is_refused_and_the_database_left_alone(standalone: Dev, tmp_path: Path) -> None:
    node = standalone
    service = node.start()
    kept = create(node, "kept", "noop", {}, timedelta(days=1))
    assert service.terminate() == 0
    before = jobs_in(node.db)
    damaged = tmp_path / "damaged.db"
    damaged.write_bytes(b"SQLite format 3\x00" + b"\x00" * 100)

    refused = jobsched("restore", str(damaged), "--db", str(node.db))
    assert refused.returncode == 1
    assert "damaged.db" in refused.stderr
    assert jobs_in(node.db) == before
    assert kept in before
    assert not Path(f"{node.db}.before-restore").exists()
