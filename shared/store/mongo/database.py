"""A MongoDB database as one object: the client, the database's name, and its collections by what they hold.

Every part kept in the database (the job store, the console's reader, job types, API keys, signing secrets,
credentials) takes a MongoDatabase and reads its collections from it: the job store's collections are named
attributes, the other parts name their own (`collection`). Nothing is asked of the server before the first call.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cached_property
from typing import Any, TypeVar

from pymongo import MongoClient
from pymongo.collection import Collection
from pymongo.errors import ConnectionFailure

from shared.config import without_password
from shared.store.base import StoreError, StoreUnavailable
from shared.store.mongo.minutes import MinuteCounters

Document = dict[str, Any]
T = TypeVar("T")
DUPLICATE_KEY = 11000
log = logging.getLogger("jobsched.store")


class MongoDatabase:
    def __init__(self, client: MongoClient[Document], name: str, *, described: str = "") -> None:
        """`described`: where the database is, for messages (its URL without a password, and the database)."""
        self.client = client  # the connections, shared by every part kept in this database
        self.name = name
        self.described = described or f"MongoDB database {name}"
        self._db = client[name]
        self.jobs: Collection[Document] = self._db["jobs"]
        # One event per failed attempt (failed, timed out, lost): {_id: "<jobId>:<n>", tenantId, jobType, outcome, at},
        # what the console's last hour counts; the server deletes them two hours on (a TTL index).
        self.failures: Collection[Document] = self._db["attempt_failures"]
        self.cancel_requests: Collection[Document] = self._db["cancel_requests"]
        # A rate-limited type's starts (claim_limits.py): {_id: jobType, claimTat, startTat} in unix seconds.
        self.rates: Collection[Document] = self._db["rate_limits"]
        # The same per concurrency key under a rate per key: {_id: key_rate_id(...), claimTat, startTat}.
        self.key_rates: Collection[Document] = self._db["key_rate_limits"]
        # The console's history (minutes.py): this process's counts, added to `job_minutes` about once a second.
        self.minutes = MinuteCounters(self._db["job_minutes"])

    @classmethod
    def connect(cls, uri: str, name: str, *, timeout_ms: int = 5000) -> MongoDatabase:
        """The database `name` at `uri`; nothing is asked of the server before the first call (so that a process
        starts while the database is down)."""
        client: MongoClient[Document] = MongoClient(
            uri,
            tz_aware=True,
            # Text that is not UTF-8 (written by other clients or older versions) reads as U+FFFD instead of
            # failing every read of its job.
            unicode_decode_error_handler="replace",
            serverSelectionTimeoutMS=timeout_ms,
            connectTimeoutMS=timeout_ms,
            socketTimeoutMS=max(timeout_ms * 6, 30_000),
        )
        return cls(client, name, described=f"{without_password(uri)} (database {name})")

    @cached_property
    def index_terms_by_path(self) -> bool:
        """Whether the server keeps an index's terms path by path, as DocumentDB's RUM indexes do under FerretDB 2:
        a read bounded on several fields of an index then walks the entries of every document that matches any one
        bound (a lane's read walks every due run of its type, whatever it returns), where MongoDB walks the one key
        range. The claim reads many lanes together there (claims.lanes). Asked of the server once, at first use
        (FerretDB names itself in buildInfo)."""
        with translate_errors():
            return "ferretdb" in self._db.command("buildInfo")

    def collection(self, name: str) -> Collection[Document]:
        """The collection `name`: for the parts that keep their own (job types, keys, secrets, credentials)."""
        return self._db[name]

    def ping(self) -> None:
        with translate_errors():
            self._db.command("ping")

    def close(self) -> None:
        self.minutes.close()
        self.client.close()


@contextmanager
def translate_errors() -> Iterator[None]:
    """Driver failures that mean "the database is not there" become StoreUnavailable (HTTP 503)."""
    try:
        yield
    except ConnectionFailure as exc:  # includes ServerSelectionTimeoutError and network timeouts
        raise StoreUnavailable(f"MongoDB unavailable: {exc}") from exc


def caught(step: Callable[..., T], *args: Any) -> T | StoreError:
    """A batch member's result, or the store error it ended with (the batch's other members go on)."""
    try:
        return step(*args)
    except StoreError as exc:
        return exc
    except Exception as exc:  # a bug or an untranslated driver error: this member's, not the whole batch's
        log.exception("batch member failed", extra={"action": "store_batch_member_error"})
        return StoreError(f"{type(exc).__name__}: {exc}")
