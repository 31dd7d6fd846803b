"""The `jobsched` command. The operator's commands (jobs, dlq, schedules) only talk to the API and work with a
client-only install; every other command is the server's."""

from __future__ import annotations

import sys


def main() -> None:
    from jobsched.commands import GROUPS, is_operator_command
    from jobsched.commands import main as operate

    if is_operator_command(sys.argv[1:]):
        operate(sys.argv[1:])
        return
    try:
        from jobsched.server import main as server_main
    except ModuleNotFoundError as missing:
        print(f"jobsched: {missing} (the commands {', '.join(sorted(GROUPS))} work without it)", file=sys.stderr)
        raise SystemExit(2) from None
    server_main()
