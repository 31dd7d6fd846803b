"""`jobsched credentials set|list|delete`: a tenant's named credentials for its http jobs (docs/http-jobs.md).

    printf %s "$BILLING_TOKEN" | jobsched credentials set billing-token     # the value from stdin
    jobsched credentials set billing-token                                   # ... or typed at a prompt, unechoed
    jobsched credentials list
    jobsched credentials delete billing-token

The value is never an argument: a command line is kept in the shell's history and shown to every user of the
machine (ps). From a pipe or a file, one trailing line break is dropped (`echo` adds one).
"""

from __future__ import annotations

import argparse
import getpass
import sys
from collections.abc import Callable
from typing import TextIO

from jobsched.client import Client, Credential
from jobsched.commands.render import as_json, cell, table

COLUMNS = ("name", "tenantId", "createdAt", "updatedAt")


class NoValue(Exception):
    """No value was given (an empty stdin, a prompt answered with nothing, two answers that differ)."""


def add_commands(groups: argparse._SubParsersAction[argparse.ArgumentParser], after: argparse.ArgumentParser) -> None:
    """The `credentials` group, beside jobs, dlq and schedules (parser.py)."""
    group = groups.add_parser("credentials", help="set, list and delete the credentials http jobs' headers name")
    commands = group.add_subparsers(dest="command", required=True)
    commands.add_parser(
        "set", parents=[after], help="make a credential or replace its value: the value from stdin, or a prompt"
    ).add_argument("name")
    commands.add_parser("list", parents=[after], help="the tenant's credentials: names and times, never values")
    commands.add_parser("delete", parents=[after], help="delete a credential").add_argument("name")


def credentials_set(client: Client, args: argparse.Namespace) -> str:
    made = client.set_credential(args.name, read_value(sys.stdin))
    return _shown([made], args.output)


def credentials_list(client: Client, args: argparse.Namespace) -> str:
    return _shown(client.credentials(), args.output)


def credentials_delete(client: Client, args: argparse.Namespace) -> str:
    client.delete_credential(args.name)
    return as_json({"name": args.name, "deleted": True}) if args.output == "json" else f"deleted: {args.name}"


def read_value(stdin: TextIO, prompt: Callable[[str], str] = getpass.getpass) -> str:
    """The value piped in, or typed twice at a prompt that does not echo it."""
    if not stdin.isatty():
        text = stdin.read()
        value = text[:-2] if text.endswith("\r\n") else text.removesuffix("\n")
    else:
        value = prompt("value: ")
        if value and prompt("again: ") != value:
            raise NoValue("the two values typed differ; nothing was set")
    if not value:
        raise NoValue("no value given (pipe it in, or type it at the prompt); nothing was set")
    return value


def _shown(credentials: list[Credential], output: str) -> str:
    rows = [[c.name, c.tenant_id, c.created_at, c.updated_at] for c in credentials]
    if output == "json":  # as the API answers: its field names, times in RFC 3339
        return as_json([dict(zip(COLUMNS, [cell(value) for value in row], strict=True)) for row in rows])
    return table(COLUMNS, rows)


COMMANDS: dict[tuple[str, str], Callable[[Client, argparse.Namespace], str]] = {
    ("credentials", "set"): credentials_set,
    ("credentials", "list"): credentials_list,
    ("credentials", "delete"): credentials_delete,
}
