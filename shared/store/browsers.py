"""Which browser reads a store: above the browse module and its implementations, which import its types."""

from __future__ import annotations

from shared.store.browse import JobBrowser


def browser_for(store: object) -> JobBrowser:
    """The browser that reads `store`'s data through its own connection."""
    # Imported here: the embedded mode does not load the MongoDB driver.
    from shared.store.sqlite import SqliteJobStore

    if isinstance(store, SqliteJobStore):
        from shared.store.browse_sqlite import SqliteBrowser

        return SqliteBrowser(store)
    from shared.store.mongo import MongoJobStore

    if isinstance(store, MongoJobStore):
        from shared.store.browse_mongo import MongoBrowser

        return MongoBrowser(store)
    raise TypeError(f"no job browser for {type(store).__name__}")
