"""The `jobsched` command: `jobsched <command> [args]` runs one command's entry point (`module:function`)."""

from __future__ import annotations

import importlib
import sys

SERVICES = {
    "standalone": "services.embedded.commands:standalone_main",
    "dev": "services.embedded.commands:dev_main",
    "backup": "services.embedded.backup:backup_main",
    "restore": "services.embedded.backup:restore_main",
    "api": "services.api.__main__:main",
    "scheduler": "services.scheduler.__main__:main",
    "executor": "services.executor.__main__:main",
    "reaper": "services.reaper.__main__:main",
    "keys": "services.keys_cli:main",
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
}
HELP = "\n".join(
    [
        "usage: jobsched COMMAND [options]    (jobsched COMMAND --help for a command's options)",
        "",
        "commands:",
        *(f"  {name:<10} {summary}" for name, summary in SUMMARIES.items()),
        "",
        "Settings come from environment variables (docs/configuration.md).",
    ]
)


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] in ("-h", "--help", "help"):
        print(HELP)
        raise SystemExit(0)
    if not args or args[0] not in SERVICES:
        given = f"unknown command {args[0]!r}; " if args else ""
        print(f"jobsched: {given}one of: {', '.join(SERVICES)} (see jobsched --help)", file=sys.stderr)
        raise SystemExit(2)
    sys.argv = [f"jobsched {args[0]}", *args[1:]]
    module, function = SERVICES[args[0]].split(":")
    getattr(importlib.import_module(module), function)()


if __name__ == "__main__":
    main()
