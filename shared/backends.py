"""The one way a process opens the database its jobs live in: from a URL.

    sqlite:///var/lib/jobsched/jobsched.db     the embedded store's file (an absolute path)
    mongodb://host:27017/?replicaSet=rs0       a MongoDB database (its name: MONGO_DB); mongodb+srv:// too

A Backend is that database's parts, each over the same connections: the job store, the job types the
executors announce, the console's reader, the API keys, and the tenants' signing secrets and credentials of http
jobs (sealed with the `keyring` given: shared/sealing_keys.py says which). Every binary and command opens its
store here (the distributed binaries from MONGO_URI and MONGO_DB, `jobsched dev` / `standalone` from their file,
`jobsched keys` and `seed` from `--store URL` or `--sqlite PATH`). The MongoDB driver is imported only for a
MongoDB URL: the embedded mode never loads it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from shared.config import ConfigError, Settings, without_password
from shared.http_jobs.credentials import Credentials
from shared.http_jobs.secrets import SigningSecrets
from shared.job_types.announcements import JobTypeRegistry
from shared.keys.base import KeyStore
from shared.sealing import Keyring
from shared.sealing_keys import configured_keyring
from shared.store.base import JobStore
from shared.store.browse import JobBrowser

if TYPE_CHECKING:
    from shared.store.mongo import MongoJobStore
    from shared.store.sqlite import SqliteJobStore

SQLITE_SCHEMES = ("sqlite",)
MONGODB_SCHEMES = ("mongodb", "mongodb+srv")


@dataclass(frozen=True)
class Backend:
    url: str  # for messages: without a password
    jobs: JobStore
    job_types: JobTypeRegistry
    browser: JobBrowser
    # Opened when asked: only an API with AUTH=required and `jobsched keys` use the keys.
    open_keys: Callable[[], KeyStore]
    signing_secrets: SigningSecrets
    credentials: Credentials

    def close(self) -> None:
        self.jobs.close()


def open_backend(
    url: str,
    *,
    database: str = "jobsched",
    timeout: timedelta = timedelta(seconds=5),
    durable: bool = True,
    keyring: Keyring | None = None,
) -> Backend:
    """The backend at `url`; `database` names a MongoDB database, `timeout` bounds a MongoDB server's selection
    and connection (then StoreUnavailable), `durable` is the SQLite file's synchronous=FULL, `keyring` seals the
    secrets (none: those that need it are refused). Nothing is asked of a server before the first call, so a
    process starts while its database is down."""
    scheme = urlsplit(url).scheme.lower()
    if scheme in SQLITE_SCHEMES:
        from shared.store.sqlite import SqliteJobStore

        return sqlite_backend(SqliteJobStore(sqlite_path(url), durable=durable), keyring)
    if scheme in MONGODB_SCHEMES:
        from shared.store.mongo import MongoJobStore

        timeout_ms = round(timeout.total_seconds() * 1000)
        return mongo_backend(MongoJobStore.connect(url, database, timeout_ms=timeout_ms), keyring)
    raise ConfigError(
        f"a store URL is sqlite:///absolute/path/to/file.db or mongodb://host..., not {without_password(url)!r}"
    )


def backend_from_settings(settings: Settings) -> Backend:
    """The distributed binaries' backend: MONGO_URI's server, MONGO_DB's database, MONGO_TIMEOUT, the secrets key
    the settings give."""
    return open_backend(
        settings.mongo_uri,
        database=settings.mongo_db,
        timeout=settings.mongo_timeout,
        keyring=configured_keyring(settings),
    )


def tool_backend(store_url: str | None, sqlite_file: str | None, settings: Settings) -> Backend:
    """A command's backend: `--store URL`, or `--sqlite PATH` (relative to the working directory), else the
    settings' MongoDB."""
    if store_url and sqlite_file:
        raise ConfigError("give --store URL or --sqlite PATH, not both")
    if sqlite_file:
        return open_backend(sqlite_url(os.path.abspath(sqlite_file)))
    if store_url:
        return open_backend(store_url, database=settings.mongo_db, timeout=settings.mongo_timeout)
    return backend_from_settings(settings)


def sqlite_url(path: str) -> str:
    return f"sqlite://{path}"


def sqlite_path(url: str) -> str:
    """The file of `sqlite:///absolute/path`; a relative path is refused (a service's working directory is
    wherever it was started)."""
    path = url.split("://", 1)[1]
    if not path.startswith("/"):
        raise ConfigError(f"a SQLite URL names an absolute path (sqlite:///var/lib/jobs.db), not {url!r}")
    return path


def sqlite_backend(store: SqliteJobStore, keyring: Keyring | None = None) -> Backend:
    """The parts beside an open SQLite store, in its file."""
    from shared.store.sqlite.browse import SqliteBrowser
    from shared.store.sqlite.credentials import SqliteCredentials
    from shared.store.sqlite.job_types import SqliteJobTypes
    from shared.store.sqlite.keys import SqliteKeyStore
    from shared.store.sqlite.signing_secrets import SqliteSigningSecrets

    keyring = keyring or Keyring.missing()
    database = store.database

    return Backend(
        url=sqlite_url(database.path),
        jobs=store,
        job_types=SqliteJobTypes(database),
        browser=SqliteBrowser(database),
        open_keys=lambda: SqliteKeyStore(database.path),
        signing_secrets=SqliteSigningSecrets(database, keyring),
        credentials=Credentials(SqliteCredentials(database), keyring),
    )


def mongo_backend(store: MongoJobStore, keyring: Keyring | None = None) -> Backend:
    """The parts beside an open MongoDB store, in its database, over its client."""
    from shared.store.mongo.browse import MongoBrowser
    from shared.store.mongo.credentials import MongoCredentials
    from shared.store.mongo.job_types import MongoJobTypes
    from shared.store.mongo.keys import MongoKeyStore
    from shared.store.mongo.signing_secrets import MongoSigningSecrets

    keyring = keyring or Keyring.missing()
    database = store.database

    return Backend(
        url=database.described,
        jobs=store,
        job_types=MongoJobTypes(database),
        browser=MongoBrowser(database),
        open_keys=lambda: MongoKeyStore(database),
        signing_secrets=MongoSigningSecrets(database, keyring),
        credentials=Credentials(MongoCredentials(database), keyring),
    )
