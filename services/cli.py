"""The `jobsched` command: `jobsched <service> [args]` runs one service's entry point."""

from __future__ import annotations

import importlib
import sys

SERVICES = {
    "api": "services.api.__main__",
    "scheduler": "services.scheduler.__main__",
    "executor": "services.executor.__main__",
    "reaper": "services.reaper.__main__",
    "dev": "services.dev.__main__",
    "keys": "services.keys_cli",
}
SUMMARIES = {
    "dev": "the whole product in one process on a SQLite file (API and console on 127.0.0.1:8080)",
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
    importlib.import_module(SERVICES[args[0]]).main()


if __name__ == "__main__":
    main()
