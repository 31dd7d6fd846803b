"""Finding a running local stack (`make up`, deployments/local/stack.sh) from the command-line tools.

`stack.sh up` writes the settings that point at it to `<stack dir>/env` (`export NAME=value` lines) and
`down` removes the file. A tool run without those settings in its environment takes them from there, so
`python -m seed` after `make up` seeds that stack. The stack directory is STACK_DIR, else
$JOBSCHED_RUN_DIR/stack, else $JOBSCHED_CACHE/run/stack (JOBSCHED_CACHE defaults to ~/.cache/jobsched): the
one place stack.sh itself puts it, so there is never more than one candidate.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

API_URL_VARIABLE = "JOBSCHED_API_URL"  # written by stack.sh beside the settings: where its API listens


def run_dir(environ: Mapping[str, str]) -> Path:
    """Where deployments/local/lib.sh keeps the local servers' state and logs (`<server>.log`)."""
    cache = Path(environ.get("JOBSCHED_CACHE") or Path.home() / ".cache" / "jobsched")
    return Path(environ.get("JOBSCHED_RUN_DIR") or cache / "run")


def env_file(environ: Mapping[str, str]) -> Path:
    if environ.get("STACK_DIR"):
        return Path(environ["STACK_DIR"]) / "env"
    return run_dir(environ) / "stack" / "env"


def read_env_file(path: Path) -> dict[str, str]:
    values: dict[str, str] = {}
    for line in path.read_text().splitlines():
        name, sep, value = line.removeprefix("export ").partition("=")
        if sep and name.strip() and not line.lstrip().startswith("#"):
            values[name.strip()] = value.strip().strip("'\"")
    return values


def tool_environment(tool: str, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment a tool runs with: its own, completed by the running local stack's settings (a variable
    set in the environment always wins). Says on stderr when the stack's file was used."""
    environ = dict(os.environ if environ is None else environ)
    path = env_file(environ)
    try:
        stack = read_env_file(path)
    except OSError:
        return environ
    added = {k: v for k, v in stack.items() if k not in environ}
    if added:
        print(f"{tool}: using the local stack's settings from {path} ({', '.join(sorted(added))})", file=sys.stderr)
    return {**stack, **environ}
