"""The reaper's loop outlives a failed sweep, whatever the sweep raised: a reaper that exits leaves every stuck
job stuck (on 2026-12-04 one exited on a write error its store did not translate)."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta
from pathlib import Path

from services.reaper.sweeper import run
from shared import metrics
from shared.backends import open_backend
from shared.model import Status, utc_now
from shared.store.base import StoreUnavailable
from tests.contract.store_kit import running

WAIT_S = 30


class FirstSweepsFail:
    """The embedded store, whose first `release_stale_claims` calls (a sweep's first step) raise `errors` in turn:
    what a sweep meets when the store refuses a write or one of our steps has a bug."""

    def __init__(self, store: object, errors: list[Exception]) -> None:
        self._store = store
        self._errors = errors
        self.sweeps = 0
        self.swept_after_errors = threading.Event()

    def release_stale_claims(self, before: datetime) -> int:
        self.sweeps += 1
        if self._errors:
            raise self._errors.pop(0)
        self.swept_after_errors.set()
        return self._store.release_stale_claims(before)  # type: ignore[attr-defined, no-any-return]

    def __getattr__(self, name: str) -> object:
        return getattr(self._store, name)


def test_sweeps_go_on_after_an_untranslated_error_and_a_bug(tmp_path: Path) -> None:
    backend = open_backend(f"sqlite://{tmp_path}/jobs.db")
    backend.jobs.ensure_schema()
    lost = running(backend.jobs, lease_until=utc_now() - timedelta(seconds=1))  # its executor died
    errors: list[Exception] = [RuntimeError("WriteError: an untranslated driver error"), StoreUnavailable("down")]
    store = FirstSweepsFail(backend.jobs, errors)
    failures_before = metrics.REAPER_SWEEP_ERRORS._value.get()
    stop = threading.Event()
    reaper = threading.Thread(
        target=run,
        args=(store,),
        kwargs={"interval": timedelta(milliseconds=10), "queued_timeout": timedelta(minutes=1), "stop": stop},
    )
    reaper.start()
    try:
        assert store.swept_after_errors.wait(WAIT_S), "the reaper stopped sweeping after a failed sweep"
    finally:
        stop.set()
        reaper.join(WAIT_S)
    assert not reaper.is_alive()
    assert store.sweeps >= 3
    assert metrics.REAPER_SWEEP_ERRORS._value.get() - failures_before == 2
    recovered = backend.jobs.get(lost.id)
    assert recovered is not None
    assert recovered.status is Status.PENDING  # the sweep after the failures did its work
    backend.close()
