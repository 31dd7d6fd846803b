"""The scripts of deployments/local without starting anything (tests/e2e/test_prometheus.py runs stack.sh and
prometheus.sh, `make test` the servers' scripts)."""

from __future__ import annotations

import hashlib
import os
import re
import socket
import subprocess
from pathlib import Path

import pytest

from tests.deployments.manifests import LOCAL_DIR, REPO_ROOT

pytestmark = pytest.mark.unit

SCRIPTS = ("stack.sh", "prometheus.sh", "redis.sh", "ferretdb.sh", "documentdb.sh")


def run(script: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(LOCAL_DIR / script), *args],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=30,
        check=False,
    )


@pytest.mark.parametrize("script", SCRIPTS)
def test_script_parses_and_explains_its_usage(script: str) -> None:
    assert subprocess.run(["bash", "-n", str(LOCAL_DIR / script)], check=False).returncode == 0
    result = run(script, "no-such-command")
    assert result.returncode == 2
    assert "usage" in result.stderr.lower()


def test_status_and_targets_of_a_stack_that_is_not_up(tmp_path: Path) -> None:
    status = run("stack.sh", "status", STACK_DIR=str(tmp_path / "stack"))
    assert status.returncode == 1
    assert "not up" in status.stdout
    targets = run("stack.sh", "targets", STACK_DIR=str(tmp_path / "stack"))
    assert targets.returncode != 0
    assert "not up" in targets.stderr


def test_the_tools_environment_of_a_stack_is_its_env_file(tmp_path: Path) -> None:
    missing = run("stack.sh", "env", STACK_DIR=str(tmp_path / "stack"))
    assert missing.returncode != 0
    assert "not up" in missing.stderr
    (tmp_path / "stack").mkdir(exist_ok=True)  # the script made it already
    (tmp_path / "stack" / "env").write_text("export MONGO_URI=mongodb://127.0.0.1:27018/\n")
    found = run("stack.sh", "env", STACK_DIR=str(tmp_path / "stack"))
    assert (found.returncode, found.stdout) == (0, "export MONGO_URI=mongodb://127.0.0.1:27018/\n")
    script = (LOCAL_DIR / "stack.sh").read_text()
    assert "write_env_file" in script.split("cmd_up()")[1].split("cmd_down()")[0], "up writes the file"
    assert '"$ENV_FILE"' in script.split("cmd_down()")[1], "down removes it"


def test_down_of_a_stack_that_is_not_up_stops_nothing(tmp_path: Path) -> None:
    """No manifest and no record of started servers: `down` must not touch the shared local servers."""
    result = run("stack.sh", "down", STACK_DIR=str(tmp_path / "stack"))
    assert result.returncode == 0, result.stderr
    assert "stopped" not in result.stderr


def test_make_up_and_down_drive_the_stack_script() -> None:
    makefile = (REPO_ROOT / "Makefile").read_text()
    for target in ("up", "down"):
        recipe = re.search(rf"^{target}:.*\n((?:\t.*\n)+)", makefile, re.MULTILINE)
        assert recipe, f"no `make {target}`"
        assert f"$(STACK) {target}" in recipe.group(1) or f"stack.sh {target}" in recipe.group(1)
    assert re.search(r"^STACK\s*:?=\s*deployments/local/stack.sh", makefile, re.MULTILINE)


@pytest.mark.parametrize(
    ("script", "command", "variable"),
    [
        ("ferretdb.sh", "start", "FERRETDB_PORT"),
        ("documentdb.sh", "start", "POSTGRES_PORT"),
        ("etcd.sh", "start", "ETCD_PORT"),
        ("stack.sh", "up", "STACK_METRICS_PORT"),
    ],
)
def test_a_start_that_finds_its_port_taken_names_the_holder(
    tmp_path: Path, script: str, command: str, variable: str
) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        isolated = {"JOBSCHED_RUN_DIR": str(tmp_path / "run"), "STACK_DIR": str(tmp_path / "stack")}
        result = run(script, command, **isolated, **{variable: str(port)})
    assert result.returncode != 0
    assert f"port 127.0.0.1:{port}" in result.stderr, result.stderr
    assert f"in use by pid {os.getpid()} (" in result.stderr, result.stderr
    assert variable in result.stderr


def test_fixed_ports_lie_outside_the_ephemeral_range() -> None:
    """Linux hands out 32768-60999 to outgoing connections: a server port there can be taken at any moment."""
    defaults = re.compile(r'_PORT="\$\{[A-Z_]+:-(\d+)\}"')
    found = {(path.name, int(port)) for path in LOCAL_DIR.glob("*.sh") for port in defaults.findall(path.read_text())}
    assert len(found) >= 6, found
    assert [(name, port) for name, port in found if 32768 <= port <= 60999] == []


def test_every_vendored_source_is_the_one_its_checksum_names() -> None:
    """documentdb.sh builds only tarballs whose sha256 it names (SOURCES, and RUM_SOURCES, of which RUM_VERSION
    picks one), and vendor/README.md records the same."""
    script = (LOCAL_DIR / "documentdb.sh").read_text()
    sources = re.findall(r'^  "(\S+\.tar\.gz) ([0-9a-f]{64}) \S+"$', script, re.MULTILINE)
    readme = (LOCAL_DIR / "vendor" / "README.md").read_text()
    assert {name for name, _ in sources} == {
        "mongo-c-driver-1.28.0-libbson.tar.gz",
        "pg_cron-1.6.3.tar.gz",
        "pgvector-0.8.0.tar.gz",
        "documentdb-microsoft-b2e220c4.tar.gz",
        "rum-1.3.14.tar.gz",
        "rum-1.3.15.tar.gz",
    }, sources
    for name, digest in sources:
        assert hashlib.sha256((LOCAL_DIR / "vendor" / name).read_bytes()).hexdigest() == digest, name
        assert re.search(rf"^\| {re.escape(name)} \|.*\| {digest} \|$", readme, re.MULTILINE), name
    shipped = {p.name for p in (LOCAL_DIR / "vendor").glob("*.tar.gz")}
    assert shipped == {name for name, _ in sources}


def test_rum_is_1_3_15_unless_rum_version_names_another_vendored_one(tmp_path: Path) -> None:
    script = (LOCAL_DIR / "documentdb.sh").read_text()
    assert 'RUM_VERSION="${RUM_VERSION:-1.3.15}"' in script
    refused = run("documentdb.sh", "env", RUM_VERSION="1.3.13", JOBSCHED_RUN_DIR=str(tmp_path / "run"))
    assert refused.returncode == 1
    assert "RUM_VERSION=1.3.13" in refused.stderr, refused.stderr
    chosen = run("documentdb.sh", "env", RUM_VERSION="1.3.14", JOBSCHED_RUN_DIR=str(tmp_path / "run"))
    assert chosen.returncode == 0, chosen.stderr


SHELL_SCRIPTS = (*sorted(LOCAL_DIR.glob("*.sh")), REPO_ROOT / ".ci" / "run")
# A pipe into a reader that may exit before its writer has written everything.
EARLY_EXIT_READER = re.compile(r"\|\s*(head\b|grep\s+(-[A-Za-z]*[qm]|--quiet|--max-count))")


def test_no_check_pipes_into_a_reader_that_stops_early() -> None:
    """Under pipefail, `cmd | grep -q` fails when grep exits at its match while cmd still writes (SIGPIPE, 141):
    ferretdb.sh's version check failed so about one first run in three. lib.sh's helpers read to the end."""
    offenders = [
        f"{path.name}:{number}: {line.strip()}"
        for path in SHELL_SCRIPTS
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if not line.lstrip().startswith("#") and EARLY_EXIT_READER.search(line)
    ]
    assert offenders == []


def lib_sh(script: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """Run SCRIPT in bash after sourcing lib.sh (which sets -euo pipefail), with its dirs under tmp_path."""
    return subprocess.run(
        ["bash", "-c", f'source "{LOCAL_DIR / "lib.sh"}"\n{script}'],
        capture_output=True,
        text=True,
        env={**os.environ, "JOBSCHED_CACHE": str(tmp_path / "cache")},
        timeout=30,
        check=False,
    )


def test_output_checks_hold_when_the_command_writes_on_after_the_match(tmp_path: Path) -> None:
    # The version line first, then far more than a pipe holds: a reader that quits at the match kills the writer.
    chatty = tmp_path / "chatty"
    chatty.write_text("#!/bin/sh\necho 'version: v2.7.0'\nseq 1 300000\n")
    chatty.chmod(0o755)
    result = lib_sh(
        f'output_has "version: v2.7.0" "{chatty}" --version && echo found\n'
        f'output_has "version: v2.8.0" "{chatty}" --version || echo absent\n'
        f'echo "first: $("{chatty}" | first_lines 1)"\n'
        f"cmdline_has $$ bash && echo self\n"
        f"cmdline_has 999999999 bash || echo gone\n",
        tmp_path,
    )
    assert (result.returncode, result.stdout.split("\n")) == (
        0,
        ["found", "absent", "first: version: v2.7.0", "self", "gone", ""],
    ), result.stderr
