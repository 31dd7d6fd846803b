"""Handlers by name. Adding a job type is one decorated function in one module.

A handler takes the job's payload and a HandlerContext; it may be a plain or an async function. It signals
failure by raising. Registering a name twice raises, so a bad deploy fails at start-up instead of silently
running the wrong code under one name. A registration may set the type's defaults (timeout, attempt budget,
retry backoff); a job's own fields override them.

Plug-in modules are imported inside `loading()`: their registrations become visible only once every module
has loaded, so a failure leaves the registry as it was (nothing half-loaded).
"""

from __future__ import annotations

import inspect
import logging
import threading
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from shared.backoff import Backoff
from shared.type_defaults import TypeDefaults

Payload = dict[str, Any]


class JobLogger(logging.LoggerAdapter[logging.Logger]):
    """A logger that adds the job's ids to every record, merged with the caller's own `extra`."""

    def process(self, msg: Any, kwargs: MutableMapping[str, Any]) -> tuple[Any, MutableMapping[str, Any]]:
        kwargs["extra"] = {**(self.extra or {}), **(kwargs.get("extra") or {})}
        return msg, kwargs


@dataclass(frozen=True)
class HandlerContext:
    """What a handler knows about the attempt it runs.

    `cancelled` is set when the job is cancelled while it runs (DELETE /jobs/{id}): a plain function should
    check it between steps and stop by raising; an async handler's task is also cancelled. A handler that
    ignores it and finishes has its result recorded all the same."""

    job_id: str
    job_type: str
    attempt: int  # this attempt's number, from 1
    deadline: datetime
    tenant_id: str
    # When this attempt was due: the job's scheduledAt, which a retry moves to the end of its backoff.
    scheduled_at: datetime
    logger: logging.LoggerAdapter[logging.Logger]
    cancelled: threading.Event
    # A run of a recurring template: the fire time it runs for (the night a nightly report covers, whatever
    # retries or catch-up moved its start to) and the template's id; None for a one-off job.
    planned_at: datetime | None = None
    template_id: str | None = None


HandlerFn = Callable[[Payload, HandlerContext], Any] | Callable[[Payload, HandlerContext], Awaitable[Any]]


class HandlerError(Exception):
    """A handler's own, expected failure (bad payload, a dependency said no); recorded as lastError."""


class DuplicateHandler(Exception):
    pass


@dataclass(frozen=True)
class Handler:
    name: str
    fn: HandlerFn
    is_async: bool
    defaults: TypeDefaults
    module: str


class HandlerRegistry:
    def __init__(self) -> None:
        self._handlers: dict[str, Handler] = {}
        self._staged: dict[str, Handler] | None = None
        self._lock = threading.RLock()

    def register(
        self,
        name: str,
        *,
        timeout: float | timedelta | None = None,
        max_attempts: int | None = None,
        backoff: Backoff | None = None,
    ) -> Callable[[HandlerFn], HandlerFn]:
        """Register the decorated function as job type `name`. `timeout` (seconds, or a timedelta) bounds each
        attempt (default JOB_TIMEOUT); `max_attempts` is the budget of jobs that give none (default 3);
        `backoff` spaces the retries (default 2^attempts s, capped at 5 min). A job's own timeoutSeconds and
        maxAttempts win over these."""
        if not isinstance(name, str) or not name.strip() or name != name.strip():
            raise ValueError(f"a job type name must be a non-empty string without surrounding spaces, not {name!r}")
        defaults = TypeDefaults.of(timeout=timeout, max_attempts=max_attempts, backoff=backoff)

        def decorate(fn: HandlerFn) -> HandlerFn:
            handler = Handler(name, fn, inspect.iscoroutinefunction(fn), defaults, getattr(fn, "__module__", "?"))
            with self._lock:
                existing = self._handlers.get(name) or (self._staged or {}).get(name)
                if existing is not None:
                    raise DuplicateHandler(
                        f"handler {name!r} is registered twice (by {existing.module} and by {handler.module})"
                    )
                (self._staged if self._staged is not None else self._handlers)[name] = handler
            return fn

        return decorate

    @contextmanager
    def loading(self) -> Iterator[None]:
        """Registrations made inside become visible together when the block ends without an exception, and
        are all dropped when it raises."""
        with self._lock:
            if self._staged is not None:
                raise RuntimeError("handler modules are already being loaded")
            self._staged = {}
        try:
            yield
            with self._lock:
                self._handlers.update(self._staged)
        finally:
            with self._lock:
                self._staged = None

    def handler(self, name: str) -> Handler | None:
        return self._handlers.get(name)

    def get(self, name: str) -> HandlerFn | None:
        handler = self._handlers.get(name)
        return handler.fn if handler else None

    def is_async(self, name: str) -> bool:
        return self._handlers[name].is_async

    def defaults(self, name: str) -> TypeDefaults | None:
        handler = self._handlers.get(name)
        return handler.defaults if handler else None

    def names(self) -> list[str]:
        return sorted(self._handlers)

    def __contains__(self, name: object) -> bool:
        return name in self._handlers
