"""`jobsched keys`: create, list and revoke API keys straight in the store (no API, no key needed).

    jobsched keys create --tenant T --role reader|writer|admin [--name N]   prints the key, and only it, on stdout
    jobsched keys list [--tenant T]                  prefix, tenant, role, name, created, last used, revoked
    jobsched keys revoke PREFIX                      every API replica refuses the key within AUTH_REFRESH
    jobsched keys generate                           a new key, stored nowhere (for AUTH_BOOTSTRAP_KEY)

The store is MongoDB (MONGO_URI, MONGO_DB), the embedded store's file with --sqlite PATH, or any store's URL
with --store URL (sqlite:///path, mongodb://...). Creation and
revocation are logged (JSON on stderr) with the tenant and the key's prefix, never the key.
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime

from jobsched.commands.render import table
from shared.backends import tool_backend
from shared.config import Settings
from shared.keys import tokens
from shared.keys.base import KeyStore, Role
from shared.keys.manage import issue_key, revoke_key
from shared.logging import configure_logging
from shared.model import format_time
from shared.store.base import StoreUnavailable

COLUMNS = ("prefix", "tenantId", "role", "name", "createdAt", "lastUsedAt", "revokedAt")


def parser() -> argparse.ArgumentParser:
    sqlite_help = "the embedded store's database file instead of MongoDB"
    store_help = "the store's URL (sqlite:///path or mongodb://...) instead of MONGO_URI"
    parsed = argparse.ArgumentParser(
        prog="jobsched keys", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parsed.add_argument("--sqlite", metavar="PATH", help=sqlite_help)
    parsed.add_argument("--store", metavar="URL", help=store_help)
    # Also accepted after the command (`jobsched keys list --sqlite PATH`); SUPPRESS keeps one given before it.
    store = argparse.ArgumentParser(add_help=False)
    store.add_argument("--sqlite", metavar="PATH", default=argparse.SUPPRESS, help=sqlite_help)
    store.add_argument("--store", metavar="URL", default=argparse.SUPPRESS, help=store_help)
    commands = parsed.add_subparsers(dest="command", required=True)
    create = commands.add_parser("create", parents=[store], help="create a key and print it (shown once)")
    create.add_argument("--tenant", required=True)
    create.add_argument("--role", required=True, choices=[r.value for r in Role])
    create.add_argument("--name", help="what the key is for")
    listing = commands.add_parser("list", parents=[store], help="list keys, revoked ones included")
    listing.add_argument("--tenant")
    revoke = commands.add_parser("revoke", parents=[store], help="revoke a key by its prefix")
    revoke.add_argument("prefix")
    commands.add_parser("generate", help="print a new key without storing it")
    return parsed


def open_keys(store_url: str | None, sqlite_file: str | None) -> KeyStore:
    return tool_backend(store_url, sqlite_file, Settings.from_env()).open_keys()


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    configure_logging("keys")
    if args.command == "generate":
        print(tokens.new_key()[0])
        return
    keys = open_keys(args.store, args.sqlite)
    try:
        keys.ensure_schema()
        run(keys, args)
    except StoreUnavailable as exc:
        raise SystemExit(f"jobsched keys: {exc}") from None
    finally:
        keys.close()


def run(keys: KeyStore, args: argparse.Namespace) -> None:
    if args.command == "create":
        key, _ = issue_key(keys, args.tenant, Role(args.role), args.name, by="cli")
        print(key)
    elif args.command == "list":
        print(table(COLUMNS, ([_cell(getattr(k, c)) for c in COLUMNS] for k in keys.list_keys(args.tenant))))
    elif revoke_key(keys, args.prefix, by="cli") is None:
        raise SystemExit(f"jobsched keys: no API key with prefix {args.prefix!r}")


def _cell(value: object) -> str:
    if value is None:
        return "-"
    return format_time(value) if isinstance(value, datetime) else str(value)


if __name__ == "__main__":
    main(sys.argv[1:])
