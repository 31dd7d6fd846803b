"""deployments/local/stack.sh, prometheus.sh and redis.sh without starting anything (tests/e2e/test_prometheus.py
runs the first two)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.deployments.manifests import LOCAL_DIR, REPO_ROOT

pytestmark = pytest.mark.unit

SCRIPTS = ("stack.sh", "prometheus.sh", "redis.sh")


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
