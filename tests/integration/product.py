"""The product's own parts wired in-process on a store, for tests that need jobs to actually run."""

from __future__ import annotations

import threading
from datetime import timedelta

from jobsched import JobTypes
from services.scheduler.dispatcher import Dispatcher
from shared.bus.memory import MemoryBus
from shared.election.single import SingleNodeElector
from shared.handlers.builtin import builtin_types
from shared.store.base import JobStore
from tests.executor_support import Feed, executor_of, running

BUILTIN_TYPES = builtin_types(demo=True)  # what the binaries serve by default


def run_what_is_due(store: JobStore, registry: JobTypes = BUILTIN_TYPES) -> None:
    """One pass of scheduler and executors over the store, as `jobsched dev` wires them: claim every due run
    and run each handler once (a failed attempt's retry stays pending, for the caller to wait for or cancel)."""
    bus = MemoryBus()
    job_types = registry.names()
    dispatcher = Dispatcher(store, bus, job_types, batch=500)
    term = SingleNodeElector().campaign(threading.Event())
    assert term is not None
    subscriptions = {t: bus.subscribe(t) for t in job_types}
    # Each type's executor is fed what its subscription received, so that each pass ends once all of it ran.
    feeds = {t: Feed(t) for t in job_types}
    executors = [
        executor_of(store, bus, registry, t, feeds[t], "test", timeout=timedelta(seconds=5), concurrency=16)
        for t in job_types
    ]
    with running(*executors):
        while dispatcher.tick(term).claimed:
            for job_type, subscription in subscriptions.items():
                wakeups = []
                while (delivery := subscription.poll(0)) is not None:
                    wakeups.append(delivery.read_wakeup())
                feeds[job_type].drain(*wakeups)
