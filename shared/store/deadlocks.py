"""PostgreSQL deadlocks, which FerretDB 2 reports to its clients: the aborted command is run again.

FerretDB 2 runs each command as PostgreSQL statements. When two of them wait for each other's locks,
PostgreSQL aborts one (after `deadlock_timeout`) and FerretDB answers it with code 1, InternalError,
"deadlock detected". MongoDB has no such answer. The aborted command changed nothing, so running it again is
safe: a transient error, retried as a user of any MongoDB driver retries one.

Where jobsched meets it: replicas starting together on a database of an earlier version, one dropping the old
global unique index while the others create the schema's indexes (docs/ferretdb.md has the counts); and a
create, which many clients may send at once with one idempotency key (one insert wins, the others are duplicates:
a deadlock's victim among them is run again to get its answer). The other job writes never send the concurrent
sorted findAndModify calls that deadlock there.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TypeVar

from pymongo.errors import OperationFailure

T = TypeVar("T")
INTERNAL_ERROR = 1
TRIES = 5
# Replicas that deadlocked once tend to collide again if they retry in step: a short random pause parts them.
MAX_PAUSE_S = 0.1


def is_deadlock(exc: OperationFailure) -> bool:
    return exc.code == INTERNAL_ERROR and "deadlock detected" in str(exc)


def retry_deadlocks(step: Callable[[], T]) -> T:
    """`step()`, run again (up to TRIES in all) while the server aborts it as a deadlock's victim."""
    for _ in range(TRIES - 1):
        try:
            return step()
        except OperationFailure as exc:
            if not is_deadlock(exc):
                raise
        time.sleep(random.uniform(0, MAX_PAUSE_S))
    return step()
