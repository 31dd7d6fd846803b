"""Loading the user's job types: named by JOBSCHED_HANDLERS (or an executor's `--handlers`), and by installed
distributions' entry points in the group `jobsched.handlers`.

A name is `module:attribute`, naming a JobTypes (or one JobType), or a module, whose JobTypes collections are
all loaded (`myapp.jobs:jobs`, `myapp.jobs`). Modules written for the first releases register into the
deprecated process-wide registry while they are imported, and an entry point may still name a function that
takes that registry. Everything loads together or not at all; a module that fails to import, or a name that
is taken, is a PluginError naming the module and the cause, and the binaries exit with status 2 on it.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
from collections.abc import Iterable, Mapping
from importlib.metadata import EntryPoint, entry_points
from types import ModuleType
from typing import NoReturn

from jobsched.handlers import DuplicateHandler, JobType, JobTypes
from shared.config import Settings, comma_list
from shared.handlers import registry as legacy_registry
from shared.handlers.builtin import DEMO, builtin_types
from shared.handlers.registry import AlreadyLoading, expose_legacy_paths
from shared.http_jobs.request import JOB_TYPE as HTTP_JOB_TYPE

log = logging.getLogger("jobsched.handlers")

ENTRY_POINT_GROUP = "jobsched.handlers"
HANDLERS_VARIABLE = "JOBSCHED_HANDLERS"


class PluginError(Exception):
    """A handler module could not be loaded; the message names the module and the cause."""


def load_handlers(types: JobTypes, names: Iterable[str], *, use_entry_points: bool = True) -> list[str]:
    """Load the collections `names` name, then the entry points', into `types`; the sources loaded, in order."""
    loaded: list[str] = []
    found = JobTypes()
    expose_legacy_paths()
    try:
        with legacy_registry.loading():
            for name in names:
                try:
                    _collect(found, _resolve(name))
                    JobTypes(types).include([*found, *legacy_registry.with_staged()])  # a taken name, named here
                except Exception as exc:
                    raise PluginError(
                        f"handler module {name!r} failed to load: {_describe(exc)}{_hint(name, exc)}"
                    ) from exc
                loaded.append(name)
            if use_entry_points:
                for point in entry_points(group=ENTRY_POINT_GROUP):
                    loaded.append(_load_entry_point(types, found, point))
    except AlreadyLoading as exc:  # another thread of this process loads handlers right now
        raise PluginError(str(exc)) from exc
    if len(legacy_registry):
        log.warning(
            "handler types registered through the deprecated shared.handlers registry: collect them in a"
            " jobsched.JobTypes (docs/handlers.md)",
            extra={"action": "deprecated_registry", "jobTypes": legacy_registry.names()},
        )
    try:
        found.include(legacy_registry)
        types.include(found)
    except DuplicateHandler as exc:
        raise PluginError(f"handlers failed to load: {_describe(exc)}{_taken_hint(exc)}") from exc
    return loaded


def _resolve(name: str) -> object:
    module_name, _, attribute = name.partition(":")
    target: object = importlib.import_module(module_name)
    for part in filter(None, attribute.split(".")):
        target = getattr(target, part)
    return target


def _collect(found: JobTypes, target: object) -> None:
    """What a name points at: a JobTypes, a JobType, a module (its JobTypes), or a function taking the registry."""
    if isinstance(target, JobTypes):
        found.include(target)
    elif isinstance(target, JobType):
        found.include([target])
    elif isinstance(target, ModuleType):
        for collection in {id(v): v for v in vars(target).values() if isinstance(v, JobTypes)}.values():
            found.include(collection)
    elif callable(target):
        target(legacy_registry)
    else:
        raise TypeError(f"{target!r} is neither a JobTypes, a JobType, a module nor a function taking the registry")


def _load_entry_point(types: JobTypes, found: JobTypes, point: EntryPoint) -> str:
    where = f"entry point {point.name!r} = {point.value!r}"
    if point.dist is not None:
        where += f" of {point.dist.name} {point.dist.version}"
    try:
        _collect(found, point.load())
        JobTypes(types).include([*found, *legacy_registry.with_staged()])
    except Exception as exc:
        raise PluginError(f"handler {where} failed to load: {_describe(exc)}") from exc
    return point.value


def load_handlers_or_exit(types: JobTypes, option: str | None, env: Mapping[str, str], program: str) -> list[str]:
    """What every binary that runs handlers does at start: `option` (a `--handlers` value) or else
    JOBSCHED_HANDLERS, then the entry points; on failure, the message on stderr and exit status 2."""
    modules = comma_list(option if option is not None else env.get(HANDLERS_VARIABLE))
    try:
        return load_handlers(types, modules)
    except PluginError as exc:
        _exit(program, str(exc))


def _exit(program: str, message: str) -> NoReturn:
    print(f"{program}: {message}", file=sys.stderr)
    raise SystemExit(2)


def _taken_hint(exc: DuplicateHandler) -> str:
    if exc.name in DEMO:
        return f" ({exc.name!r} is a demo type: DEMO_JOB_TYPES=false frees its name)"
    return ""


def _hint(module: str, exc: BaseException) -> str:
    """What to check when the module's own package is not found: where Python looks for it; which setting
    frees a demo type's name."""
    if isinstance(exc, DuplicateHandler):
        return _taken_hint(exc)
    package = module.partition(".")[0]
    if not isinstance(exc, ModuleNotFoundError) or exc.name != package:
        return ""
    return (
        f" (is the folder that holds {package}/ on PYTHONPATH, e.g. PYTHONPATH=/path/to/src, or is {package}"
        " installed in this environment?)"
    )


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def main() -> None:
    """`python -m shared.handlers.plugins`: the job types this environment's executors would run (the
    built-ins, the http type and every plug-in's), one line, space-separated; what deployments/local/stack.sh
    starts executors for. Exits 2 like the executors when a plug-in does not load."""
    types = builtin_types(demo=Settings.from_env().demo_job_types)
    load_handlers_or_exit(types, None, os.environ, "python -m shared.handlers.plugins")
    print(*sorted({*types.names(), HTTP_JOB_TYPE}))


if __name__ == "__main__":
    main()
