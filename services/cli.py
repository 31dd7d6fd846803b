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


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] not in SERVICES:
        print(f"usage: jobsched {{{','.join(SERVICES)}}} [options]", file=sys.stderr)
        raise SystemExit(2)
    sys.argv = [f"jobsched {args[0]}", *args[1:]]
    importlib.import_module(SERVICES[args[0]]).main()


if __name__ == "__main__":
    main()
