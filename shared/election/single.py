"""Single-node election for the embedded mode: the only node always leads, in one endless term."""

from __future__ import annotations

import math
import threading

from shared.election.base import Term


class SingleNodeElector:
    def __init__(self) -> None:
        self._term: Term | None = None
        self._generation = 0

    def campaign(self, stop: threading.Event) -> Term | None:
        if stop.is_set():
            return None
        self._generation += 1
        self._term = Term(token=self._generation, trusted_until=math.inf)
        return self._term

    def resign(self) -> None:
        if self._term is not None:
            self._term.lost.set()
            self._term = None

    def close(self) -> None:
        self.resign()
