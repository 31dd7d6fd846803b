"""Backup and restore of an embedded-mode database file (`jobsched backup`, `jobsched restore`).

A file copied while jobsched writes it is not a backup: the copy can hold half a transaction, and what is
committed may still sit in the `-wal` file beside it. `backup` uses SQLite's online backup instead: one read
transaction copies a consistent snapshot of the database (write-ahead log included) while the service goes
on writing (in WAL mode readers and the writer do not wait for each other). The copy is written beside its
destination, checked, synced and then renamed into place, readable by its owner only.

`restore` puts a backup in place of a database that no process runs on (it takes the same lock file a
running process holds, and keeps it until done). The backup is checked first; the database it replaces is
moved to `<db>.before-restore` together with its `-wal` and `-shm` files (SQLite would otherwise apply the old
log to the restored file), so a restore can be undone.

A restore undoes everything done after the backup: `restore` says how much, from the restored file and the one it
replaced (`Undone`), so that no one learns it from jobs running a second time.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from services.embedded.commands import DB_VARIABLE, service_database
from services.embedded.node import DatabaseInUse, lock_database
from shared.cli import OneLineParser, one_line_errors
from shared.model import TERMINAL
from shared.store.sqlite.database import create_private

SET_ASIDE = ".before-restore"


class BackupError(Exception):
    """The source or the destination cannot be used; the message says which and why."""


@dataclass(frozen=True)
class Copied:
    path: Path
    jobs: int
    bytes: int


@dataclass(frozen=True)
class Undone:
    """What putting a backup in place undoes. `to_run`: the backup's jobs that had not finished when it was taken
    (pending, or caught running: those are retried), each runs when due. `finished_since`: how many of them had
    finished in the database it replaced: their work will be done again. `created_since`: jobs of the replaced
    database the backup does not have: gone. The last two are None when there was no database to compare with,
    or it could not be read."""

    to_run: int
    finished_since: int | None
    created_since: int | None

    def describe(self) -> str:
        said = f"{_jobs(self.to_run, 'unfinished job is', 'unfinished jobs are')} pending again and run when due"
        if self.finished_since is None or self.created_since is None:
            return f"{said} (the replaced database could not be compared)"
        return (
            f"{said}; {self.finished_since} of them had finished since the backup and will run again;"
            f" {_jobs(self.created_since, 'job created since the backup is', 'jobs created since the backup are')} gone"
        )


def _jobs(count: int, one: str, many: str) -> str:
    return f"{count} {one if count == 1 else many}"


@dataclass(frozen=True)
class Restored:
    copied: Copied
    undone: Undone


def backup(database: Path, destination: Path, *, replace: bool = False) -> Copied:
    """A consistent copy of `database` at `destination`, taken while other processes may write it."""
    if not database.is_file():
        raise BackupError(f"{database} does not exist")
    if destination.resolve() == database.resolve():
        raise BackupError(f"{destination} is the database itself")
    if destination.exists() and not replace:
        raise BackupError(f"{destination} exists (give --replace to overwrite it)")
    return _copy(database, destination)


def restore(backup_file: Path, database: Path) -> Restored:
    """Put `backup_file` in place of `database`, which no process may be running on; what that undoes."""
    if not backup_file.is_file():
        raise BackupError(f"{backup_file} does not exist")
    if backup_file.resolve() == database.resolve():
        raise BackupError(f"{backup_file} is the database itself")
    with contextlib.closing(_read_only(backup_file)) as check:
        _checked(check, backup_file)  # before anything is touched
    database.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.closing(lock_database(database)):
        replaced = database.exists()
        copied = _copy(backup_file, database, before_rename=lambda: _set_aside(database))
        aside = database.with_name(f"{database.name}{SET_ASIDE}")
        return Restored(copied, _undone(database, aside if replaced else None))


_FINAL = ", ".join(f"'{s.value}'" for s in TERMINAL)


def _unfinished_run(table: str) -> str:
    return f"{table}.kind != 'template' AND {table}.status NOT IN ({_FINAL})"


def _undone(restored: Path, replaced: Path | None) -> Undone:
    """Counted in the restored file, and against the replaced one (read only) where there is one to read."""
    with contextlib.closing(sqlite3.connect(f"{restored.as_uri()}?mode=ro", uri=True)) as db:
        to_run = int(db.execute(f"SELECT count(*) FROM jobs WHERE {_unfinished_run('jobs')}").fetchone()[0])
        if replaced is None:
            return Undone(to_run, None, None)
        try:
            db.execute("ATTACH DATABASE ? AS replaced", (f"{replaced.as_uri()}?mode=ro",))
            finished = db.execute(
                f"SELECT count(*) FROM main.jobs b JOIN replaced.jobs r ON r.id = b.id WHERE {_unfinished_run('b')}"
                f" AND r.status IN ({_FINAL})"
            ).fetchone()[0]
            created = db.execute(
                "SELECT count(*) FROM replaced.jobs r WHERE NOT EXISTS (SELECT 1 FROM main.jobs b WHERE b.id = r.id)"
            ).fetchone()[0]
        except sqlite3.DatabaseError:  # the replaced database may be why there is a restore: damaged
            return Undone(to_run, None, None)
        return Undone(to_run, int(finished), int(created))


def _copy(source: Path, destination: Path, before_rename: Callable[[], None] = lambda: None) -> Copied:
    with _beside(destination) as partial:
        # Read-only: a backup never creates, changes or checkpoints the database it copies.
        with contextlib.closing(_read_only(source)) as reader, contextlib.closing(sqlite3.connect(partial)) as writer:
            reader.backup(writer)  # all pages in one step: one read transaction, one snapshot
            # One self-contained file (no -wal beside it); jobsched turns write-ahead logging back on at start.
            writer.execute("PRAGMA journal_mode=DELETE")
            jobs = _checked(writer, partial)
        _sync(partial)
        before_rename()
        partial.replace(destination)
    _sync(destination.parent)  # the rename survives a crash only once the directory's entry is on disk too
    return Copied(destination, jobs, destination.stat().st_size)


def _read_only(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)


def _set_aside(database: Path) -> None:
    """Move the database being replaced to `<db>.before-restore`, with its write-ahead log and shared memory
    (SQLite would apply the old log to the restored file; under the new name it stays the old database's,
    readable as it was even if damaged). An earlier set-aside database is replaced."""
    aside = database.with_name(f"{database.name}{SET_ASIDE}")
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(f"{aside}{suffix}")
        with contextlib.suppress(FileNotFoundError):
            os.rename(f"{database}{suffix}", f"{aside}{suffix}")


def _checked(connection: sqlite3.Connection, path: Path) -> int:
    """The number of jobs in a sound jobsched database; BackupError otherwise."""
    try:
        result = connection.execute("PRAGMA quick_check").fetchone()[0]
        if result != "ok":
            raise BackupError(f"{path} is damaged: {result}")
        return int(connection.execute("SELECT count(*) FROM jobs").fetchone()[0])
    except sqlite3.DatabaseError as exc:
        raise BackupError(f"{path} is not a jobsched database ({exc})") from None


@contextlib.contextmanager
def _beside(destination: Path) -> Iterator[Path]:
    """A new private file next to `destination` (same file system: the rename is atomic), removed on failure."""
    partial = destination.with_name(f".{destination.name}.partial-{os.getpid()}")
    with contextlib.suppress(FileNotFoundError):
        partial.unlink()
    create_private(str(partial))
    if not partial.exists():
        raise BackupError(f"cannot create a file in {destination.parent}")
    try:
        yield partial
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            partial.unlink()
        raise


def _sync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _database_argument(parser: OneLineParser) -> None:
    parser.add_argument(
        "--db",
        default=None,
        help=f"the database file, an absolute path (or {DB_VARIABLE}; default as for jobsched standalone)",
    )


@one_line_errors("jobsched backup", BackupError, DatabaseInUse)
def backup_main() -> None:
    parser = OneLineParser(prog="jobsched backup", description="Copy a running jobsched database file.")
    parser.add_argument("destination", help="the backup file to write")
    parser.add_argument("--replace", action="store_true", help="overwrite the destination if it exists")
    _database_argument(parser)
    args = parser.parse_args()
    copied = backup(service_database(args.db, os.environ), Path(args.destination).resolve(), replace=args.replace)
    print(f"jobsched backup: {copied.path}: {copied.jobs} jobs, {copied.bytes} bytes")


@one_line_errors("jobsched restore", BackupError, DatabaseInUse)
def restore_main() -> None:
    parser = OneLineParser(
        prog="jobsched restore", description="Put a backup in place of a database file no process runs on."
    )
    parser.add_argument("backup", help="the backup file (made by jobsched backup)")
    _database_argument(parser)
    args = parser.parse_args()
    database = service_database(args.db, os.environ)
    restored = restore(Path(args.backup).resolve(), database)
    print(
        f"jobsched restore: {restored.copied.path}: {restored.copied.jobs} jobs from {args.backup}"
        f" (the database it replaced, if any, is now {database}{SET_ASIDE})"
    )
    print(f"jobsched restore: everything done after the backup is undone: {restored.undone.describe()}")
