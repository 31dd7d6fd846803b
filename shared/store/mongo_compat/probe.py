"""Whether the server needs the compensations of this package, asked once per store at its first call."""

from __future__ import annotations

from typing import Any

from pymongo import MongoClient

from shared.store.mongo import MongoJobStore, translate_errors


def lacks_pushdown_and_atomic_updates(client: MongoClient[dict[str, Any]]) -> bool:
    """True for FerretDB 1.x, which names itself in buildInfo (`ferretdbVersion`); MongoDB proper has neither
    gap. Later FerretDB versions are a different engine and are taken as MongoDB (not verified here)."""
    info = client.admin.command("buildInfo")
    return str(info.get("ferretdbVersion", "")).startswith("v1.")


class Probed(MongoJobStore):
    """The production store, told (or asking the server, at the first call that needs to know) whether its
    compensations apply. Each compensation steps aside when they do not, leaving the production path alone."""

    def __init__(self, client: MongoClient[dict[str, Any]], database: str, *, accommodate: bool | None) -> None:
        super().__init__(client, database)
        self._accommodate = accommodate

    @property
    def _accommodating(self) -> bool:
        if self._accommodate is None:
            with translate_errors():
                self._accommodate = lacks_pushdown_and_atomic_updates(self._client)
        return self._accommodate
