"""The registry of the first releases, kept for handler modules written against it (`registry.register(...)`):
deprecated in favour of `jobsched.JobTypes`, whose `handler` decorator it forwards to.

Plug-in modules are imported inside `loading()`: their registrations become visible only once every module
has loaded, so a failure leaves the registry as it was (nothing half-loaded).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

from jobsched.backoff import Backoff
from jobsched.handlers import HandlerFn, JobType, JobTypes


def moved_names(module: str, moved: dict[str, str]) -> Callable[[str], Any]:
    """A module's `__getattr__` for names it exported before they moved to the public `jobsched` package: each
    is still importable from it, with a DeprecationWarning that names the new place (`jobsched.X` or
    `jobsched.handlers.X`)."""

    def __getattr__(name: str) -> Any:
        if name not in moved:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        warnings.warn(f"{module}.{name} is deprecated: use {moved[name]}", DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(moved[name].rpartition(".")[0]), name)

    return __getattr__


__getattr__ = moved_names(
    __name__,
    {
        "HandlerContext": "jobsched.HandlerContext",
        "HandlerError": "jobsched.HandlerError",
        "Payload": "jobsched.Payload",
        "JobLogger": "jobsched.handlers.JobLogger",
        "DuplicateHandler": "jobsched.handlers.DuplicateHandler",
        "HandlerFn": "jobsched.handlers.HandlerFn",
    },
)


class AlreadyLoading(RuntimeError):
    pass


def expose_legacy_paths() -> None:
    """Let handler modules of the first releases import `shared.handlers` from an installed wheel, where the
    server's packages are `jobsched._server.*`: while the environment has no package named `shared` of its own,
    that name is this one's, for the release in which those modules keep working. In a repository checkout it
    is this package already; beside an application's own `shared` nothing is changed."""
    package = __name__.removesuffix(".handlers.registry")
    if package == "shared" or "shared" in sys.modules or importlib.util.find_spec("shared") is not None:
        return
    sys.modules["shared"] = importlib.import_module(package)
    sys.modules["shared.handlers"] = importlib.import_module(f"{package}.handlers")
    sys.modules["shared.handlers.registry"] = sys.modules[__name__]


class HandlerRegistry(JobTypes):
    """A JobTypes that legacy handler modules register into while they are imported."""

    def __init__(self) -> None:
        super().__init__()
        self._staged: JobTypes | None = None
        self._loading = threading.RLock()

    def register(
        self,
        name: str,
        *,
        timeout: float | timedelta | None = None,
        max_attempts: int | None = None,
        backoff: Backoff | None = None,
    ) -> Callable[[HandlerFn], HandlerFn]:
        """`@registry.register("name")`: registers the function and returns it unchanged."""
        warnings.warn(
            "registry.register is deprecated: collect job types in a jobsched.JobTypes and use its handler decorator",
            DeprecationWarning,
            stacklevel=2,
        )
        decorator = self.handler(name, timeout=timeout, max_attempts=max_attempts, backoff=backoff)

        def decorate(fn: HandlerFn) -> HandlerFn:
            decorator(fn)
            return fn

        return decorate

    def include(self, types: Iterable[JobType[Any, Any]]) -> None:
        """While modules load, types are staged (a name taken by a loaded type still raises at once)."""
        staged = getattr(self, "_staged", None)  # None while JobTypes.__init__ runs
        if staged is None:
            super().include(types)
            return
        adding = list(types)
        JobTypes(self).include(adding)  # raises DuplicateHandler naming both modules
        staged.include(adding)

    def with_staged(self) -> list[JobType[Any, Any]]:
        """The loaded types and those a load in progress has registered so far."""
        return [*self, *(self._staged or ())]

    @contextmanager
    def loading(self) -> Iterator[None]:
        """Registrations made inside become visible together when the block ends without an exception, and
        are all dropped when it raises."""
        with self._loading:
            if self._staged is not None:
                raise AlreadyLoading("handler modules are already being loaded in this process")
            self._staged = JobTypes()
        try:
            yield
            super().include(self._staged)
        finally:
            self._staged = None
