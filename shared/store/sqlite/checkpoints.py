"""Checkpoints of the write-ahead log on a thread of their own, not in the writers' commits.

SQLite checkpoints the WAL (copies its pages into the database file, and syncs the file) inside the COMMIT that
takes it past `wal_autocheckpoint` pages: on the writer's connection, with the write lock held, so every other
writer of the process waits for it. A drain of 20,000 jobs spent some 8 % of its time there. Here a thread
copies the WAL every CHECKPOINT_EVERY_COMMITS commits while writers go on (SqliteDatabase._checkpoint), and the
next commit copies the little written meanwhile, under the write lock it holds, so that the WAL is all copied and
starts over. The writers' own threshold stays as a backstop at WRITER_CHECKPOINT_PAGES, for when this thread
falls behind, cannot be started, or another process writes to the file. Checkpoints do not change what a commit
makes durable: a synced commit is synced in the WAL before it returns, checkpoint or not (and SQLite syncs the WAL
before it copies any of it, unsynced commits included).
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable
from typing import Final

log = logging.getLogger("jobsched.store")

CHECKPOINT_EVERY_COMMITS: Final = 32
WRITER_CHECKPOINT_PAGES: Final = 10_000  # 40 MB of 4-KiB pages; SQLite's default is 1,000


class Checkpointer:
    """Runs the checkpoint on its own thread once every CHECKPOINT_EVERY_COMMITS `committed()` calls. The thread
    is started by the first one due, so a store that never writes much never starts it. `checkpoint()` returns
    the function to run, or None once its owner is gone (a weak reference): the thread then ends."""

    def __init__(self, checkpoint: Callable[[], Callable[[], None] | None]) -> None:
        self._checkpoint = checkpoint
        self._commits = 0
        self._due = threading.Event()
        self._closed = False
        self._copied = False  # the thread has copied the WAL's bulk: the next commit completes the checkpoint
        self._thread: threading.Thread | None = None

    def committed(self, conn: sqlite3.Connection) -> None:
        """A write transaction has committed on `conn` (called under the write lock, so the count needs no lock
        of its own). If the thread has copied the WAL's bulk since the last commit, the few commits written
        meanwhile are copied here, where no writer can outrun the checkpoint (a thread that waited for the write
        lock could wait for ever behind a writer that takes it again at once): the WAL is then all copied, and
        the next writer starts it over. Never raises: the commit has been made whatever happens here."""
        if self._copied:
            self._copied = False
            try:
                conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
            except Exception as exc:  # the next checkpoint may complete; the writers' backstop meanwhile
                log.warning("WAL checkpoint failed", extra={"action": "checkpoint_failed", "error": str(exc)})
        self._commits += 1
        if self._commits % CHECKPOINT_EVERY_COMMITS or self._closed:
            return
        if self._thread is None:
            thread = threading.Thread(target=self._run, daemon=True, name="sqlite-checkpoints")
            try:
                thread.start()
            except RuntimeError as exc:  # no thread now: the writers' backstop checkpoints; tried again later
                log.warning("WAL checkpoints stay in commits", extra={"action": "checkpoint_thread", "error": str(exc)})
                return
            self._thread = thread
        self._due.set()

    def close(self) -> None:
        """Stop the thread, after the checkpoint it is running (if any)."""
        self._closed = True
        self._due.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()

    def _run(self) -> None:
        while True:
            self._due.wait()
            self._due.clear()
            checkpoint = self._checkpoint()
            if self._closed or checkpoint is None:
                return
            try:
                checkpoint()
                self._copied = True
            except Exception as exc:  # the writers' backstop checkpoints meanwhile; the next one may succeed
                log.warning("WAL checkpoint failed", extra={"action": "checkpoint_failed", "error": str(exc)})
            del checkpoint  # holds the database only while it runs
