"""Loading the user's handler modules: named by JOBSCHED_HANDLERS (or an executor's `--handlers`), and by
installed distributions' entry points in the group `jobsched.handlers`.

An entry point names a module whose import registers its handlers (`send_email = myapp.handlers`), or a
function that takes the registry (`myapp.handlers:register`). Everything loads into the registry together or
not at all; a module that fails to import, or registers a name that exists, is a PluginError naming the
module and the cause, and the binaries exit with status 2 on it.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Iterable, Mapping
from importlib.metadata import EntryPoint, entry_points
from types import ModuleType
from typing import NoReturn

from shared.config import comma_list
from shared.handlers.registry import HandlerRegistry

ENTRY_POINT_GROUP = "jobsched.handlers"
HANDLERS_VARIABLE = "JOBSCHED_HANDLERS"


class PluginError(Exception):
    """A handler module could not be loaded; the message names the module and the cause."""


def load_handlers(registry: HandlerRegistry, modules: Iterable[str], *, use_entry_points: bool = True) -> list[str]:
    """Import `modules`, then the entry points' targets, into `registry`; the sources loaded, in order."""
    loaded: list[str] = []
    with registry.loading():
        for name in modules:
            try:
                importlib.import_module(name)
            except Exception as exc:
                raise PluginError(
                    f"handler module {name!r} failed to load: {_describe(exc)}{_hint(name, exc)}"
                ) from exc
            loaded.append(name)
        if use_entry_points:
            for point in entry_points(group=ENTRY_POINT_GROUP):
                loaded.append(_load_entry_point(registry, point))
    return loaded


def _load_entry_point(registry: HandlerRegistry, point: EntryPoint) -> str:
    where = f"entry point {point.name!r} = {point.value!r}"
    if point.dist is not None:
        where += f" of {point.dist.name} {point.dist.version}"
    try:
        target = point.load()
        if not isinstance(target, ModuleType):
            if not callable(target):
                raise TypeError(f"{point.value} is neither a module nor a function taking the registry")
            target(registry)
    except Exception as exc:
        raise PluginError(f"handler {where} failed to load: {_describe(exc)}") from exc
    return point.value


def load_handlers_or_exit(
    registry: HandlerRegistry, option: str | None, env: Mapping[str, str], program: str
) -> list[str]:
    """What every binary that runs handlers does at start: `option` (a `--handlers` value) or else
    JOBSCHED_HANDLERS, then the entry points; on failure, the message on stderr and exit status 2."""
    modules = comma_list(option if option is not None else env.get(HANDLERS_VARIABLE))
    try:
        return load_handlers(registry, modules)
    except PluginError as exc:
        _exit(program, str(exc))


def _exit(program: str, message: str) -> NoReturn:
    print(f"{program}: {message}", file=sys.stderr)
    raise SystemExit(2)


def _hint(module: str, exc: BaseException) -> str:
    """What to check when the module's own package is not found: where Python looks for it."""
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
    built-ins and every plug-in's), one line, space-separated; what deployments/local/stack.sh starts
    executors for. Exits 2 like the executors when a plug-in does not load."""
    from shared.handlers import registry  # the process-wide registry, built-ins included

    load_handlers_or_exit(registry, None, os.environ, "python -m shared.handlers.plugins")
    print(*registry.names())


if __name__ == "__main__":
    main()
