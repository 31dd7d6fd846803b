"""PostgreSQL deadlocks, which FerretDB 2 reports to its clients: the aborted command is run again.

FerretDB 2 runs each command as PostgreSQL statements. When two of them wait for each other's locks,
PostgreSQL aborts one (after `deadlock_timeout`, 1 s by default) and FerretDB answers it with code 1,
InternalError, "deadlock detected" (in an update's write error, with PostgreSQL's own code instead:
PG_DEADLOCK_DETECTED). MongoDB has no such answer. The aborted command changed nothing, so running it again is
safe: a transient error, retried as a user of any MongoDB driver retries one.

Where jobsched meets it:
- replicas starting together on a database of an earlier version, one dropping the old global unique index while
  the others create the schema's indexes (docs/ferretdb.md has the counts);
- creates of one idempotency key at once. DocumentDB checks a unique index as an exclusion constraint: each insert
  writes its entry, then waits for every other uncommitted entry of the key, so N concurrent inserts wait for each
  other and PostgreSQL breaks the cycles one victim per second (32 at once took 20 s to 3 min here, and victims
  that inserted again at once formed new cycles). So a process sends one create of a key at a time
  (`key_lock`: the others then meet a committed entry, a duplicate at once), and a victim, after a
  pause that grows, first looks whether the key has found its holder before it inserts again. A template's run
  whose insert was a victim (two leaders, or a leader and a trigger, adding one fire time at once) is inserted
  again the same way.
The other job writes never send the concurrent sorted findAndModify calls that deadlock there.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from pymongo.errors import OperationFailure

T = TypeVar("T")
INTERNAL_ERROR = 1
# PostgreSQL's own code for a deadlock's victim (SQLSTATE 40P01 in its packed form, MAKE_SQLSTATE), which DocumentDB
# puts in a write error of an update as it is (seen here: updates of one workflow by creates racing each other).
PG_DEADLOCK_DETECTED = 16908292
TRIES = 6
# Pauses before the retries grow from FIRST_PAUSE_S (random up to it, so that victims part) to MAX_PAUSE_S:
# a cycle takes deadlock_timeout to break, and a victim that inserts again while the others still wait joins one.
FIRST_PAUSE_S = 0.25
MAX_PAUSE_S = 2.0
# Locks by a key's hash: bounded whatever the number of keys, and two keys share one only by chance.
KEY_STRIPES = 1024
_stripes = [threading.Lock() for _ in range(KEY_STRIPES)]


def is_deadlock(exc: OperationFailure) -> bool:
    return is_deadlock_answer(exc.code, str(exc))


def is_deadlock_answer(code: object, message: object) -> bool:
    """A server's error answer (a command's, or one write's of a batch) that names a deadlock's victim."""
    return code in (INTERNAL_ERROR, PG_DEADLOCK_DETECTED) and "deadlock detected" in str(message)


def retry_deadlocks(step: Callable[[], T], before_retry: Callable[[], None] | None = None) -> T:
    """`step()`, run again (up to TRIES in all) while the server aborts it as a deadlock's victim. `before_retry`
    runs after each pause: it may end the retries by raising (a create whose key another insert now holds)."""
    for attempt in range(TRIES - 1):
        try:
            return step()
        except OperationFailure as exc:
            if not is_deadlock(exc):
                raise
        time.sleep(random.uniform(0, min(MAX_PAUSE_S, FIRST_PAUSE_S * 2**attempt)))
        if before_retry is not None:
            before_retry()
    return step()


def key_lock(tenant_id: str, idempotency_key: str) -> threading.Lock:
    """The lock that creates of this (tenant, key) hold in this process, so that they go one at a time."""
    return _stripes[hash((tenant_id, idempotency_key)) % KEY_STRIPES]
