"""Handlers by name. Adding a job type is one decorated function in one module.

A handler takes the job's payload and a HandlerContext; it may be a plain or an async function. It signals
failure by raising. Registering a name twice raises at import time, so a bad deploy fails at start-up
instead of silently running the wrong code under one name.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

Payload = dict[str, Any]


@dataclass(frozen=True)
class HandlerContext:
    job_id: str
    job_type: str
    attempt: int
    deadline: datetime


HandlerFn = Callable[[Payload, HandlerContext], Any] | Callable[[Payload, HandlerContext], Awaitable[Any]]


class HandlerError(Exception):
    """A handler's own, expected failure (bad payload, a dependency said no); recorded as lastError."""


class DuplicateHandler(Exception):
    pass


class HandlerRegistry:
    def __init__(self) -> None:
        self._handlers: dict[str, HandlerFn] = {}

    def register(self, name: str) -> Callable[[HandlerFn], HandlerFn]:
        def decorate(fn: HandlerFn) -> HandlerFn:
            if name in self._handlers:
                raise DuplicateHandler(f"handler {name!r} is registered twice")
            self._handlers[name] = fn
            return fn

        return decorate

    def get(self, name: str) -> HandlerFn | None:
        return self._handlers.get(name)

    def is_async(self, name: str) -> bool:
        return inspect.iscoroutinefunction(self._handlers[name])

    def names(self) -> list[str]:
        return sorted(self._handlers)

    def __contains__(self, name: object) -> bool:
        return name in self._handlers
