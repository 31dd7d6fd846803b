"""`jobsched batches list|get|members|seal`: batches with callbacks (docs/workflows.md#batches-with-callbacks),
their progress and members, and sealing one whose members were all added.

    jobsched batches list
    jobsched batches get 6650f0c2a1b2c3d4e5f60718
    jobsched batches members 6650f0c2a1b2c3d4e5f60718 --status dlq
    jobsched batches seal 6650f0c2a1b2c3d4e5f60718
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from jobsched.client import Batch, Client
from jobsched.commands.render import as_json, fields, table

COLUMNS = ("id", "tenantId", "name", "status", "total", "counts", "createdAt", "firedAt")


def add_commands(
    groups: argparse._SubParsersAction[argparse.ArgumentParser], after: argparse.ArgumentParser, epilog: str
) -> None:
    """The `batches` group, beside jobs and workflows (parser.py, whose `epilog` it shows)."""
    group = groups.add_parser("batches", help="list and show batches and their members, and seal one", epilog=epilog)
    commands = group.add_subparsers(dest="command", required=True)
    listing = commands.add_parser("list", parents=[after], help="the newest batches, with their progress")
    listing.add_argument("--limit", type=int, default=20, help="how many (default 20)")
    listing.add_argument("--before", metavar="BATCH_ID", help="older than this one (the last of a previous page)")
    commands.add_parser("get", parents=[after], help="a batch, its progress and its callbacks").add_argument("batch_id")
    members = commands.add_parser("members", parents=[after], help="a batch's members and their statuses")
    members.add_argument("batch_id")
    members.add_argument("--status", help="only the members in this status (dlq: which failed)")
    members.add_argument("--limit", type=int, default=100, help="how many (default 100, at most 1000)")
    members.add_argument("--after", metavar="CURSOR", help="the page after the one that printed this cursor")
    commands.add_parser(
        "seal", parents=[after], help="no more members: the callbacks fire once every member has ended"
    ).add_argument("batch_id")


def batches_list(client: Client, args: argparse.Namespace) -> str:
    listed = client.batches(limit=args.limit, before=args.before)
    if args.output == "json":
        return as_json([b.raw for b in listed])
    return table(COLUMNS, (_row(b) for b in listed))


def batches_get(client: Client, args: argparse.Namespace) -> str:
    return _shown(client.get_batch(args.batch_id), args.output)


def batches_members(client: Client, args: argparse.Namespace) -> str:
    page = client.batch_members(args.batch_id, status=args.status, limit=args.limit, after=args.after)
    if args.output == "json":
        return as_json(page.raw)
    listed = table(("jobId", "status"), ([job_id, status] for job_id, status in page.members.items()))
    return listed if page.next is None else f"{listed}\nmore: --after {page.next}"


def batches_seal(client: Client, args: argparse.Namespace) -> str:
    return _shown(client.seal_batch(args.batch_id), args.output)


def _shown(batch: Batch, output: str) -> str:
    if output == "json":
        return as_json(batch.raw)
    shown = [*zip(COLUMNS, _row(batch), strict=True), ("idempotencyKey", batch.idempotency_key)]
    callbacks = [("onComplete", batch.on_complete), ("onSuccess", batch.on_success)]
    return fields([*shown, ("sealed", batch.sealed), *callbacks])


def _row(batch: Batch) -> list[Any]:
    counts = ",".join(f"{status}:{n}" for status, n in batch.counts.items() if n)
    return [batch.id, batch.tenant_id, batch.name, batch.status, batch.total, counts, batch.created_at, batch.fired_at]


COMMANDS: dict[tuple[str, str], Callable[[Client, argparse.Namespace], str]] = {
    ("batches", "list"): batches_list,
    ("batches", "get"): batches_get,
    ("batches", "members"): batches_members,
    ("batches", "seal"): batches_seal,
}
