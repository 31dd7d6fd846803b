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
        self._server_has_gaps: bool | None = None

    @property
    def _server_lacks_pushdown(self) -> bool:
        """The server's own answer, whatever was forced: what it can index is not a choice."""
        if self._server_has_gaps is None:
            with translate_errors():
                self._server_has_gaps = lacks_pushdown_and_atomic_updates(self._client)
        return self._server_has_gaps

    @property
    def _accommodating(self) -> bool:
        """Whether the claim and write compensations run: as forced, or as the server answers."""
        return self._server_lacks_pushdown if self._accommodate is None else self._accommodate
