"""The `jobsched` command: the server's, which a client-only install does not have."""

from __future__ import annotations

import sys


def main() -> None:
    try:
        from jobsched.server import main as server_main
    except ModuleNotFoundError as missing:
        print(f"jobsched: {missing}", file=sys.stderr)
        raise SystemExit(2) from None
    server_main()
