"""A SQLite file: the embedded database of `jobsched dev`, `jobsched standalone` and the server-free tests, with
everything kept in it. Nothing outside this folder touches its private parts (tests/unit/test_private_members.py);
shared/backends.py opens the parts below together, over one SqliteDatabase.

    database.py         SqliteDatabase: the file, its connection pool, read() and write() transactions (one
                        writer at a time, BEGIN IMMEDIATE), what its errors mean (translate_errors)
    migrations.py       the numbered migrations that make every table, index and trigger of the file, each one
                        frozen once released
    schema.py           the partial indexes' conditions the queries repeat (FINAL_SQL ...), the column sets, and
                        ensure_schema: the pending migrations and the file's version (user_version)
    codecs.py           values to SQL and back: times as unix milliseconds, rows as Job and Execution
    jobs.py             SqliteJobStore, the JobStore protocol (shared/store/base.py): its transactions
    writes.py           what a write transaction does to one job: create, start, close an attempt, guarded update
    claims.py           the claim's queries: what is in flight, the lanes of due runs, the rate reservations
    browse.py           SqliteBrowser, the console's reads (JobBrowser)
    recent.py           the last hour's endings, counted by minute as they happen (for browse.py)
    minutes.py          the console's history: per-minute counters, the backlog sampled and every tenant summed
    job_types.py        SqliteJobTypes, what executors announce and the operator's limits (JobTypeRegistry)
    keys.py             SqliteKeyStore, the API keys (KeyStore): a connection of its own per operation
    signing_secrets.py  SqliteSigningSecrets, the tenants' secrets that sign http jobs (SigningSecrets)
    credentials.py      SqliteCredentials, the tenants' sealed credentials of http jobs (CredentialStore)
"""

from shared.store.sqlite.database import DEFAULT_PATH, SqliteDatabase
from shared.store.sqlite.jobs import SqliteJobStore

__all__ = ["DEFAULT_PATH", "SqliteDatabase", "SqliteJobStore"]
