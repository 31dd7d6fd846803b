"""The MongoDB store on servers that lack what its production path relies on, and the probe that decides.

The one such server is FerretDB 1.x, the local stand-in for MongoDB (no MongoDB server can be installed from
the package registries the project's machines reach). It has two gaps, each compensated in a module of its own:
filters are not pushed down (no_pushdown.py) and updates are not atomic (non_atomic.py). MongoJobStore.connect()
returns an AccommodatingStore unless told otherwise; it asks the server at its first call (probe.py) and, on
MongoDB, every compensation steps aside.
"""

from __future__ import annotations

from shared.store.mongo_compat.no_pushdown import NoFilterPushdown
from shared.store.mongo_compat.non_atomic import NonAtomicUpdates


class AccommodatingStore(NonAtomicUpdates, NoFilterPushdown):
    """MongoJobStore with both compensations, each active only where the server needs it."""
