"""Installing jobsched as a user does: `make dist` (the wheel and the lock's runtime requirements) and fresh
virtual environments."""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.deployments.manifests import REPO_ROOT


def run(*command: str | Path, cwd: Path = REPO_ROOT, check: bool = True) -> str:
    """The command's output; with `check`, it must succeed. Without, its output and errors together."""
    done = subprocess.run([str(c) for c in command], capture_output=True, text=True, timeout=300, cwd=cwd)
    if not check:
        return done.stdout + done.stderr
    assert done.returncode == 0, f"{command}: {done.stderr[-2000:]}"
    return done.stdout


def uv() -> str:
    found = shutil.which("uv")
    assert found, "uv is installed by `make install`"
    return found


@dataclass(frozen=True)
class Dist:
    wheel: Path
    requirements: Path  # the lock's runtime requirements, the server extra's included


def build_dist(root: Path) -> Dist:
    run("make", "-s", "dist", f"DIST={root}")
    wheels = list(root.glob("jobsched-*.whl"))
    assert len(wheels) == 1
    return Dist(wheels[0], root / "requirements.txt")


def new_venv(root: Path) -> Path:
    """A fresh virtual environment of this Python at `root`; its python."""
    run(uv(), "venv", "-q", root, "--python", sys.executable)
    return root / "bin" / "python"
