"""The operator commands' arguments. The connection options (--url, --api-key, --tenant, --output) are accepted
before the command or after it, and default to JOBSCHED_URL, JOBSCHED_API_KEY and JOBSCHED_TENANT."""

from __future__ import annotations

import argparse
import os

from jobsched.commands.batches import add_commands as add_batch_commands
from jobsched.commands.credentials import add_commands as add_credential_commands

DEFAULT_URL = "http://127.0.0.1:8080"
STATUSES = ("waiting", "pending", "buffered", "queued", "claimed", "running", "completed", "dlq", "cancelled")
WORKFLOW_STATUSES = ("creating", "running", "succeeded", "failed", "cancelled", "expired")
WORKFLOW_SCAN = 5000  # `workflows list --status` reads at most this many to find its matches
OUTPUTS = ("table", "json")

EPILOG = """exit status: 0 done; 1 the job did not succeed (wait: it ended dlq or cancelled) or a re-drive was
refused; 2 bad arguments; 3 no such job; 4 the key is missing, unknown or lacks the role; 5 the API refused the
request (400, 409, 413); 6 the API is unreachable or unavailable; 7 wait timed out."""


def _connection(defaults: bool) -> argparse.ArgumentParser:
    """The connection options; without `defaults` (after the command), an option not given keeps the one given
    before the command (SUPPRESS)."""
    keep = argparse.SUPPRESS
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument(
        "--url",
        default=os.environ.get("JOBSCHED_URL", DEFAULT_URL) if defaults else keep,
        help=f"the API's base URL (JOBSCHED_URL; default {DEFAULT_URL})",
    )
    options.add_argument(
        "--api-key",
        default=os.environ.get("JOBSCHED_API_KEY") or None if defaults else keep,
        help="an API key (JOBSCHED_API_KEY); needed where the API runs with AUTH=required",
    )
    options.add_argument(
        "--tenant",
        default=os.environ.get("JOBSCHED_TENANT") or None if defaults else keep,
        help="the tenant (JOBSCHED_TENANT); with AUTH=required, the key's tenant unless it is an admin's",
    )
    options.add_argument(
        "--output", "-o", choices=OUTPUTS, default="table" if defaults else keep, help="table (default) or json"
    )
    return options


def parser(program: str) -> argparse.ArgumentParser:
    after = _connection(defaults=False)
    top = argparse.ArgumentParser(
        prog=program,
        parents=[_connection(defaults=True)],
        description="Operate jobs, workflows, batches, the DLQ, schedules and credentials through the API (any "
        "deployment; the API's auth applies).",
        epilog=EPILOG,
    )
    groups = top.add_subparsers(
        dest="group", required=True, metavar="{jobs,workflows,batches,dlq,schedules,credentials}"
    )

    jobs = groups.add_parser("jobs", help="list, show, cancel, retry and wait for jobs", epilog=EPILOG).add_subparsers(
        dest="command", required=True
    )
    listing = jobs.add_parser("list", parents=[after], help="the newest jobs, narrowed by status, type or kind")
    listing.add_argument("--status", choices=STATUSES)
    listing.add_argument("--type", dest="job_type", help="one job type")
    listing.add_argument("--kind", choices=("run", "template"), help="one-off jobs and runs, or templates")
    listing.add_argument("--limit", type=int, default=20, help="how many (default 20, at most 5000)")
    attempts = jobs.add_parser("attempts", parents=[after], help="a job's attempts, with their errors")
    attempts.add_argument("job_id")
    attempts.add_argument(
        "--traceback", action="store_true", help="each attempt's traceback below it (where its handler raised)"
    )
    for name, text in (
        ("get", "a job"),
        ("cancel", "cancel a job (a running one is asked to stop)"),
        ("retry", "send a dead-lettered job back to pending"),
    ):
        jobs.add_parser(name, parents=[after], help=text).add_argument("job_id")
    wait = jobs.add_parser("wait", parents=[after], help="wait until a job has ended (exit 0 if it completed)")
    wait.add_argument("job_id")
    wait.add_argument("--timeout", type=float, default=60.0, help="seconds (default 60)")

    _add_workflows(groups, after)
    add_batch_commands(groups, after, EPILOG)

    dlq = groups.add_parser("dlq", help="the dead letters, and sending them back", epilog=EPILOG).add_subparsers(
        dest="command", required=True
    )
    dlq.add_parser("list", parents=[after], help="dead letters grouped by their last error")
    redrive = dlq.add_parser("retry", parents=[after], help="send dead letters back to pending")
    chosen = redrive.add_mutually_exclusive_group(required=True)
    chosen.add_argument("job_ids", nargs="*", default=[], metavar="JOB_ID", help="these jobs")
    chosen.add_argument("--error", help="every dead letter (of the tenant) whose last error is this text")

    schedules = groups.add_parser(
        "schedules", help="list, show, pause, resume, trigger and backfill schedules", epilog=EPILOG
    )
    schedule = schedules.add_subparsers(dest="command", required=True)
    listed = schedule.add_parser("list", parents=[after], help="the schedules (templates), newest first")
    listed.add_argument("--type", dest="job_type", help="one job type")
    listed.add_argument("--limit", type=int, default=100, help="how many (default 100, at most 5000)")
    shown = schedule.add_parser("get", parents=[after], help="a schedule and its next fire times")
    shown.add_argument("job_id")
    shown.add_argument("--next", type=int, default=5, help="how many upcoming fire times (default 5)")
    runs = schedule.add_parser("runs", parents=[after], help="a schedule's runs, newest first")
    runs.add_argument("job_id")
    runs.add_argument("--limit", type=int, default=20, help="how many (default 20)")
    pause = schedule.add_parser("pause", parents=[after], help="stop a schedule firing until it is resumed")
    pause.add_argument("job_id")
    pause.add_argument("--note", help="why (shown with the schedule)")
    schedule.add_parser("resume", parents=[after], help="let a paused schedule fire again").add_argument("job_id")
    trigger = schedule.add_parser("trigger", parents=[after], help="one run now")
    trigger.add_argument("job_id")
    trigger.add_argument("--key", help="an idempotency key: the same key again gives the same run")
    apply = schedule.add_parser(
        "apply", parents=[after], help="make the tenant's schedules what a TOML file declares (prints the diff)"
    )
    apply.add_argument("file", help="the schedules file ([[schedule]] tables; see docs/cli.md)")
    apply.add_argument("--dry-run", action="store_true", help="only print what applying would change")
    apply.add_argument(
        "--removed",
        choices=("keep", "pause", "cancel"),
        default="keep",
        help="a schedule applied from a file before and not in this one: keep it (default), pause or cancel it",
    )
    backfill = schedule.add_parser("backfill", parents=[after], help="a run for each fire time in [start, end)")
    backfill.add_argument("job_id")
    backfill.add_argument("--start", required=True, help="RFC 3339, e.g. 2026-12-01T00:00:00Z")
    backfill.add_argument("--end", required=True, help="RFC 3339, after --start")
    add_credential_commands(groups, after)
    return top


def _add_workflows(groups: argparse._SubParsersAction[argparse.ArgumentParser], after: argparse.ArgumentParser) -> None:
    """`jobsched workflows list|get|cancel`, as `jobsched jobs` has them."""
    workflows = groups.add_parser("workflows", help="list, show and cancel workflows", epilog=EPILOG).add_subparsers(
        dest="command", required=True
    )
    listing = workflows.add_parser("list", parents=[after], help="the newest workflows (without their steps)")
    listing.add_argument(
        "--status",
        choices=WORKFLOW_STATUSES,
        help=f"only this status, among the newest {WORKFLOW_SCAN} (the API has no such filter: done here)",
    )
    listing.add_argument("--limit", type=int, default=20, help="how many (default 20)")
    listing.add_argument("--before", metavar="WORKFLOW_ID", help="older than this one (the last of a previous page)")
    for name, text in (
        ("get", "a workflow and its steps"),
        ("cancel", "cancel every unfinished step of a workflow (a running one is asked to stop)"),
    ):
        workflows.add_parser(name, parents=[after], help=text).add_argument("workflow_id")
