"""The `jobsched` command: `jobsched <command> [args]` runs one command's entry point (`module:function`,
the module relative to this package, so that it is found wherever the package is installed)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable

from jobsched.commands import is_operator_command
from jobsched.commands import main as operate

SERVICES = {
    "standalone": ".embedded.commands:standalone_main",
    "dev": ".embedded.commands:dev_main",
    "backup": ".embedded.backup:backup_main",
    "restore": ".embedded.backup:restore_main",
    "api": ".api.__main__:main",
    "scheduler": ".scheduler.__main__:main",
    "executor": ".executor.__main__:main",
    "reaper": ".reaper.__main__:main",
    "keys": ".keys_cli:main",
}
SUMMARIES = {
    "standalone": "the whole product as one service on a SQLite file (--db, an absolute path; API on 127.0.0.1:8080)",
    "dev": "the same for development, on ./jobsched.db",
    "backup": "copy a standalone or dev database file while it runs (SQLite's online backup)",
    "restore": "put a backup in place of a stopped standalone or dev database file",
    "api": "the HTTP API and console (distributed mode, MongoDB)",
    "scheduler": "claims due jobs and fires schedules; one leader at a time, elected through etcd",
    "executor": "runs the handlers of one job type (--type NAME)",
    "reaper": "returns jobs a crashed executor or scheduler left behind",
    "keys": "create, list and revoke API keys (AUTH=required)",
    "seed": "insert a realistic mix of demo jobs (--count N; --sqlite PATH for an embedded file)",
    "jobs": "list, show, cancel, retry and wait for jobs, through the API (--url, --api-key)",
    "dlq": "list the dead letters by error and send them back, through the API",
    "schedules": "list, show, pause, resume, trigger and backfill schedules, through the API",
    "workflows": "list, show and cancel workflows, through the API",
    "batches": "list and show batches with their progress, and seal one, through the API",
    "credentials": "set (the value from stdin), list and delete the credentials http jobs name, through the API",
}
HELP = "\n".join(
    [
        "usage: jobsched COMMAND [options]    (jobsched COMMAND --help for a command's options)",
        "",
        "commands:",
        *(f"  {name:<11} {summary}" for name, summary in SUMMARIES.items()),
        "",
        "Settings come from environment variables (docs/configuration.md).",
    ]
)


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] in ("-h", "--help", "help"):
        print(HELP)
        raise SystemExit(0)
    if is_operator_command(args):
        operate(args)
        return
    if not args or (args[0] not in SERVICES and args[0] not in OTHER_COMMANDS):
        given = f"unknown command {args[0]!r}; " if args else ""
        print(f"jobsched: {given}one of: {', '.join(SUMMARIES)} (see jobsched --help)", file=sys.stderr)
        raise SystemExit(2)
    sys.argv = [f"jobsched {args[0]}", *args[1:]]
    if args[0] in OTHER_COMMANDS:
        OTHER_COMMANDS[args[0]]()
        return
    module, function = SERVICES[args[0]].split(":")
    getattr(importlib.import_module(module, __package__), function)()


def run_seed() -> None:
    # Its own top-level package, not a service: imported by name, like any other import here.
    from seed.__main__ import main as seed_main

    seed_main()


OTHER_COMMANDS: dict[str, Callable[[], None]] = {"seed": run_seed}


if __name__ == "__main__":
    main()
