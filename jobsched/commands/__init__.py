"""`jobsched jobs|workflows|batches|dlq|schedules|credentials ...`: an operator's commands, sent to the API with
the client (so they work with a client-only install, against any deployment, and the API's authentication and tenant
rules apply).

    jobsched jobs list --status dlq --type send-invoice
    jobsched jobs wait 6650f0c2a1b2c3d4e5f60718 --timeout 30 && echo done
    jobsched workflows list --status failed
    jobsched dlq retry --error "HandlerError: card declined"
    jobsched schedules pause 6650f0c2a1b2c3d4e5f60718 --note "vendor maintenance"

Errors are one line on stderr; the exit status says what happened (see `jobsched jobs --help`).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from jobsched.client import (
    BadRequest,
    Client,
    Conflict,
    JobschedError,
    NotFound,
    PayloadTooLarge,
    Unauthorized,
    WaitTimeout,
)
from jobsched.commands.credentials import NoValue
from jobsched.commands.parser import parser
from jobsched.commands.run import NotSucceeded, run
from jobsched.commands.schedule_file import ScheduleFileError

GROUPS = frozenset({"jobs", "workflows", "batches", "dlq", "schedules", "credentials"})
_VALUED_OPTIONS = frozenset({"--url", "--api-key", "--tenant", "--output", "-o"})


def is_operator_command(args: Sequence[str]) -> bool:
    """Whether `jobsched ARGS` is one of these commands: its first word that is not an option (nor an option's
    value, `jobsched --output json jobs list`) names one of GROUPS."""
    words = iter(args)
    for word in words:
        if word in _VALUED_OPTIONS:
            next(words, None)
        elif not word.startswith("-"):
            return word in GROUPS
    return False


# Exit statuses (the parser's epilog says the same to users).
NOT_SUCCEEDED, BAD_ARGUMENTS, NOT_FOUND, REFUSED_KEY, REFUSED, UNREACHABLE, TIMED_OUT = 1, 2, 3, 4, 5, 6, 7
HTTP_TIMEOUT_S = 30.0


def main(argv: Sequence[str] | None = None) -> None:
    args = parser("jobsched").parse_args(sys.argv[1:] if argv is None else list(argv))
    try:
        with Client(args.url, args.api_key, tenant_id=args.tenant, timeout=HTTP_TIMEOUT_S) as client:
            print(run(client, args))
    except NotSucceeded as ended:
        print(ended.shown)
        print(f"jobsched: {ended}", file=sys.stderr)
        raise SystemExit(NOT_SUCCEEDED) from None
    except JobschedError as exc:
        print(f"jobsched {args.group} {args.command}: {exc}", file=sys.stderr)
        raise SystemExit(exit_status(exc)) from None
    except (ScheduleFileError, NoValue) as exc:
        print(f"jobsched {args.group} {args.command}: {exc}", file=sys.stderr)
        raise SystemExit(BAD_ARGUMENTS) from None


def exit_status(error: JobschedError) -> int:
    if isinstance(error, WaitTimeout):
        return TIMED_OUT
    if isinstance(error, NotFound):
        return NOT_FOUND
    if isinstance(error, Unauthorized):
        return REFUSED_KEY
    if isinstance(error, BadRequest | Conflict | PayloadTooLarge):
        return REFUSED
    return UNREACHABLE  # no answer (ConnectionFailed), 503 (a dependency down) or another 5xx
