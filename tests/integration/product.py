"""The product's own parts wired in-process on a store, for tests that need jobs to actually run."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

from jobsched import JobTypes
from services.executor.attempt_runner import AttemptRunner
from services.scheduler.dispatcher import Dispatcher
from shared.bus.memory import MemoryBus
from shared.election.single import SingleNodeElector
from shared.handlers.builtin import builtin_types
from shared.store.base import JobStore

BUILTIN_TYPES = builtin_types(demo=True)  # what the binaries serve by default


def run_what_is_due(store: JobStore, registry: JobTypes = BUILTIN_TYPES) -> None:
    """One pass of scheduler and executors over the store, as `jobsched dev` wires them: claim every due run
    and run each handler once (a failed attempt's retry stays pending, for the caller to wait for or cancel)."""
    bus = MemoryBus()
    job_types = registry.names()
    dispatcher = Dispatcher(store, bus, job_types, batch=500)
    term = SingleNodeElector().campaign(threading.Event())
    assert term is not None
    workers = {
        t: AttemptRunner(
            store, bus, registry, t, "test", default_timeout=timedelta(seconds=5), lease=timedelta(minutes=5)
        )
        for t in job_types
    }
    subscriptions = {t: bus.subscribe(t) for t in job_types}
    with ThreadPoolExecutor(16) as pool:
        while dispatcher.tick(term).claimed:
            for job_type, subscription in subscriptions.items():
                deliveries = []
                while (delivery := subscription.poll(0)) is not None:
                    deliveries.append(delivery)
                list(pool.map(workers[job_type].process, deliveries))
