"""The server run from Python, which needs the server's drivers (the wheel with its `server` extra):

    from jobsched.server import Embedded

    with Embedded("/var/lib/myapp/jobs.db", handlers=jobs, port=0) as node:   # port 0: any free port
        ... jobsched.Client(node.url) ...

`Embedded` runs the whole product (API, scheduler, executors, reaper) in this process on one SQLite file
(docs/operations.md, "Inside your application"); `main` is the `jobsched` command.
"""

from __future__ import annotations

# jobsched's own packages: one of them missing is a defect of the install, anything else a missing driver.
OWN_PACKAGES = frozenset({"jobsched", "services", "shared", "seed"})

try:
    from services.cli import main
    from services.embedded.node import DatabaseInUse, Embedded
    from shared.config import ConfigError, Settings
except ModuleNotFoundError as missing:
    if (missing.name or "").partition(".")[0] in OWN_PACKAGES:
        raise  # a defect of the install (an import the wheel's build did not rewrite), shown as it is
    raise ModuleNotFoundError(
        f"jobsched.server needs the server's drivers ({missing.name} is not installed): "
        'install jobsched with its server extra, pip install "jobsched-<version>-py3-none-any.whl[server]"',
        name=missing.name,
    ) from missing

__all__ = ["ConfigError", "DatabaseInUse", "Embedded", "Settings", "main"]
